# sim.standalone_build (sim/tests/CMakeLists.txt): configures sim/ as a project of its own into
# BUILD, builds the NVML double and libgpusel-sim-machines.so there, and checks that each exports
# what the same library of gpusel's build (MAIN_SIM_DIR) does: `nm -D --defined-only`, addresses
# left out.
#   cmake -DSOURCE=sim -DBUILD=... -DGENERATOR=... -DCC=... -DCXX=... -DBUILD_TYPE=... -DWERROR=...
#         -DNM=nm -DMAIN_SIM_DIR=build/lib/gpusel/sim -P standalone_build.cmake
foreach(var SOURCE BUILD GENERATOR CC CXX NM MAIN_SIM_DIR)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "standalone_build.cmake needs -D${var}=...")
  endif()
endforeach()

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    string(JOIN " " line ${ARGN})
    message(FATAL_ERROR "failed (${rc}): ${line}")
  endif()
endfunction()

run(${CMAKE_COMMAND} -S ${SOURCE} -B ${BUILD} -G ${GENERATOR} -DCMAKE_C_COMPILER=${CC}
  -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=${BUILD_TYPE} -DGPUSEL_WERROR=${WERROR}
  -DGPUSEL_BUILD_TESTS=OFF)
run(${CMAKE_COMMAND} --build ${BUILD} -j2 --target gpusel_sim_nvml gpusel_sim_machines)

# The defined dynamic symbols of a library, one name (with its version) and type a line, sorted.
function(exports file out)
  if(NOT EXISTS ${file})
    message(FATAL_ERROR "${file}: missing")
  endif()
  execute_process(COMMAND ${NM} -D --defined-only ${file} OUTPUT_VARIABLE text RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR text STREQUAL "")
    message(FATAL_ERROR "${NM} -D --defined-only ${file} failed (${rc}) or listed nothing")
  endif()
  string(REGEX REPLACE "\n$" "" text "${text}")
  string(REPLACE "\n" ";" lines "${text}")
  list(TRANSFORM lines REPLACE "^[0-9a-fA-F]+ " "")
  list(SORT lines)
  set(${out} "${lines}" PARENT_SCOPE)
endfunction()

foreach(lib libnvidia-ml.so.1 libgpusel-sim-machines.so)
  exports(${BUILD}/lib/gpusel/sim/${lib} standalone)
  exports(${MAIN_SIM_DIR}/${lib} main)
  if(NOT standalone STREQUAL main)
    set(only_standalone ${standalone})
    list(REMOVE_ITEM only_standalone ${main})
    set(only_main ${main})
    list(REMOVE_ITEM only_main ${standalone})
    message(FATAL_ERROR "${lib}: the standalone build's exports differ from gpusel's build's\n"
      "  only standalone: ${only_standalone}\n  only in gpusel's build: ${only_main}")
  endif()
  list(LENGTH main count)
  message(STATUS "${lib}: ${count} exports, the same in both builds")
endforeach()
