# Data input for the trainer (issue 4 item 4): the LMDB wrapper, MNIST IDX
# files, Caffe's DataTransformer and Data layer, and nereus_convert_mnist.
# Included by worker/trainer/CMakeLists.txt after it defines nereus_trainer.
target_sources(nereus_trainer PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/db.cc
  ${CMAKE_CURRENT_LIST_DIR}/idx.cc
  ${CMAKE_CURRENT_LIST_DIR}/data_transformer.cc
  ${CMAKE_CURRENT_LIST_DIR}/data_layer.cc
  ${CMAKE_CURRENT_LIST_DIR}/register_data_layers.cc
)
# db.h forward-declares LMDB's types, so users of nereus_trainer need no lmdb.h.
target_link_libraries(nereus_trainer PRIVATE PkgConfig::LMDB)

add_executable(nereus_convert_mnist ${CMAKE_CURRENT_LIST_DIR}/convert_mnist_main.cc)
target_link_libraries(nereus_convert_mnist PRIVATE nereus_trainer gflags glog::glog)
