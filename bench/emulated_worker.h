// EmulatedWorker: one data-parallel worker of a bench job. It registers a
// model's tensors (layer by layer), Inits them, then runs BSP iterations whose
// per-layer forward and backward are emulated (slept for FLOPs / device
// speed) while its pushes and pulls go through real servers.
#ifndef NEREUS_BENCH_EMULATED_WORKER_H_
#define NEREUS_BENCH_EMULATED_WORKER_H_

#include <vector>

#include "bench/models.h"
#include "nereus/client.h"

namespace nereus {
namespace bench {

struct EmulatedRun {
  double device_gflops = 1000;  // A layer's forward takes FLOPs x batch / this; its backward twice that.
  int batch = 32;
  int warmup = 5;      // Iterations not timed.
  int iterations = 8;  // Iterations timed.
};

// Per timed iteration.
struct WorkerTimes {
  std::vector<double> iteration_s;  // From its first layer's wait to the next iteration's.
  std::vector<double> compute_s;    // Slept (emulated compute).
  std::vector<double> wait_s;       // Blocked in WaitWeights and GradientsReady.
  // The client's counters after the forward of the first timed iteration
  // (every pull of that clock is in, and so every push of the clock before)
  // and after the weights of the clock after the last have arrived. Own
  // factor messages are counted when the scheduler sends them, which can lag
  // the wait; read the counters again once the job has finished (LocalJob::
  // Finish) for exactly `iterations` clocks of traffic.
  ClientStats timed_begin, timed_end;
};

// Emulated forward and backward seconds of each layer.
void LayerTimes(const ModelSpec& model, const EmulatedRun& run, std::vector<double>* forward,
                std::vector<double>* backward);

// Runs the worker on `client` (connected, nothing registered yet). Fully
// connected layers' weights are registered with sufficient factors (K = batch
// rows, as the trainer's InnerProduct does), so the client's --sfb decides
// whether they travel as factors among the workers or through the servers;
// the full gradient the servers get is exactly left^T * right.
Status RunEmulatedWorker(Client& client, const ModelSpec& model, const EmulatedRun& run, WorkerTimes* times);

}  // namespace bench
}  // namespace nereus

#endif  // NEREUS_BENCH_EMULATED_WORKER_H_
