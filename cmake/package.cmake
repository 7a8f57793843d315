# `cpack` in a build folder makes Debian packages of what `cmake --install` installs, under /usr,
# split as Debian splits a library, one package per install component (cmake/install.cmake):
#   libgpusel2      (lib)     libgpusel.so.2 and its CUDA probe helper (/usr/libexec/gpusel)
#   libgpusel-dev   (dev)     headers, libgpusel.so, libgpusel.a, the CMake and pkg-config files
#   gpusel          (cli)     the command, the simulator and its machines, man page, completions
#   python3-gpusel  (python)  the Python module, in /usr/lib/python3/dist-packages
# Each carries /usr/share/doc/PACKAGE/copyright (DEP-5) and changelog.gz. integration.deb
# (tests/integration/test_deb.py) checks them with lintian, installs them into a scratch Debian 12
# and removes them again.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME gpusel)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${GPUSEL_MAINTAINER}")  # cmake/maintainer.cmake
set(CPACK_DEBIAN_PACKAGE_SOURCE gpusel)
# Staged with DESTDIR and the real prefix, so that the install steps see /usr (the .pc file names
# it, zsh's completion goes to vendor-completions, the Python module to python3/dist-packages).
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL lib dev cli python)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # <package>_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)  # Depends from the binaries (dpkg-shlibdeps, dpkg-dev)
set(CPACK_STRIP_FILES ON)               # no debug information in the packages
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(GPUSEL_DEB_EXACT "${GPUSEL_DEB_PACKAGE_lib} (= ${PROJECT_VERSION})")

# Descriptions: a synopsis, then lines under 80 columns.
set(GPUSEL_DEB_ABOUT "gpusel resolves --gpu lists (nvidia-smi indices, UUIDs, free:N) to GPU UUIDs,
reads CUDA_VISIBLE_DEVICES as the driver does, launches one worker per GPU and
binds each by UUID.")

set(CPACK_DEBIAN_LIB_PACKAGE_NAME ${GPUSEL_DEB_PACKAGE_lib})
set(CPACK_DEBIAN_LIB_PACKAGE_SECTION libs)
set(CPACK_COMPONENT_LIB_DESCRIPTION "library that puts each process on the right NVIDIA GPU
${GPUSEL_DEB_ABOUT}
This package holds the shared library and its CUDA probe helper.")
# The shlibs file and the ldconfig trigger (cmake/deb/lib/triggers), as Debian does it now. Both
# written here rather than by cpack: cpack 3.25 can only generate shlibs for every package (the
# gpusel package's simulator libraries would be declared too), and for a package with a library in
# /usr/lib it calls ldconfig from a postinst and postrm of its own, which it writes only when the
# package brings none. libgpusel2 needs no such script: the two "none" names below do not exist,
# so cpack adds nothing of them (it says "missing file") and writes none.
file(WRITE ${CMAKE_BINARY_DIR}/deb/lib/shlibs
  "libgpusel ${GPUSEL_SOVERSION} ${GPUSEL_DEB_PACKAGE_lib} (>= ${PROJECT_VERSION})\n")
set(CPACK_DEBIAN_LIB_PACKAGE_CONTROL_EXTRA ${CMAKE_BINARY_DIR}/deb/lib/shlibs
  ${CMAKE_SOURCE_DIR}/cmake/deb/lib/triggers
  ${CMAKE_SOURCE_DIR}/cmake/deb/lib/none/postinst ${CMAKE_SOURCE_DIR}/cmake/deb/lib/none/postrm)

set(CPACK_DEBIAN_DEV_PACKAGE_NAME ${GPUSEL_DEB_PACKAGE_dev})
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "${GPUSEL_DEB_EXACT}")
set(CPACK_COMPONENT_DEV_DESCRIPTION "development files of libgpusel
${GPUSEL_DEB_ABOUT}
This package holds the headers, the static library and the CMake and
pkg-config files.")

set(CPACK_DEBIAN_CLI_PACKAGE_NAME ${GPUSEL_DEB_PACKAGE_cli})
set(CPACK_DEBIAN_CLI_PACKAGE_SECTION utils)
set(CPACK_COMPONENT_CLI_DESCRIPTION "put each process of a multi-GPU program on the right NVIDIA GPU
${GPUSEL_DEB_ABOUT}
This package holds the gpusel command and simulated GPU machines for testing
without a GPU.")
set(CPACK_DEBIAN_CLI_PACKAGE_CONTROL_EXTRA ${CMAKE_SOURCE_DIR}/cmake/deb/postinst
  ${CMAKE_SOURCE_DIR}/cmake/deb/postrm)

set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME ${GPUSEL_DEB_PACKAGE_python})
set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
set(CPACK_DEBIAN_PYTHON_PACKAGE_ARCHITECTURE all)
set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS "python3, ${GPUSEL_DEB_PACKAGE_lib} (>= ${PROJECT_VERSION})")
set(CPACK_DEBIAN_PYTHON_PACKAGE_SHLIBDEPS OFF)
set(CPACK_COMPONENT_PYTHON_DESCRIPTION "Python module of libgpusel
${GPUSEL_DEB_ABOUT}
This package holds the gpusel module for Python 3.")
set(CPACK_DEBIAN_PYTHON_PACKAGE_CONTROL_EXTRA ${CMAKE_SOURCE_DIR}/cmake/deb/prerm)
include(CPack)
