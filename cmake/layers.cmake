# libgpusel's layers. Each layer is an object library of its own; the layers it may use are its
# target_link_libraries edges, and nothing else: this file is the allowed dependency graph
# (docs/design.md draws it). Each layer's headers sit beside its sources in src/LAYER/, on the
# include path of that layer and of the layers allowed to use it only (a usage requirement of the
# edge), never of the gpusel command or of a program using the library, which see include/gpusel/.
#
# Each layer also links alone: gpusel_layer_check_LAYER, a shared library of the layer's objects
# and those of every layer it may use (transitively), linked with --no-undefined, is built with
# everything else. A call from a layer into one it may not use is an undefined reference there,
# and fails the build. (tests/abi/check_layering.py shows it does, with the forbidden calls of
# docs/design.md.)

get_filename_component(GPUSEL_ROOT_DIR "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
set(GPUSEL_LAYERS)

# gpusel_layer(NAME SOURCES file... [USES layer...])
function(gpusel_layer name)
  cmake_parse_arguments(L "" "" "SOURCES;USES" ${ARGN})
  set(target gpusel_${name})
  add_library(${target} OBJECT ${L_SOURCES})
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${GPUSEL_ROOT_DIR}/include> $<BUILD_INTERFACE:${GPUSEL_GENERATED_INCLUDE_DIR}>)
  # The layer's own headers: for itself and the layers that link it. The library's helpers beside
  # the public API (src/detail/gpusel_detail.hpp, not installed) are on every layer's path: each
  # section there names the layer that defines it, and the links below keep a layer to its edges.
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${GPUSEL_ROOT_DIR}/src/${name}>
    $<BUILD_INTERFACE:${GPUSEL_ROOT_DIR}/src/detail>)
  foreach(used ${L_USES})
    if(NOT TARGET gpusel_${used})
      message(FATAL_ERROR "layer ${name} uses ${used}, which is not a layer defined before it")
    endif()
    # Usage requirements only (an object library links no objects): its include path.
    target_link_libraries(${target} PRIVATE gpusel_${used})
  endforeach()
  # Hidden visibility: only what gpusel/export.h marks is exported from libgpusel.so.
  set_target_properties(${target} PROPERTIES CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  # Every layer it may use, transitively.
  set(closure ${L_USES})
  foreach(used ${L_USES})
    list(APPEND closure ${GPUSEL_LAYER_${used}_CLOSURE})
  endforeach()
  list(REMOVE_DUPLICATES closure)
  set(GPUSEL_LAYER_${name}_CLOSURE ${closure} PARENT_SCOPE)
  set(GPUSEL_LAYERS ${GPUSEL_LAYERS} ${name} PARENT_SCOPE)
endfunction()

# gpusel_layer_checks(): after the last layer, one check library per layer, and
# layer-checks/layers.txt for tests/abi/check_layering.py (NAME|USED;LAYERS|OBJECT;FILES a line).
function(gpusel_layer_checks)
  set(manifest "")
  foreach(name ${GPUSEL_LAYERS})
    set(objects $<TARGET_OBJECTS:gpusel_${name}>)
    foreach(used ${GPUSEL_LAYER_${name}_CLOSURE})
      list(APPEND objects $<TARGET_OBJECTS:gpusel_${used}>)
    endforeach()
    set(check gpusel_layer_check_${name})
    add_library(${check} SHARED ${objects})
    target_link_libraries(${check} PRIVATE ${CMAKE_DL_LIBS} Threads::Threads)
    set_target_properties(${check} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/layer-checks
      RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/layer-checks)
    if(WIN32)
      # A DLL resolves every symbol when it is linked; the platform layer needs Winsock.
      target_link_libraries(${check} PRIVATE ws2_32)
    else()
      target_link_options(${check} PRIVATE -Wl,--no-undefined)
    endif()
    string(JOIN ";" used "${GPUSEL_LAYER_${name}_CLOSURE}")
    string(APPEND manifest "${name}|${used}|$<JOIN:$<TARGET_OBJECTS:gpusel_${name}>,;>\n")
  endforeach()
  file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/layer-checks/layers.txt CONTENT "${manifest}")
endfunction()
