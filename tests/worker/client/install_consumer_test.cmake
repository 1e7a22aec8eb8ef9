# install_consumer_test: installs this build into a fresh prefix, configures
# and builds tests/worker/client/install_consumer (an outside project that does
# find_package(Nereus) and links Nereus::worker) against it, and runs it.
# Run by ctest as: cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -P this
foreach(var BUILD_DIR SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "install_consumer_test: -D${var}= is required")
  endif()
endforeach()

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install_consumer_test: ${what} failed (${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "${what}: ok\n${out}")
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
run("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix)
foreach(f include/nereus/client.h include/nereus/options.h include/nereus/status.h include/nereus/c_api.h
    lib/libnereus_c.so lib/cmake/Nereus/NereusConfig.cmake)
  if(NOT EXISTS ${WORK_DIR}/prefix/${f})
    message(FATAL_ERROR "install_consumer_test: ${f} was not installed")
  endif()
endforeach()
# The public API is nereus/*.h alone: no internal header (common/, proto/...)
# may be installed for it.
file(GLOB_RECURSE installed_headers RELATIVE ${WORK_DIR}/prefix/include ${WORK_DIR}/prefix/include/*)
foreach(h ${installed_headers})
  if(NOT h MATCHES "^nereus/[^/]+\\.h$")
    message(FATAL_ERROR "install_consumer_test: ${h} was installed; only nereus/*.h headers may be")
  endif()
endforeach()
run("configuring the consumer" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/worker/client/install_consumer -B ${WORK_DIR}/build
    -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=Release)
run("building the consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
# Port 1 on 127.0.0.1: nobody listens there (binding it needs root).
run("running the consumer" ${WORK_DIR}/build/consumer 1)
run("running the C consumer" ${WORK_DIR}/build/consumer_c 1)
file(REMOVE_RECURSE ${WORK_DIR})
