# Sufficient-factor broadcasting and HybComm (issue 8).
nereus_add_test(hybcomm_test SOURCES hybcomm_test.cc LIBS nereus_common TIMEOUT 60)
nereus_add_test(sfb_update_test SOURCES sfb_update_test.cc LIBS nereus_common TIMEOUT 60)
nereus_add_test(sfb_exchange_test SOURCES sfb_exchange_test.cc LIBS nereus_worker_client TIMEOUT 60)
# 3 workers x 2 servers, synthetic fully connected tensors: on vs off, auto, SSP, a dead peer.
nereus_add_test(sfb_cluster_test SOURCES sfb_cluster_test.cc LIBS nereus_test_process nereus_worker_client TIMEOUT 240)
add_dependencies(sfb_cluster_test nereus_server nereus_worker)
# The trainer: LeNet 2 x 2, 50 iterations, --sfb=on against --sfb=off.
if(NEREUS_WITH_TRAINER)
  nereus_add_test(sfb_layer_test SOURCES sfb_layer_test.cc LIBS nereus_trainer TIMEOUT 60)
  nereus_add_test(sfb_train_test SOURCES sfb_train_test.cc LIBS nereus_test_process nereus_trainer TIMEOUT 420)
  add_dependencies(sfb_train_test nereus_server nereus_worker)
endif()
