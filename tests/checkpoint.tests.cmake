# Checkpoints and resume (issue 10): the file format and a ParamServer's
# checkpoint/restore in-process; whole jobs killed and resumed as processes.
nereus_add_test(checkpoint_test SOURCES checkpoint_test.cc LIBS nereus_server_lib nereus_test_process)
if(NEREUS_WITH_TRAINER)
  nereus_add_test(resume_test SOURCES resume_test.cc
    LIBS nereus_test_process nereus_server_lib nereus_trainer TIMEOUT 240)
  add_dependencies(resume_test nereus_server nereus_worker)
  # One BLAS thread per worker: 4 workers' runs share the machine's cores.
  set_property(TEST resume_test APPEND PROPERTY ENVIRONMENT "OPENBLAS_NUM_THREADS=1")
endif()
