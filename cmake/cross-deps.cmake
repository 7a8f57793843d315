# Dependencies of a cross-build (the mingw preset): the header-only libraries are taken from the
# build machine, but only their own folders are put on the include path, through a build-local
# folder of symlinks (the build machine's /usr/include must never be seen by the cross-compiler).
# A native Windows build (MSYS2, vcpkg) finds the packages with find_package instead.
set(GPUSEL_CROSS_INCLUDE_DIR ${CMAKE_BINARY_DIR}/cross-include)
file(MAKE_DIRECTORY ${GPUSEL_CROSS_INCLUDE_DIR})
foreach(dir CLI fmt nlohmann toml++)
  if(NOT EXISTS ${GPUSEL_CROSS_HEADER_ROOT}/${dir})
    message(FATAL_ERROR "${GPUSEL_CROSS_HEADER_ROOT}/${dir} is missing: run scripts/install-deps")
  endif()
  file(CREATE_LINK ${GPUSEL_CROSS_HEADER_ROOT}/${dir} ${GPUSEL_CROSS_INCLUDE_DIR}/${dir} SYMBOLIC)
endforeach()
set(TOMLPLUSPLUS_INCLUDE_DIR ${GPUSEL_CROSS_INCLUDE_DIR})
foreach(target CLI11::CLI11 fmt::fmt-header-only nlohmann_json::nlohmann_json)
  add_library(${target} INTERFACE IMPORTED)
  set_target_properties(${target} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES ${GPUSEL_CROSS_INCLUDE_DIR}
    INTERFACE_SYSTEM_INCLUDE_DIRECTORIES ${GPUSEL_CROSS_INCLUDE_DIR})
endforeach()
set_property(TARGET fmt::fmt-header-only PROPERTY INTERFACE_COMPILE_DEFINITIONS FMT_HEADER_ONLY=1)
set(GPUSEL_CROSS_DEPS ON)

# GoogleTest from its sources (its own flags: added before the project's warning options).
if(GPUSEL_BUILD_TESTS AND GPUSEL_CROSS_GTEST_SOURCE)
  set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
  set(BUILD_GMOCK OFF CACHE BOOL "" FORCE)
  set(gtest_force_shared_crt ON CACHE BOOL "" FORCE)
  add_subdirectory(${GPUSEL_CROSS_GTEST_SOURCE} ${CMAKE_BINARY_DIR}/googletest EXCLUDE_FROM_ALL SYSTEM)
endif()

# Every .exe the build or ctest runs (GoogleTest's discovery included) runs under wine in one
# prefix of this build's own, made on first use (about 7 s), without wine's debug chatter. Wine's
# server keeps its socket folder in TMPDIR (Debian's wine: TMPDIR/wine-XXXXXX, its name kept in
# the prefix), and each wine program looks for it in its own TMPDIR: every one of them gets this
# build's folder, so that none is left in the machine's /tmp.
if(GPUSEL_WINE)
  set(GPUSEL_WINE_TMPDIR ${CMAKE_BINARY_DIR}/wine-tmp)
  file(MAKE_DIRECTORY ${GPUSEL_WINE_TMPDIR})
  set(CMAKE_CROSSCOMPILING_EMULATOR env WINEPREFIX=${CMAKE_BINARY_DIR}/wineprefix
    TMPDIR=${GPUSEL_WINE_TMPDIR} WINEDEBUG=-all ${GPUSEL_WINE})
endif()
