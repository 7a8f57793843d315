# The gpusel command's start-up code in one place (docs/performance.md, "One run's code in one
# place"). The functions its quick commands run (cmake/startup-functions.txt, written by
# bench/startup_order.py) are placed first in its code, in the list's order, by a linker script
# that adds one output section before .text (GNU ld's INSERT; the default script stays in force).
# The objects are compiled with -ffunction-sections so that each function can be placed on its
# own. ELF builds with a linker that takes the script; not the sanitizer or fuzz builds, whose
# code is another (the list's names would not be theirs).
option(GPUSEL_STARTUP_ORDER "Place the functions gpusel's quick commands run together at the start of its code" ON)
set(GPUSEL_STARTUP_FUNCTIONS ${CMAKE_SOURCE_DIR}/cmake/startup-functions.txt)
set(GPUSEL_STARTUP_SCRIPT ${CMAKE_BINARY_DIR}/gpusel-startup.ld)

# gpusel_startup_order(TARGET OBJECTS...): links TARGET with the script; compiles TARGET and the
# object libraries OBJECTS (the library's layers, which the command links in) with
# -ffunction-sections. Sets GPUSEL_STARTUP_ORDERED (ON or OFF) in the caller's scope.
function(gpusel_startup_order target)
  set(GPUSEL_STARTUP_ORDERED OFF PARENT_SCOPE)
  if(NOT GPUSEL_STARTUP_ORDER OR WIN32 OR APPLE OR MSVC OR GPUSEL_SANITIZE OR GPUSEL_TSAN OR GPUSEL_FUZZ)
    return()
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${GPUSEL_STARTUP_FUNCTIONS})
  file(STRINGS ${GPUSEL_STARTUP_FUNCTIONS} names REGEX "^[A-Za-z_][A-Za-z0-9_.$]*$")
  # With -ffunction-sections, GCC puts function F in .text.F (.text.unlikely.F for its cold part,
  # .text.startup.F for a static initialiser). A complete-object constructor or destructor (C1,
  # D1) is an alias of the base-object one (C2, D2), whose name the section carries.
  set(lines "")
  set(listed "")
  foreach(name ${names})
    set(variants ${name})
    foreach(pair "C1E;C2E" "D1E;D2E" "C1I;C2I" "D0E;D2E")
      list(GET pair 0 from)
      list(GET pair 1 to)
      string(FIND "${name}" "${from}" at)
      if(NOT at EQUAL -1)
        string(REPLACE "${from}" "${to}" variant "${name}")
        list(APPEND variants ${variant})
      endif()
    endforeach()
    set(patterns "")
    foreach(v ${variants})
      if(NOT v IN_LIST listed)
        list(APPEND listed ${v})
        string(APPEND patterns " .text.${v} .text.unlikely.${v} .text.startup.${v}")
      endif()
    endforeach()
    if(patterns)
      string(APPEND lines "    *(${patterns} )\n")
    endif()
  endforeach()
  # The C library's static part (atexit, pthread_atfork: every command calls them) and the C++
  # runtime's unwinder (static libgcc, which -static-libgcc links in) are compiled without function
  # sections: placed whole, the first before the list, the unwinder (about 30 KB; run when an
  # exception is thrown, as --version's is) after it.
  string(PREPEND lines "    *libc_nonshared.a:*(.text .text.*)\n")
  string(APPEND lines "    *libgcc_eh.a:*(.text .text.*)\n")
  set(script "/* Written by cmake/startup-order.cmake from cmake/startup-functions.txt. */\nSECTIONS\n{\n  .text.gpusel_startup :\n  {\n${lines}  }\n}\nINSERT BEFORE .text;\n")
  # Rewritten only when it changes, so that a new configure relinks nothing.
  file(WRITE ${GPUSEL_STARTUP_SCRIPT}.new "${script}")
  configure_file(${GPUSEL_STARTUP_SCRIPT}.new ${GPUSEL_STARTUP_SCRIPT} COPYONLY)
  include(CheckLinkerFlag)
  check_linker_flag(CXX "-Wl,-T,${GPUSEL_STARTUP_SCRIPT}" GPUSEL_LINKER_TAKES_STARTUP_SCRIPT)
  if(NOT GPUSEL_LINKER_TAKES_STARTUP_SCRIPT)
    message(STATUS "gpusel: the linker takes no INSERT script; the command's start-up code is not placed together")
    return()
  endif()
  target_link_options(${target} PRIVATE "-Wl,-T,${GPUSEL_STARTUP_SCRIPT}")
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${GPUSEL_STARTUP_SCRIPT})
  foreach(t ${target} ${ARGN})
    target_compile_options(${t} PRIVATE -ffunction-sections)
  endforeach()
  set(GPUSEL_STARTUP_ORDERED ON PARENT_SCOPE)
endfunction()
