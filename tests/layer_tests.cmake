# Tests of the compute layers (worker/layers/): exact forward values and
# numeric gradient checks (tests/gradient_checker.h). Included by
# trainer_tests.cmake.
foreach(nereus_layer_test
    conv_layer_test
    pooling_layer_test
    inner_product_layer_test
    neuron_layer_test
    lrn_layer_test
    softmax_layer_test
    concat_eltwise_layer_test)
  if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/${nereus_layer_test}.cc)
    nereus_add_test(${nereus_layer_test} SOURCES ${nereus_layer_test}.cc LIBS nereus_trainer
      TIMEOUT 60 LABELS layers)
  endif()
endforeach()
