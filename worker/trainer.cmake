# The Caffe-style trainer.
#
# nereus_trainer_core: Blob, Layer, LayerRegistry, fillers, math, prototxt,
#   Net (with its internal Split layer), Solver. Builds and tests without any
#   layer implementation.
# nereus_trainer: the core plus the compute layers (worker/layers/*.cc) and
#   the data layers (worker/data/*.cc, except *_main.cc programs), and
#   DefaultLayerRegistry(). This is what binaries link.
set(NEREUS_WORKER_DIR ${PROJECT_SOURCE_DIR}/worker)

add_library(nereus_trainer_core STATIC
  ${NEREUS_WORKER_DIR}/syncedmem.cc
  ${NEREUS_WORKER_DIR}/blob.cc
  ${NEREUS_WORKER_DIR}/layer.cc
  ${NEREUS_WORKER_DIR}/layer_registry.cc
  ${NEREUS_WORKER_DIR}/math_functions.cc
  ${NEREUS_WORKER_DIR}/filler.cc
  ${NEREUS_WORKER_DIR}/prototxt.cc
  ${NEREUS_WORKER_DIR}/net.cc
  ${NEREUS_WORKER_DIR}/solver.cc
)
target_include_directories(nereus_trainer_core PUBLIC
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
  ${OPENBLAS_INCLUDE_DIR})
target_link_libraries(nereus_trainer_core PUBLIC nereus_common nereus_proto BLAS::BLAS
  PkgConfig::LMDB glog::glog)
if(NEREUS_HAVE_CUDA)
  target_compile_definitions(nereus_trainer_core PUBLIC NEREUS_HAVE_CUDA)
  target_link_libraries(nereus_trainer_core PUBLIC CUDA::cudart)
endif()

file(GLOB NEREUS_COMPUTE_LAYER_SRCS CONFIGURE_DEPENDS ${NEREUS_WORKER_DIR}/layers/*.cc)
file(GLOB NEREUS_DATA_LAYER_SRCS CONFIGURE_DEPENDS ${NEREUS_WORKER_DIR}/data/*.cc)
list(FILTER NEREUS_DATA_LAYER_SRCS EXCLUDE REGEX "_main\\.cc$")
list(FILTER NEREUS_COMPUTE_LAYER_SRCS EXCLUDE REGEX "_main\\.cc$")

add_library(nereus_trainer STATIC
  ${NEREUS_WORKER_DIR}/default_layer_registry.cc
  ${NEREUS_COMPUTE_LAYER_SRCS}
  ${NEREUS_DATA_LAYER_SRCS}
)
target_link_libraries(nereus_trainer PUBLIC nereus_trainer_core)
# DefaultLayerRegistry() calls the registration functions only once their
# files exist, so the tree links while the layers are being written.
if(EXISTS ${NEREUS_WORKER_DIR}/layers/register_layers.cc)
  target_compile_definitions(nereus_trainer PRIVATE NEREUS_HAVE_COMPUTE_LAYERS)
endif()
if(EXISTS ${NEREUS_WORKER_DIR}/data/register_data_layers.cc)
  target_compile_definitions(nereus_trainer PRIVATE NEREUS_HAVE_DATA_LAYERS)
endif()

# Data input (worker/data/data.cmake): nereus_convert_mnist and the data
# sources (also picked up by the glob above; CMake lists a source once).
include(${CMAKE_CURRENT_SOURCE_DIR}/data/data.cmake OPTIONAL)
