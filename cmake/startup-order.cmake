# The gpusel command's start-up code in one place (docs/performance.md, "One run's code in one
# place"). The functions its quick commands run (cmake/startup-functions.txt, written by
# bench/startup_order.py) are placed first in its .text, in the list's order, between the symbols
# __gpusel_startup_start and __gpusel_startup_end. The linker script is the linker's own default
# (what `-Wl,--verbose` prints for a program linked as gpusel is) with the list put at the head
# of .text: the program keeps one .text, as debuggers and valgrind expect (a second code section
# beside it leaves valgrind without the program's symbols). The objects are compiled with
# -ffunction-sections so that each function can be placed on its own. ELF builds with GCC and GNU
# ld; not with another compiler (clang names its functions' clones and its static initialisers'
# sections otherwise), nor the sanitizer or fuzz builds, whose code is another.
option(GPUSEL_STARTUP_ORDER "Place the functions gpusel's quick commands run together at the start of its code" ON)
set(GPUSEL_STARTUP_FUNCTIONS ${CMAKE_SOURCE_DIR}/cmake/startup-functions.txt)
set(GPUSEL_STARTUP_SCRIPT ${CMAKE_BINARY_DIR}/gpusel-startup.ld)

# The lines that place the listed functions, for the head of .text.
function(gpusel_startup_lines out)
  file(STRINGS ${GPUSEL_STARTUP_FUNCTIONS} names REGEX "^[A-Za-z_][A-Za-z0-9_.$]*$")
  # With -ffunction-sections, GCC puts function F in .text.F (.text.startup.F for a static
  # initialiser, .text.unlikely.F for its cold part or for all of a function it deems cold, as one
  # that only throws). The cold sections follow the others, so that what a command runs lies
  # close. A complete-object constructor or destructor (C1, D1) is an alias of the base-object one
  # (C2, D2), whose name the section carries.
  set(lines "    HIDDEN(__gpusel_startup_start = .);\n")
  # The C start files' code (_start; the callers of static initialisers and destructors) and the
  # C library's static part (atexit, pthread_atfork: every command calls them), compiled without
  # function sections: placed whole, first.
  string(APPEND lines "    *crt1.o(.text .text.*)\n    *crtbegin*.o(.text .text.*)\n")
  string(APPEND lines "    *libc_nonshared.a:*(.text .text.*)\n")
  set(listed "")
  set(cold "")
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
        string(APPEND patterns " .text.${v} .text.startup.${v}")
        string(APPEND cold "    *(.text.unlikely.${v})\n")
      endif()
    endforeach()
    if(patterns)
      string(APPEND lines "    *(${patterns} )\n")
    endif()
  endforeach()
  string(APPEND lines "${cold}")
  # The C++ runtime's unwinder (static libgcc, which -static-libgcc links in), also without
  # function sections: about 30 KB, run when an exception is thrown (as --version's is).
  string(APPEND lines "    *libgcc_eh.a:*(.text .text.*)\n    HIDDEN(__gpusel_startup_end = .);\n")
  set(${out} "${lines}" PARENT_SCOPE)
endfunction()

# gpusel_startup_order(TARGET LINK_FLAGS OBJECTS...): links TARGET with the script; compiles TARGET
# and the object libraries OBJECTS (the library's layers, which the command links in) with
# -ffunction-sections. LINK_FLAGS (a list) are TARGET's own link options, so that the linker's
# default script is the one TARGET would get. Sets GPUSEL_STARTUP_ORDERED (ON or OFF) in the
# caller's scope.
function(gpusel_startup_order target link_flags)
  set(GPUSEL_STARTUP_ORDERED OFF PARENT_SCOPE)
  if(NOT GPUSEL_STARTUP_ORDER OR WIN32 OR APPLE OR NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU"
     OR GPUSEL_SANITIZE OR GPUSEL_TSAN OR GPUSEL_FUZZ)
    return()
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${GPUSEL_STARTUP_FUNCTIONS})
  # The linker's default script for a program linked as TARGET is.
  set(probe_dir ${CMAKE_BINARY_DIR}/CMakeFiles/gpusel-startup-probe)
  file(MAKE_DIRECTORY ${probe_dir})
  file(WRITE ${probe_dir}/probe.cpp "int main() { return 0; }\n")
  string(TOUPPER "${CMAKE_BUILD_TYPE}" config)
  separate_arguments(flags UNIX_COMMAND
    "${CMAKE_CXX_FLAGS} ${CMAKE_CXX_FLAGS_${config}} ${CMAKE_EXE_LINKER_FLAGS}")
  execute_process(
    COMMAND ${CMAKE_CXX_COMPILER} ${flags} ${link_flags} probe.cpp -o probe -Wl,--verbose
    WORKING_DIRECTORY ${probe_dir} RESULT_VARIABLE rc OUTPUT_VARIABLE said ERROR_VARIABLE err)
  set(rule "==================================================")
  string(FIND "${said}" "${rule}" first)
  string(FIND "${said}" "${rule}" last REVERSE)
  set(default_script "")
  if(rc EQUAL 0 AND NOT first EQUAL -1 AND last GREATER first)
    string(LENGTH "${rule}" rule_length)
    math(EXPR begin "${first} + ${rule_length}")
    math(EXPR length "${last} - ${begin}")
    string(SUBSTRING "${said}" ${begin} ${length} default_script)
  endif()
  # The head of .text: "  .text  :" and the brace opening its contents, each on a line of its own
  # (GNU ld's x86-64 and aarch64 scripts).
  string(REGEX MATCH "\n  \\.text[ \t]*:[ \t]*\n  {[ \t]*\n" head "${default_script}")
  if(NOT head)
    message(STATUS "gpusel: the linker printed no default script with a .text to add to (not GNU ld?); "
      "the command's start-up code is not placed together")
    return()
  endif()
  gpusel_startup_lines(lines)
  string(REPLACE "${head}" "${head}${lines}" script "${default_script}")
  string(PREPEND script "/* Written by cmake/startup-order.cmake: the linker's default script, with the functions\n   of cmake/startup-functions.txt at the head of .text. */\n")
  # Rewritten only when it changes, so that a new configure relinks nothing.
  file(WRITE ${GPUSEL_STARTUP_SCRIPT}.new "${script}")
  configure_file(${GPUSEL_STARTUP_SCRIPT}.new ${GPUSEL_STARTUP_SCRIPT} COPYONLY)
  include(CheckLinkerFlag)
  # Asked again at each configure: the linker may have changed since (CMAKE_EXE_LINKER_FLAGS).
  unset(GPUSEL_LINKER_TAKES_STARTUP_SCRIPT CACHE)
  check_linker_flag(CXX "-Wl,-T,${GPUSEL_STARTUP_SCRIPT}" GPUSEL_LINKER_TAKES_STARTUP_SCRIPT)
  if(NOT GPUSEL_LINKER_TAKES_STARTUP_SCRIPT)
    message(STATUS "gpusel: the linker refused its own default script with the start-up list; "
      "the command's start-up code is not placed together")
    return()
  endif()
  target_link_options(${target} PRIVATE "-Wl,-T,${GPUSEL_STARTUP_SCRIPT}")
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${GPUSEL_STARTUP_SCRIPT})
  foreach(t ${target} ${ARGN})
    target_compile_options(${t} PRIVATE -ffunction-sections)
  endforeach()
  set(GPUSEL_STARTUP_ORDERED ON PARENT_SCOPE)
endfunction()
