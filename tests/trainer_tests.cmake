# Tests of the trainer core (worker/trainer/). Registered with nereus_add_test.
# The layer and data tests are in their own files, included last.
# -DNEREUS_TRAINER_CORE_TESTS_ONLY=ON configures only the core's tests (useful
# while those files list sources that are still being written).

nereus_add_test(blob_test SOURCES blob_test.cc LIBS nereus_trainer_core TIMEOUT 60)
nereus_add_test(filler_test SOURCES filler_test.cc LIBS nereus_trainer_core TIMEOUT 60)
nereus_add_test(prototxt_test SOURCES prototxt_test.cc LIBS nereus_trainer TIMEOUT 60)
nereus_add_test(net_test SOURCES net_test.cc LIBS nereus_trainer TIMEOUT 60)
nereus_add_test(solver_test SOURCES solver_test.cc LIBS nereus_trainer_core TIMEOUT 120)

if(NOT NEREUS_TRAINER_CORE_TESTS_ONLY)
  include(${CMAKE_CURRENT_SOURCE_DIR}/layer_tests.cmake OPTIONAL)
  include(${CMAKE_CURRENT_SOURCE_DIR}/data_tests.cmake OPTIONAL)
endif()
