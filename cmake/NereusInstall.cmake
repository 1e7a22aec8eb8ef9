# `cmake --install` (issue 4 item 8): the worker client library with what it
# links (nereus_common, nereus_proto), the headers its public header includes,
# the binaries, and a CMake package so that another project can
#   find_package(Nereus REQUIRED)
#   target_link_libraries(my_trainer PRIVATE Nereus::worker)
# Included from the top-level CMakeLists.txt after every target is defined.
include(CMakePackageConfigHelpers)

set_target_properties(nereus_worker_client PROPERTIES EXPORT_NAME worker)
set_target_properties(nereus_common PROPERTIES EXPORT_NAME common)
set_target_properties(nereus_proto PROPERTIES EXPORT_NAME proto)

install(TARGETS nereus_worker_client nereus_common nereus_proto EXPORT NereusTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS nereus_server nereus_worker RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# nereus/client.h includes common/status.h, common/hybcomm.h and proto/nereus.pb.h (generated);
# the paths below the include directory are the same as in the source tree.
install(FILES ${PROJECT_SOURCE_DIR}/worker/client/include/nereus/client.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/nereus)
install(FILES ${PROJECT_SOURCE_DIR}/common/status.h ${PROJECT_SOURCE_DIR}/common/hybcomm.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/common)
install(DIRECTORY ${PROJECT_BINARY_DIR}/proto/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/proto
  FILES_MATCHING PATTERN "*.pb.h" PATTERN "caffe.pb.h" EXCLUDE PATTERN "CMakeFiles" EXCLUDE)

set(NEREUS_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Nereus)
install(EXPORT NereusTargets NAMESPACE Nereus:: DESTINATION ${NEREUS_CMAKE_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/NereusConfig.cmake.in
  ${PROJECT_BINARY_DIR}/NereusConfig.cmake INSTALL_DESTINATION ${NEREUS_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/NereusConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/NereusConfig.cmake ${PROJECT_BINARY_DIR}/NereusConfigVersion.cmake
  DESTINATION ${NEREUS_CMAKE_DIR})
