// Caffe's HDF5 snapshots (snapshot_format: HDF5), in Caffe's layout, through
// Debian's libhdf5 (the C library and its H5LT "lite" API):
//
//   <prefix>_iter_N.caffemodel.h5   group "data", in it one group per layer
//       (named as the layer, every layer of the net, in order; a repeated
//       name is stored once, and refused when a later layer of that name has
//       parameters of its own), in it one
//       float dataset per parameter blob the layer owns, named "0", "1", ...
//       and shaped as the blob; a shared parameter is stored only with the
//       layer that owns it. With snapshot_diff, group "diff" likewise holds
//       every layer's gradients.
//   <prefix>_iter_N.solverstate.h5  scalar int datasets "iter" and
//       "current_step", string dataset "learned_net" (the .caffemodel.h5),
//       group "history" with one float dataset per history blob, "0", "1",
//       ..., in the order of Solver::history().
//
// Files are chosen by name as Caffe does: a path ending in ".h5" is HDF5,
// anything else a binary proto. Writes are atomic (path.tmp, then rename).
// Every HDF5 failure is a Status naming the file and the dataset; the HDF5
// library's own error printing is switched off around each call.
#ifndef NEREUS_WORKER_TRAINER_HDF5_SNAPSHOT_H_
#define NEREUS_WORKER_TRAINER_HDF5_SNAPSHOT_H_

#include <string>

#include "common/base/status.h"
#include "proto/caffe.pb.h"
#include "worker/trainer/net.h"

namespace nereus {

// True when `path` ends in ".h5" (Caffe's test for HDF5 snapshots).
bool IsHdf5Path(const std::string& path);

// Net weights (and, with write_diff, gradients) as a .caffemodel.h5.
Status WriteNetToHdf5(const Net& net, const std::string& path, bool write_diff = false);
// Caffe's Net::CopyTrainedLayersFromHDF5: layers matched by name (source
// layers the net lacks are skipped), every blob's shape must match; a blob
// missing from the file is an error unless the net shares it from another
// layer.
Status CopyTrainedLayersFromHdf5(const std::string& path, Net* net);
// Caffe's Net::CopyTrainedLayersFrom: HDF5 or binary proto by file name.
Status CopyTrainedLayersFromFile(const std::string& path, Net* net);

// A SolverState (history blobs with their shapes) as a .solverstate.h5, and
// back. Reading fills iter, current_step, learned_net (when present) and
// history with shape and data.
Status WriteSolverStateToHdf5(const caffe::SolverState& state, const std::string& path);
Status ReadSolverStateFromHdf5(const std::string& path, caffe::SolverState* state);

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_HDF5_SNAPSHOT_H_
