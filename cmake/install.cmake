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

# Relative to the .pc file, so the installed tree can be moved (or installed with --prefix).
file(RELATIVE_PATH GPUSEL_PC_TO_PREFIX "${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig" "${CMAKE_INSTALL_PREFIX}")
configure_file(cmake/gpusel.pc.in ${CMAKE_BINARY_DIR}/gpusel.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/gpusel.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

install(FILES share/completions/gpusel.bash DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
  RENAME gpusel)
install(FILES share/completions/_gpusel DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/site-functions)
# The man page's header carries the version: installed as configured from project(VERSION).
configure_file(share/man/gpusel.1 ${CMAKE_BINARY_DIR}/share/man/gpusel.1 @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/share/man/gpusel.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(DIRECTORY python/gpusel DESTINATION ${GPUSEL_PYTHON_DIR} PATTERN "__pycache__" EXCLUDE)
