# gpusel's pure core (src/core) and the headers beside it that the simulator uses: shared by the
# top-level project (CMakeLists.txt) and the simulator's own (sim/CMakeLists.txt, standalone or as a
# subdirectory), so that both build the core from this one list.
get_filename_component(GPUSEL_ROOT_DIR "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)

set(GPUSEL_CORE_SOURCES error.cpp spec.cpp visible.cpp resolve.cpp units.cpp assignment.cpp pick.cpp
  text.cpp gpu_fields.cpp placement.cpp placement_slurm.cpp amd_visible.cpp)
list(TRANSFORM GPUSEL_CORE_SOURCES PREPEND ${GPUSEL_ROOT_DIR}/src/core/)

# gpusel_header_targets(): the driver's ABI declarations (the .def lists, nvml_abi.hpp,
# cuda_abi.hpp) for the doubles and the fault libraries, which export what the loaders look up; the
# platform's headers for the gpusel command (src/platform: UTF-16 on Windows, the process tree) and
# the doubles.
function(gpusel_header_targets)
  add_library(gpusel_driver_abi INTERFACE)
  target_include_directories(gpusel_driver_abi INTERFACE $<BUILD_INTERFACE:${GPUSEL_ROOT_DIR}/src/driver>)
  add_library(gpusel_platform_headers INTERFACE)
  target_include_directories(gpusel_platform_headers INTERFACE
    $<BUILD_INTERFACE:${GPUSEL_ROOT_DIR}/src/platform>)
endfunction()
