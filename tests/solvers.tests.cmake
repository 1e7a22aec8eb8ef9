# Caffe's solver types (issue 12) and Caffe's own solver files (issue 11):
# the update rules through common/sgd.h and the standalone Solver,
# .solverstate layout, snapshot/resume, HDF5 snapshots.
if(NEREUS_WITH_TRAINER)
  nereus_add_test(solvers_test SOURCES solvers_test.cc LIBS nereus_trainer_core nereus_hdf5 TIMEOUT 60)
endif()

# 2 servers x 2 workers as processes, one job per solver type (about 1 s each).
nereus_add_test(solvers_cluster_test SOURCES solvers_cluster_test.cc LIBS nereus_test_process nereus_synthetic
  TIMEOUT 120)
add_dependencies(solvers_cluster_test nereus_server nereus_worker)

# nereus_worker --solver per solver type: 2 x 2 through the servers equals
# standalone; HDF5 snapshots through --snapshot and --weights.
if(NEREUS_WITH_TRAINER)
  nereus_add_test(solvers_train_test SOURCES solvers_train_test.cc LIBS nereus_test_process nereus_trainer_runner
    TIMEOUT 240)
  add_dependencies(solvers_train_test nereus_server nereus_worker)
endif()
