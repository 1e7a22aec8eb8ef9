// The trainer mode of nereus_worker (--solver=FILE), defined in
// worker/train_main.cc with its flags. Part of the binary only.
#ifndef NEREUS_WORKER_TRAIN_MAIN_H_
#define NEREUS_WORKER_TRAIN_MAIN_H_

#include <gflags/gflags.h>

DECLARE_string(solver);

namespace nereus {

// Trains the solver given by --solver; returns the process exit status
// (0 success, 1 training failed, 2 bad flags).
int RunTrainerMode();

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAIN_MAIN_H_
