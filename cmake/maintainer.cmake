# The Debian packages' maintainer, in one place: the Maintainer field of every package
# (cmake/package.cmake) and the changelog's entries (cmake/deb/changelog.in).
set(GPUSEL_MAINTAINER "gpusel maintainers <maintainers@gpusel.example.org>" CACHE STRING
  "the maintainer named in the Debian packages and their changelog")
# The Debian packages made from the install components (cmake/install.cmake, cmake/package.cmake).
set(GPUSEL_DEB_PACKAGE_lib libgpusel${GPUSEL_SOVERSION})
set(GPUSEL_DEB_PACKAGE_dev libgpusel-dev)
set(GPUSEL_DEB_PACKAGE_cli gpusel)
set(GPUSEL_DEB_PACKAGE_python python3-gpusel)
