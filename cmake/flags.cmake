# The warning and sanitizer flags of every target: the top-level project's and the simulator's own
# (sim/CMakeLists.txt, when it is the top project).
option(GPUSEL_WERROR "Treat warnings as errors" OFF)
option(GPUSEL_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
option(GPUSEL_TSAN "Build with ThreadSanitizer" OFF)

if(MSVC)
  add_compile_options(/W4 /permissive- /utf-8 /Zc:__cplusplus)
  if(GPUSEL_WERROR)
    add_compile_options(/WX)
  endif()
else()
  add_compile_options(-Wall -Wextra -Wshadow $<$<COMPILE_LANGUAGE:CXX>:-Wnon-virtual-dtor>)
  if(GPUSEL_WERROR)
    add_compile_options(-Werror)
  endif()
endif()
if(GPUSEL_SANITIZE)
  # UBSan's null and alignment checks are left out: at -O0 each pointer use gets a writable record
  # of its own (80% of the CLI's 31 MB .data), and every instrumented process paid about 7,600
  # page faults at start to relocate them (0.15 s for `gpusel --version` against 0.09 s without).
  # A null dereference still stops the program with AddressSanitizer's SEGV report and a stack;
  # x86-64 does not fault on misaligned loads. The fuzz targets (tests/fuzz) keep both checks.
  add_compile_options(-fsanitize=address,undefined -fno-sanitize=alignment,null -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()
if(GPUSEL_TSAN)
  if(GPUSEL_SANITIZE)
    message(FATAL_ERROR "GPUSEL_TSAN and GPUSEL_SANITIZE exclude each other (one sanitizer runtime)")
  endif()
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
endif()
