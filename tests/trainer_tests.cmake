# Tests of the trainer core (worker/). Registered with nereus_add_test.
# The layer and data tests are in their own files, included last.
# -DNEREUS_TRAINER_CORE_TESTS_ONLY=ON configures only the core's tests (useful
# while those files list sources that are still being written).

if(NOT NEREUS_TRAINER_CORE_TESTS_ONLY)
  include(${CMAKE_CURRENT_SOURCE_DIR}/layer_tests.cmake OPTIONAL)
  include(${CMAKE_CURRENT_SOURCE_DIR}/data_tests.cmake OPTIONAL)
endif()
