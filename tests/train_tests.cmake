# Tests of the trainer mode of nereus_worker (issue 4 items 6-8); included by
# tests/CMakeLists.txt after nereus_test_process is defined.

# The installed client library links from an outside project. (Not in
# sanitizer builds: the outside project is built without the sanitizer and
# cannot link instrumented libraries.)
if(NOT NEREUS_SANITIZE)
  add_test(NAME install_consumer_test
    COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${CMAKE_BINARY_DIR} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
            -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/install_consumer_work
            -P ${CMAKE_CURRENT_SOURCE_DIR}/install_consumer_test.cmake)
  set_tests_properties(install_consumer_test PROPERTIES TIMEOUT 180)
endif()

if(NOT NEREUS_WITH_TRAINER)
  return()
endif()

# Equivalence of 2 x 32 through the servers with standalone 64; bad input.
nereus_add_test(train_worker_test SOURCES train_worker_test.cc LIBS nereus_test_process nereus_trainer_runner
  TIMEOUT 180)
add_dependencies(train_worker_test nereus_server nereus_worker)

# Convergence of LeNet on MNIST (label "convergence"): standalone and 2 workers
# x 2 servers, each must reach 97% test accuracy. The data come from
# scripts/get_mnist.sh, run as the fixture "mnist". RUN_SERIAL: their time
# bound assumes the machine's cores are theirs.
add_test(NAME get_mnist COMMAND ${PROJECT_SOURCE_DIR}/scripts/get_mnist.sh)
set_tests_properties(get_mnist PROPERTIES FIXTURES_SETUP mnist TIMEOUT 300 LABELS convergence
  ENVIRONMENT "NEREUS_BUILD_DIR=${CMAKE_BINARY_DIR}")
add_executable(train_convergence_test train_convergence_test.cc)
target_link_libraries(train_convergence_test PRIVATE nereus_test_process nereus_trainer GTest::gtest
  GTest::gtest_main)
add_dependencies(train_convergence_test nereus_server nereus_worker)
# The 2 x 2 run gives each worker one BLAS thread, as scripts/run_local.sh does
# on 2 cores (the accuracy it reaches depends on that: BLAS sums in another
# order with another thread count).
foreach(mode Standalone TwoWorkersTwoServers)
  if(mode STREQUAL "Standalone")
    set(blas_threads "")
  else()
    set(blas_threads ";OPENBLAS_NUM_THREADS=1")
  endif()
  add_test(NAME train_convergence_${mode} COMMAND train_convergence_test --gtest_filter=LenetConvergenceTest.${mode})
  set_tests_properties(train_convergence_${mode} PROPERTIES TIMEOUT 420 LABELS convergence RUN_SERIAL TRUE
    FIXTURES_REQUIRED mnist
    ENVIRONMENT "NEREUS_BIN_DIR=${CMAKE_BINARY_DIR}/bin;NEREUS_SOURCE_DIR=${PROJECT_SOURCE_DIR}${blas_threads}")
endforeach()
