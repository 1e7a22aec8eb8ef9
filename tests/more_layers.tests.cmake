# Layers added for issue 12 (worker/trainer/layers/): exact values, numeric
# gradient checks (tests/gradient_checker.h) and configuration errors. Each
# runs in a few seconds at most.
if(NOT NEREUS_WITH_TRAINER OR NEREUS_TRAINER_CORE_TESTS_ONLY)
  return()
endif()
foreach(nereus_layer_test
    elementwise_layer_test
    shape_layer_test
    loss_layer_test
    batch_norm_layer_test)
  nereus_add_test(${nereus_layer_test} SOURCES ${nereus_layer_test}.cc LIBS nereus_trainer
    TIMEOUT 60 LABELS layers)
endforeach()

# Old-format (V1) nets upgraded as Caffe does; trains the V1 and V2 LeNet for
# 6 iterations each on a generated LMDB (about 2 s).
nereus_add_test(upgrade_net_test SOURCES upgrade_net_test.cc LIBS nereus_trainer TIMEOUT 120
  LABELS layers)

# BatchNorm statistics stay local to each worker in a 2 x 2 job (about 5 s).
nereus_add_test(batch_norm_job_test SOURCES batch_norm_job_test.cc
  LIBS nereus_test_process nereus_trainer TIMEOUT 180 LABELS layers)
add_dependencies(batch_norm_job_test nereus_server nereus_worker)

# ResNet-50 and GoogLeNet: parameter counts, and 2 iterations standalone and
# 2 workers x 2 servers each on generated images (label "zoo": about a
# minute on 2 cores).
nereus_add_test(zoo_models_test SOURCES zoo_models_test.cc
  LIBS nereus_test_process nereus_trainer TIMEOUT 600 LABELS zoo)
add_dependencies(zoo_models_test nereus_server nereus_worker)
