# Issue 9 part 2: the client's send guard, the simulator, the emulated cluster.
nereus_add_test(send_guard_test SOURCES send_guard_test.cc LIBS nereus_worker_client)
nereus_add_test(simulator_test SOURCES simulator_test.cc LIBS nereus_bench_lib)
# Starts nereus_bench cluster (2 namespaces, real processes) twice; own main:
# exit status 77 where namespaces cannot be made, which ctest reports skipped.
nereus_add_test(cluster_emulation_test SOURCES cluster_emulation_test.cc LIBS nereus_bench_lib nereus_test_process
                TIMEOUT 180)
add_dependencies(cluster_emulation_test nereus_bench nereus_server)
set_tests_properties(cluster_emulation_test PROPERTIES SKIP_RETURN_CODE 77)
if(NEREUS_SANITIZE)
  target_compile_definitions(cluster_emulation_test PRIVATE NEREUS_SANITIZED_BUILD)
endif()
