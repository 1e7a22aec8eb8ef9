# Checkpoints and resume (issue 10): the file format and a ParamServer's
# checkpoint/restore in-process; whole jobs killed and resumed as processes.
nereus_add_test(checkpoint_test SOURCES checkpoint_test.cc LIBS nereus_server_lib nereus_test_process)
# The synthetic worker's jobs (also under ThreadSanitizer): resume, rejoin.
nereus_add_test(resume_test SOURCES resume_test.cc LIBS nereus_test_process nereus_server_lib TIMEOUT 240)
add_dependencies(resume_test nereus_server nereus_worker)
if(NEREUS_WITH_TRAINER)
  nereus_add_test(lenet_resume_test SOURCES lenet_resume_test.cc
    LIBS nereus_test_process nereus_server_lib nereus_trainer TIMEOUT 240)
  add_dependencies(lenet_resume_test nereus_server nereus_worker)
  # One BLAS thread per worker: 4 workers' runs share the machine's cores.
  set_property(TEST lenet_resume_test APPEND PROPERTY ENVIRONMENT "OPENBLAS_NUM_THREADS=1")
endif()
