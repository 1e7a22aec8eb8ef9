# Tests of the compute layers (worker/trainer/layers/): exact forward values, numeric
# gradient checks (tests/gradient_checker.h) and configuration errors.
# Included by trainer_tests.cmake. Each runs in well under a second.
foreach(nereus_layer_test
    conv_layer_test
    pooling_layer_test
    inner_product_layer_test
    neuron_layer_test
    lrn_layer_test
    softmax_layer_test
    concat_eltwise_layer_test)
  nereus_add_test(${nereus_layer_test} SOURCES ${nereus_layer_test}.cc LIBS nereus_trainer
    TIMEOUT 60 LABELS layers)
endforeach()
