# `cmake --install`: the worker client library with what it links
# (nereus_common, nereus_proto), the C interface's shared library
# (libnereus_c.so, which nereus.torch loads), the public headers (nereus/*.h, which include
# only each other and the standard library), the binaries, and a CMake
# package so that another project can
#   find_package(Nereus REQUIRED)
#   target_link_libraries(my_trainer PRIVATE Nereus::worker)
# Included from the top-level CMakeLists.txt after every target is defined.
include(CMakePackageConfigHelpers)

set_target_properties(nereus_worker_client PROPERTIES EXPORT_NAME worker)
set_target_properties(nereus_common PROPERTIES EXPORT_NAME common)
set_target_properties(nereus_proto PROPERTIES EXPORT_NAME proto)
# The C interface (nereus/c_api.h): libnereus_c.so, Nereus::c.
set_target_properties(nereus_c PROPERTIES EXPORT_NAME c)

install(TARGETS nereus_worker_client nereus_common nereus_proto nereus_c EXPORT NereusTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS nereus_server nereus_worker RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# The public headers: every nereus/*.h of the public include folder, and
# nothing else (scripts/include_graph.py --check keeps them standalone;
# install_consumer_test checks that nothing else is installed).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/common/include/nereus
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")

set(NEREUS_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Nereus)
install(EXPORT NereusTargets NAMESPACE Nereus:: DESTINATION ${NEREUS_CMAKE_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/NereusConfig.cmake.in
  ${PROJECT_BINARY_DIR}/NereusConfig.cmake INSTALL_DESTINATION ${NEREUS_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/NereusConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/NereusConfig.cmake ${PROJECT_BINARY_DIR}/NereusConfigVersion.cmake
  DESTINATION ${NEREUS_CMAKE_DIR})
