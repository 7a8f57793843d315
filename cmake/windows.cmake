# The Windows build (mingw-w64 cross or MSYS2, or MSVC): the platform files and the DLL's exports
# (the simulator's doubles as nvml.dll and nvcuda.dll: sim/windows.cmake). Included from
# CMakeLists.txt when WIN32, and from sim/CMakeLists.txt when the simulator is built alone.

# Platform files: each POSIX file has a Windows counterpart with the same interface.
list(TRANSFORM GPUSEL_DRIVER_SOURCES REPLACE "^src/driver/dl\\.cpp$" "src/driver/dl_win.cpp")
list(TRANSFORM GPUSEL_LAUNCH_SOURCES REPLACE "^src/launch/launch\\.cpp$" "src/launch/launch_win.cpp")
list(TRANSFORM GPUSEL_LEASE_SOURCES REPLACE "^src/lease/lease\\.cpp$" "src/lease/lease_win.cpp")
list(REMOVE_ITEM GPUSEL_LEASE_SOURCES src/lease/job_record.cpp)  # Linux's lock table
set(GPUSEL_PLATFORM_SOURCES src/platform/ancestry_win.cpp src/platform/process_win.cpp src/platform/win.cpp
  src/platform/shell.cpp src/platform/kfd_topology.cpp src/platform/file_text.cpp)

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
