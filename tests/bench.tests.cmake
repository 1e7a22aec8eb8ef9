# bench_smoke_test: every nereus_bench subcommand with tiny settings, bounded
# in time (issue 7). A new subcommand adds its runs to the RUNS list in
# tests/bench_smoke_test.py; the test fails for a subcommand without one.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  set(_bench_smoke_args --bench $<TARGET_FILE:nereus_bench>)
  if(NEREUS_SANITIZE)
    list(APPEND _bench_smoke_args --small)  # Instrumented code is slow: 4 KB and 256 KB only.
  endif()
  add_test(NAME bench_smoke_test COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/bench_smoke_test.py
           ${_bench_smoke_args})
  set_tests_properties(bench_smoke_test PROPERTIES TIMEOUT 600)
else()
  message(WARNING "python3 not found: bench_smoke_test is not registered")
endif()
