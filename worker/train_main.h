// The trainer mode of nereus_worker (--solver=FILE), defined in
// worker/train_main.cc with its flags. Part of the binary only.
#ifndef NEREUS_WORKER_TRAIN_MAIN_H_
#define NEREUS_WORKER_TRAIN_MAIN_H_

#include <gflags/gflags.h>

DECLARE_string(solver);
DECLARE_string(time);
DECLARE_string(test);
DECLARE_bool(device_query);

namespace nereus {

// Trains the solver given by --solver; returns the process exit status
// (0 success, 1 training failed, 2 bad flags).
int RunTrainerMode();
// Times the net given by --time (Caffe's `caffe time`); the exit status as
// above.
int RunTimeMode();
// Scores the net given by --test with --weights (Caffe's `caffe test`).
int RunTestMode();
// Lists the CUDA devices (Caffe's `caffe device_query`).
int RunDeviceQuery();

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAIN_MAIN_H_
