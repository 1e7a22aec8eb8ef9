# Transport, start-up and benchmark hygiene (issue 7).
nereus_add_test(server_node_test SOURCES server_node_test.cc LIBS nereus_server_lib TIMEOUT 60)
nereus_add_test(watchdog_test SOURCES watchdog_test.cc LIBS nereus_bench_lib TIMEOUT 60)
nereus_add_test(sgd_vector_test SOURCES sgd_vector_test.cc LIBS nereus_server_lib TIMEOUT 60)
