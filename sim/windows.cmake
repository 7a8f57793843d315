# The simulator's Windows build: the doubles as nvml.dll and nvcuda.dll, and the fault folders.
# Included from sim/CMakeLists.txt when WIN32 (cmake/windows.cmake has the platform files).

# A simulator double: nvml.dll or nvcuda.dll, exporting exactly the functions marked
# __declspec(dllexport) (the driver's C entry points).
function(gpusel_windows_sim_library target soname dir)
  if(soname STREQUAL "libnvidia-ml.so.1")
    set(name nvml)
  elseif(soname STREQUAL "libcuda.so.1")
    set(name nvcuda)
  elseif(soname STREQUAL "libgpusel-sim-machines.so")
    set(name gpusel-sim-machines)
  else()
    message(FATAL_ERROR "no Windows name for ${soname}")
  endif()
  target_link_libraries(${target} PRIVATE gpusel_sim_core)
  set_target_properties(${target} PROPERTIES PREFIX "" OUTPUT_NAME ${name} SUFFIX ".dll"
    RUNTIME_OUTPUT_DIRECTORY ${dir} LIBRARY_OUTPUT_DIRECTORY ${dir} ARCHIVE_OUTPUT_DIRECTORY ${dir}/lib)
endfunction()

# The fault folders hold copies (Windows symbolic links need a privilege); the machine files are
# found through GPUSEL_SIM_ROOT's machines folder, a copy of sim/machines made at build time.
macro(gpusel_windows_sim_folders)
  file(MAKE_DIRECTORY ${GPUSEL_SIM_DIR}/no-nvml ${GPUSEL_SIM_DIR}/no-cuda ${GPUSEL_SIM_DIR}/nvml-no-v2)
  add_custom_target(gpusel_sim_windows_folders ALL
    COMMAND ${CMAKE_COMMAND} -E copy_if_different $<TARGET_FILE:gpusel_sim_cuda> ${GPUSEL_SIM_DIR}/no-nvml/
    COMMAND ${CMAKE_COMMAND} -E copy_if_different $<TARGET_FILE:gpusel_sim_nvml> ${GPUSEL_SIM_DIR}/no-cuda/
    COMMAND ${CMAKE_COMMAND} -E copy_if_different $<TARGET_FILE:gpusel_sim_cuda> ${GPUSEL_SIM_DIR}/nvml-no-v2/
    COMMAND ${CMAKE_COMMAND} -E copy_directory ${CMAKE_CURRENT_SOURCE_DIR}/machines ${GPUSEL_SIM_DIR}/machines
    DEPENDS gpusel_sim_nvml gpusel_sim_cuda
    COMMENT "simulator folders for Windows")
endmacro()

