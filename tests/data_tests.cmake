# Tests of worker/trainer/data (issue 4 item 4); included by tests/trainer_tests.cmake.
nereus_add_test(db_test SOURCES db_test.cc LIBS nereus_trainer TIMEOUT 60)
nereus_add_test(idx_test SOURCES idx_test.cc LIBS nereus_trainer TIMEOUT 60)
nereus_add_test(data_transformer_test SOURCES data_transformer_test.cc LIBS nereus_trainer TIMEOUT 60)
nereus_add_test(data_layer_test SOURCES data_layer_test.cc LIBS nereus_trainer TIMEOUT 60)
nereus_add_test(convert_mnist_test SOURCES convert_mnist_test.cc LIBS nereus_trainer TIMEOUT 60)
# The converter runs as a real process: build it before the test.
add_dependencies(convert_mnist_test nereus_convert_mnist)
