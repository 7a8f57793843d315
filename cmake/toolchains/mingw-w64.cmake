# Cross-build for 64-bit Windows with Debian's mingw-w64 (the posix thread model, so std::thread
# and std::mutex work). Used by the `mingw` preset; the tests run under wine
# (CMAKE_CROSSCOMPILING_EMULATOR).
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(GPUSEL_MINGW_TRIPLE x86_64-w64-mingw32)

set(CMAKE_C_COMPILER ${GPUSEL_MINGW_TRIPLE}-gcc-posix)
set(CMAKE_CXX_COMPILER ${GPUSEL_MINGW_TRIPLE}-g++-posix)
set(CMAKE_RC_COMPILER ${GPUSEL_MINGW_TRIPLE}-windres)

set(CMAKE_FIND_ROOT_PATH /usr/${GPUSEL_MINGW_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# ctest runs the .exe tests under wine (64-bit).
find_program(GPUSEL_WINE NAMES wine wine64 REQUIRED)
set(CMAKE_CROSSCOMPILING_EMULATOR ${GPUSEL_WINE})

# The header-only dependencies come from the build machine: cmake/cross-deps.cmake exposes only
# their own folders (never /usr/include as a whole), and GoogleTest is built from its sources.
set(GPUSEL_CROSS_HEADER_ROOT /usr/include)
set(GPUSEL_CROSS_GTEST_SOURCE /usr/src/googletest)
