# The Windows build (mingw-w64 cross or MSYS2, or MSVC): the platform files, the DLL's exports and
# the simulator's doubles as nvml.dll and nvcuda.dll. Included from CMakeLists.txt when WIN32.

# Platform files: each POSIX file has a Windows counterpart with the same interface.
list(TRANSFORM GPUSEL_DRIVER_SOURCES REPLACE "^src/driver/dl\\.cpp$" "src/driver/dl_win.cpp")
list(TRANSFORM GPUSEL_LAUNCH_SOURCES REPLACE "^src/launch/launch\\.cpp$" "src/launch/launch_win.cpp")
list(TRANSFORM GPUSEL_LEASE_SOURCES REPLACE "^src/lease/lease\\.cpp$" "src/lease/lease_win.cpp")
list(REMOVE_ITEM GPUSEL_LEASE_SOURCES src/lease/job_record.cpp)  # Linux's lock table
set(GPUSEL_PLATFORM_SOURCES src/platform/ancestry_win.cpp src/platform/process_win.cpp src/platform/win.cpp
  src/platform/shell.cpp)
set(GPUSEL_SIM_PLATFORM_SOURCES sim/sim_common_win.cpp sim/usage_win.cpp src/platform/win.cpp)

# Everything is Unicode (the -W functions), and windows.h stays small.
add_compile_definitions(UNICODE _UNICODE WIN32_LEAN_AND_MEAN NOMINMAX _WIN32_WINNT=0x0A00)
if(MINGW)
  # One self-contained file each: libstdc++, libgcc and winpthread linked in, so the programs,
  # gpusel.dll and the doubles need no MinGW DLL beside them (and wine needs none either).
  add_link_options(-static)
endif()

# gpusel.dll: the C functions (GPUSEL_API, dllexport) and an import library; the C++ API is
# used through the static library, whose users get GPUSEL_STATIC.
macro(gpusel_windows_library)
  foreach(layer ${GPUSEL_LAYERS})
    target_compile_definitions(gpusel_${layer} PRIVATE GPUSEL_BUILDING_LIBRARY)
  endforeach()
  target_compile_definitions(gpusel_static INTERFACE GPUSEL_STATIC)
  target_link_libraries(gpusel_shared PRIVATE ws2_32)
  target_link_libraries(gpusel_static PUBLIC ws2_32)
  set_target_properties(gpusel_shared PROPERTIES PREFIX "" IMPORT_PREFIX "" IMPORT_SUFFIX ".lib"
    WINDOWS_EXPORT_ALL_SYMBOLS OFF)
  if(MSVC)
    set_target_properties(gpusel_static PROPERTIES OUTPUT_NAME gpusel_static)
  endif()
endmacro()

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
    COMMAND ${CMAKE_COMMAND} -E copy_directory ${CMAKE_SOURCE_DIR}/sim/machines ${GPUSEL_SIM_DIR}/machines
    DEPENDS gpusel_sim_nvml gpusel_sim_cuda
    COMMENT "simulator folders for Windows")
endmacro()

