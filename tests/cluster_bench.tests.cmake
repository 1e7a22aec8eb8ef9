# Issue 9 part 2: the client's send guard, the simulator, the emulated cluster.
nereus_add_test(send_guard_test SOURCES send_guard_test.cc LIBS nereus_worker_client)
nereus_add_test(simulator_test SOURCES simulator_test.cc LIBS nereus_bench_lib)
