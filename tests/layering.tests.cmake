# The include graph is a tree of floors (scripts/include_graph.py): the real
# tree is checked, and so is the checker itself, on fake trees.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME layering_test
    COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/include_graph.py --root ${PROJECT_SOURCE_DIR} --check)
  add_test(NAME include_graph_test COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/include_graph_test.py)
  set_tests_properties(layering_test include_graph_test PROPERTIES TIMEOUT 120)
else()
  message(WARNING "python3 not found: layering_test and include_graph_test are not registered")
endif()
