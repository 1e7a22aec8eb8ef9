# Hostile input and CURVE (issue 10): refusal logs, frame limits, identities,
# a network fuzz of a live server, keys.
nereus_add_test(security_test SOURCES security_test.cc LIBS nereus_test_process nereus_server_lib cppzmq TIMEOUT 240)
add_dependencies(security_test nereus_keygen nereus_server nereus_worker)
if(NEREUS_SANITIZE)
  target_compile_definitions(security_test PRIVATE NEREUS_SANITIZED_BUILD)
endif()

# The fuzz target (tests/fuzz_message.cc). Every build replays its seed corpus
# once without libFuzzer; scripts/fuzz.sh builds the real fuzzer with clang
# (NEREUS_SANITIZE=fuzzer) and runs it.
add_executable(fuzz_replay fuzz_message.cc)
target_compile_definitions(fuzz_replay PRIVATE NEREUS_FUZZ_REPLAY)
target_link_libraries(fuzz_replay PRIVATE nereus_server_lib)
file(GLOB NEREUS_FUZZ_SEEDS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_corpus/*)
add_test(NAME fuzz_corpus_replay COMMAND fuzz_replay ${NEREUS_FUZZ_SEEDS})
set_tests_properties(fuzz_corpus_replay PROPERTIES TIMEOUT 60 PASS_REGULAR_EXPRESSION "replayed [1-9][0-9]* input")
if(NEREUS_SANITIZE STREQUAL "fuzzer")
  add_executable(nereus_fuzz_message fuzz_message.cc)
  target_link_libraries(nereus_fuzz_message PRIVATE nereus_server_lib)
  target_link_options(nereus_fuzz_message PRIVATE -fsanitize=fuzzer)
endif()
