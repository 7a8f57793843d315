# What `cmake --install` puts in the prefix.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The Python package goes where Debian's python3 looks, chosen at install time by the prefix:
# lib/python3/dist-packages under /usr (Debian's folder for packaged modules), else
# lib/python3.X/dist-packages (X from /usr/bin/python3, else the Python CMake finds), which
# /usr/local's python3 searches. GPUSEL_PYTHON_DIR names one folder for every prefix instead.
set(GPUSEL_PYTHON_DIR "" CACHE STRING
    "where the gpusel Python package is installed, relative to the prefix (empty: automatic)")
set(GPUSEL_PYTHON_VERSION "")
if(EXISTS /usr/bin/python3)
  execute_process(COMMAND /usr/bin/python3 -c "import sys; print('%d.%d' % sys.version_info[:2])"
    OUTPUT_VARIABLE GPUSEL_PYTHON_VERSION OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
endif()
if(GPUSEL_PYTHON_VERSION STREQUAL "")
  find_package(Python3 QUIET COMPONENTS Interpreter)
  if(Python3_FOUND)
    set(GPUSEL_PYTHON_VERSION "${Python3_VERSION_MAJOR}.${Python3_VERSION_MINOR}")
  endif()
endif()
if(GPUSEL_PYTHON_VERSION STREQUAL "")
  set(GPUSEL_PYTHON_VERSIONED_DIR "lib/python3/dist-packages")
else()
  set(GPUSEL_PYTHON_VERSIONED_DIR "lib/python${GPUSEL_PYTHON_VERSION}/dist-packages")
endif()

install(DIRECTORY include/gpusel DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
install(FILES ${GPUSEL_GENERATED_INCLUDE_DIR}/gpusel/version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gpusel
  COMPONENT dev)
install(TARGETS gpusel_shared gpusel_static gpusel_cli11 EXPORT gpuselTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT lib NAMELINK_COMPONENT dev
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS gpusel_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cli)
# The CUDA probe's helper, where the library looks for it (../libexec/gpusel from lib/ and bin/).
install(TARGETS gpusel_probe_helper RUNTIME DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/gpusel COMPONENT lib)

# The simulator's files (component cli) are installed by its own rules: sim/CMakeLists.txt.

install(EXPORT gpuselTargets NAMESPACE gpusel:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gpusel COMPONENT dev)
configure_package_config_file(cmake/gpuselConfig.cmake.in ${CMAKE_BINARY_DIR}/gpuselConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gpusel)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/gpuselConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/gpuselConfig.cmake ${CMAKE_BINARY_DIR}/gpuselConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gpusel COMPONENT dev)

# The .pc file names the prefix it is installed under (--prefix included), written at install
# time: clean paths (no lib/pkgconfig/../..), and right for a staged install (DESTDIR) too. A run
# path only where the loader would not find the library by itself (not under /usr or /usr/local,
# whose multiarch folders are in Debian's ld.so.conf; never in the Debian package).
set(GPUSEL_PREFIX "@GPUSEL_PREFIX@")  # kept for the install step to fill in
set(GPUSEL_PC_RPATH "@GPUSEL_PC_RPATH@")
configure_file(cmake/gpusel.pc.in ${CMAKE_BINARY_DIR}/gpusel.pc.in @ONLY)
install(CODE "
  string(REGEX REPLACE \"(.)/+$\" \"\\\\1\" prefix \"\${CMAKE_INSTALL_PREFIX}\")
  file(READ \"${CMAKE_BINARY_DIR}/gpusel.pc.in\" pc)
  string(REPLACE \"@GPUSEL_PREFIX@\" \"\${prefix}\" pc \"\${pc}\")
  set(rpath \"\")
  if(NOT prefix MATCHES \"^/usr(/local)?$\")
    set(rpath \" -Wl,-rpath,\\\${libdir}\")
  endif()
  string(REPLACE \"@GPUSEL_PC_RPATH@\" \"\${rpath}\" pc \"\${pc}\")
  file(WRITE \"${CMAKE_BINARY_DIR}/pc-staging/gpusel.pc\" \"\${pc}\")
  file(INSTALL \"${CMAKE_BINARY_DIR}/pc-staging/gpusel.pc\" DESTINATION \"\${prefix}/${CMAKE_INSTALL_LIBDIR}/pkgconfig\")
" COMPONENT dev)

# Debian's folders in the packages, generated at build time (CMakeLists.txt): the man page
# gzipped; /usr/share/doc/PACKAGE/copyright and changelog.gz only for the packages (cpack installs
# each component by name, which takes its EXCLUDE_FROM_ALL files too), not in a plain install.
if(GPUSEL_INTERFACE_FILES)
  install(FILES ${GPUSEL_SHARE_OUT}/completions/gpusel.bash
    DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME gpusel COMPONENT cli)
  # zsh looks in share/zsh/site-functions under /usr/local, Debian's zsh in vendor-completions
  # under /usr (the Debian package's prefix): chosen at install time, by the prefix installed to.
  install(CODE "
    if(CMAKE_INSTALL_PREFIX MATCHES \"^/usr/?$\")
      set(zsh_dir \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions\")
    else()
      set(zsh_dir \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_DATADIR}/zsh/site-functions\")
    endif()
    file(INSTALL \"${GPUSEL_SHARE_OUT}/completions/_gpusel\" DESTINATION \"\${zsh_dir}\")  # DESTDIR: added by file(INSTALL)
  " COMPONENT cli)
  install(FILES ${GPUSEL_SHARE_OUT}/completions/gpusel.fish
    DESTINATION ${CMAKE_INSTALL_DATADIR}/fish/vendor_completions.d COMPONENT cli)
  install(FILES ${GPUSEL_SHARE_OUT}/man/gpusel.1.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT cli)
  foreach(component lib dev cli python)
    install(FILES ${CMAKE_SOURCE_DIR}/cmake/deb/copyright ${CMAKE_BINARY_DIR}/deb/changelog.gz
      DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${GPUSEL_DEB_PACKAGE_${component}}
      COMPONENT ${component} EXCLUDE_FROM_ALL)
  endforeach()
endif()

# The Python package: under /usr in lib/python3/dist-packages, elsewhere in lib/python3.X/
# dist-packages (chosen at install time, by the prefix), unless GPUSEL_PYTHON_DIR names a folder.
# Nothing is written outside the prefix: under another prefix than /usr and /usr/local, python3
# finds the package through PYTHONPATH (the install says which; docs/python.md).
if(GPUSEL_PYTHON_DIR STREQUAL "")
  install(CODE "
    if(CMAKE_INSTALL_PREFIX MATCHES \"^/usr/?$\")
      set(pydir \"\${CMAKE_INSTALL_PREFIX}/lib/python3/dist-packages\")
    else()
      set(pydir \"\${CMAKE_INSTALL_PREFIX}/${GPUSEL_PYTHON_VERSIONED_DIR}\")
    endif()
    file(INSTALL \"${CMAKE_SOURCE_DIR}/python/gpusel\" DESTINATION \"\${pydir}\" PATTERN \"__pycache__\" EXCLUDE)
    if(NOT CMAKE_INSTALL_PREFIX MATCHES \"^/usr(/local)?/?$\")
      message(STATUS \"python3 finds the gpusel package with PYTHONPATH=\${pydir}\")
    endif()
  " COMPONENT python)
else()
  install(DIRECTORY python/gpusel DESTINATION ${GPUSEL_PYTHON_DIR} COMPONENT python PATTERN "__pycache__" EXCLUDE)
endif()
