# What `cmake --install` puts in the prefix.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The Python package goes where Debian's python3 looks in both /usr and /usr/local:
# lib/python3.X/dist-packages (X from /usr/bin/python3, else the Python CMake finds). Empty, or
# the old default lib/python3/dist-packages (which /usr/local's python never searched): automatic.
set(GPUSEL_PYTHON_DIR "" CACHE STRING
    "where the gpusel Python package is installed, relative to the prefix (empty: automatic)")
if(GPUSEL_PYTHON_DIR STREQUAL "" OR GPUSEL_PYTHON_DIR STREQUAL "${CMAKE_INSTALL_LIBDIR}/python3/dist-packages")
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
    set(GPUSEL_PYTHON_DIR "lib/python3/dist-packages")
  else()
    set(GPUSEL_PYTHON_DIR "lib/python${GPUSEL_PYTHON_VERSION}/dist-packages")
  endif()
endif()
# The simulator sits apart from the loader's search path, so it is never picked up by accident.
set(GPUSEL_SIM_INSTALL_DIR "lib/gpusel/sim")

install(DIRECTORY include/gpusel DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${GPUSEL_GENERATED_INCLUDE_DIR}/gpusel/version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gpusel)
install(TARGETS gpusel_shared gpusel_static gpusel_cli11 EXPORT gpuselTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS gpusel_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The CUDA probe's helper, where the library looks for it (../libexec/gpusel from lib/ and bin/).
install(TARGETS gpusel_probe_helper RUNTIME DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/gpusel)

install(TARGETS gpusel_sim_nvml gpusel_sim_cuda gpusel_sim_machines LIBRARY DESTINATION ${GPUSEL_SIM_INSTALL_DIR})
install(TARGETS gpusel_sim_nvml_no_v2 LIBRARY DESTINATION ${GPUSEL_SIM_INSTALL_DIR}/nvml-no-v2)
install(DIRECTORY sim/machines/ DESTINATION ${GPUSEL_SIM_INSTALL_DIR}/machines FILES_MATCHING PATTERN "*.toml")
if(GPUSEL_SIM_CUDART_TARGETS)
  # The simulated CUDA runtime, beside the driver double and linked into the fault folders.
  install(TARGETS ${GPUSEL_SIM_CUDART_TARGETS} LIBRARY DESTINATION ${GPUSEL_SIM_INSTALL_DIR})
  install(CODE "
    set(sim \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${GPUSEL_SIM_INSTALL_DIR}\")
    foreach(folder no-nvml no-cuda nvml-no-v2)
      file(MAKE_DIRECTORY \"\${sim}/\${folder}\")
      foreach(lib libcudart.so.11.0 libcudart.so.12 libcudart.so.13)
        file(CREATE_LINK ../\${lib} \"\${sim}/\${folder}/\${lib}\" SYMBOLIC)
      endforeach()
    endforeach()
  ")
endif()
install(CODE "
  set(sim \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${GPUSEL_SIM_INSTALL_DIR}\")
  file(MAKE_DIRECTORY \"\${sim}/no-nvml\" \"\${sim}/no-cuda\")
  file(CREATE_LINK ../libcuda.so.1 \"\${sim}/no-nvml/libcuda.so.1\" SYMBOLIC)
  file(CREATE_LINK ../libnvidia-ml.so.1 \"\${sim}/no-cuda/libnvidia-ml.so.1\" SYMBOLIC)
  file(CREATE_LINK ../libcuda.so.1 \"\${sim}/nvml-no-v2/libcuda.so.1\" SYMBOLIC)
")

install(EXPORT gpuselTargets NAMESPACE gpusel:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gpusel)
configure_package_config_file(cmake/gpuselConfig.cmake.in ${CMAKE_BINARY_DIR}/gpuselConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gpusel)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/gpuselConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/gpuselConfig.cmake ${CMAKE_BINARY_DIR}/gpuselConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gpusel)

# The .pc file names the prefix it is installed under (--prefix included), written at install
# time: clean paths (no lib/pkgconfig/../..), and right for a staged install (DESTDIR) too.
set(GPUSEL_PREFIX "@GPUSEL_PREFIX@")  # kept for the install step to fill in
configure_file(cmake/gpusel.pc.in ${CMAKE_BINARY_DIR}/gpusel.pc.in @ONLY)
install(CODE "
  string(REGEX REPLACE \"(.)/+$\" \"\\\\1\" prefix \"\${CMAKE_INSTALL_PREFIX}\")
  file(READ \"${CMAKE_BINARY_DIR}/gpusel.pc.in\" pc)
  string(REPLACE \"@GPUSEL_PREFIX@\" \"\${prefix}\" pc \"\${pc}\")
  set(pc_dir \"\$ENV{DESTDIR}\${prefix}/${CMAKE_INSTALL_LIBDIR}/pkgconfig\")
  message(STATUS \"Installing: \${pc_dir}/gpusel.pc\")
  file(MAKE_DIRECTORY \"\${pc_dir}\")
  file(WRITE \"\${pc_dir}/gpusel.pc\" \"\${pc}\")
")

if(GPUSEL_INTERFACE_FILES)
  install(FILES ${GPUSEL_SHARE_OUT}/completions/gpusel.bash
    DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME gpusel)
  # zsh looks in share/zsh/site-functions under /usr/local, Debian's zsh in vendor-completions
  # under /usr (the Debian package's prefix): chosen at install time, by the prefix installed to.
  install(CODE "
    if(CMAKE_INSTALL_PREFIX MATCHES \"^/usr/?$\")
      set(zsh_dir \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions\")
    else()
      set(zsh_dir \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_DATADIR}/zsh/site-functions\")
    endif()
    file(INSTALL \"${GPUSEL_SHARE_OUT}/completions/_gpusel\" DESTINATION \"\${zsh_dir}\")  # DESTDIR: added by file(INSTALL)
  ")
  install(FILES ${GPUSEL_SHARE_OUT}/completions/gpusel.fish
    DESTINATION ${CMAKE_INSTALL_DATADIR}/fish/vendor_completions.d)
  install(FILES ${GPUSEL_SHARE_OUT}/man/gpusel.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
endif()
install(DIRECTORY python/gpusel DESTINATION ${GPUSEL_PYTHON_DIR} PATTERN "__pycache__" EXCLUDE)

# `import gpusel` without PYTHONPATH: Debian's /usr/bin/python3 searches the package's folder under
# /usr and /usr/local by itself; for any other prefix a gpusel.pth naming the folder goes where it
# searches: /usr/local/lib/python3.X/dist-packages when installing as root, else the installing
# user's site-packages (python3 -m site --user-site). GPUSEL_PYTHON_PTH_DIR (at install time) names
# another folder; staged installs (DESTDIR, as packaging does) write none; -DGPUSEL_PYTHON_PTH=OFF
# turns it off.
option(GPUSEL_PYTHON_PTH "cmake --install writes a gpusel.pth so that python3 finds the package" ON)
if(GPUSEL_PYTHON_PTH AND NOT WIN32 AND NOT GPUSEL_PYTHON_VERSION STREQUAL "")
  install(CODE "
    set(pydir \"\${CMAKE_INSTALL_PREFIX}/${GPUSEL_PYTHON_DIR}\")
    if(\"\$ENV{DESTDIR}\" STREQUAL \"\" AND NOT CMAKE_INSTALL_PREFIX MATCHES \"^/usr(/local)?/?$\")
      set(pth_dir \"\$ENV{GPUSEL_PYTHON_PTH_DIR}\")
      if(pth_dir STREQUAL \"\")
        execute_process(COMMAND id -u OUTPUT_VARIABLE uid OUTPUT_STRIP_TRAILING_WHITESPACE)
        if(uid STREQUAL \"0\")
          set(pth_dir \"/usr/local/lib/python${GPUSEL_PYTHON_VERSION}/dist-packages\")
        else()
          execute_process(COMMAND /usr/bin/python3 -m site --user-site OUTPUT_VARIABLE pth_dir
            OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
        endif()
      endif()
      if(NOT pth_dir STREQUAL \"\")
        message(STATUS \"Installing: \${pth_dir}/gpusel.pth (python3 finds \${pydir} through it)\")
        file(MAKE_DIRECTORY \"\${pth_dir}\")
        file(WRITE \"\${pth_dir}/gpusel.pth\" \"\${pydir}\\n\")
      endif()
    endif()
  ")
endif()
