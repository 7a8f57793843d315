# `cpack` in a build folder makes a Debian package of what `cmake --install` installs, under /usr:
# the command, libgpusel (shared and static, headers, CMake and pkg-config files), the simulator and
# its machines, the man page, the bash, zsh and fish completions and the Python package.
# integration.deb (tests/integration/test_deb.py) installs it into a scratch Debian 12 and removes
# it again.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME gpusel)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "put each process of a multi-GPU program on the right NVIDIA GPU")
set(CPACK_PACKAGE_DESCRIPTION "gpusel resolves --gpu lists (nvidia-smi indices, UUIDs, free:N) to GPU UUIDs, \
reads CUDA_VISIBLE_DEVICES as the driver does, launches one worker per GPU and binds each by UUID; \
with simulated GPU machines for testing without a GPU.")
set(CPACK_PACKAGE_CONTACT "gpusel maintainers <gpusel@localhost>")
# Staged with DESTDIR and the real prefix, so that the install steps see /usr (the .pc file names
# it, zsh's completion goes to vendor-completions, no gpusel.pth is written).
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # gpusel_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)  # Depends from the binaries (dpkg-shlibdeps, dpkg-dev)
set(CPACK_STRIP_FILES ON)               # no debug information in the package
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "python3")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${CMAKE_SOURCE_DIR}/cmake/deb/postinst
  ${CMAKE_SOURCE_DIR}/cmake/deb/prerm ${CMAKE_SOURCE_DIR}/cmake/deb/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
