# Sufficient-factor broadcasting and HybComm (issue 8).
nereus_add_test(hybcomm_test SOURCES hybcomm_test.cc LIBS nereus_common TIMEOUT 60)
nereus_add_test(sfb_update_test SOURCES sfb_update_test.cc LIBS nereus_common TIMEOUT 60)
