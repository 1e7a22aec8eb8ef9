# The client library's parts on their own (worker/client/*.h), no servers.
nereus_add_test(client_parts_test SOURCES client_parts_test.cc LIBS nereus_worker_client)
