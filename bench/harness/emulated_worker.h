// EmulatedWorker: one data-parallel worker of a bench job. It registers a
// model's tensors (layer by layer), Inits them, then runs BSP iterations whose
// per-layer forward and backward are emulated (slept for FLOPs / device
// speed) while its pushes and pulls go through real servers.
#ifndef NEREUS_BENCH_HARNESS_EMULATED_WORKER_H_
#define NEREUS_BENCH_HARNESS_EMULATED_WORKER_H_

#include <chrono>
#include <vector>

#include "bench/sim/models.h"
#include "nereus/client.h"
#include "worker/client/client_internal.h"

namespace nereus {
namespace bench {

struct EmulatedRun {
  double device_gflops = 1000;  // A layer's forward takes FLOPs x batch / this; its backward twice that.
  int batch = 32;
  int warmup = 5;      // Iterations not timed.
  int iterations = 8;  // Iterations timed.
  // Where a layer sent as sufficient factors is rebuilt. false: by the
  // client on this CPU (a real GEMM and SGD step, common/update/sfb.h). true: on the
  // emulated device, as Poseidon rebuilt on the GPU: before the layer's
  // forward of clock c >= 1 the device is held for the rebuild of clock c - 1,
  // RebuildSeconds() (its GEMM at device_gflops, its SGD step at
  // device_update_gbytes), and the client skips the arithmetic
  // (ClientInternals::sfb_emulated_rebuild): those weights are not updated.
  bool rebuild_on_device = false;
  // GB of weights per second of the emulated device's SGD step: an H200
  // copies 4.15 TB/s on the device (../shared/GPU.md) and a momentum step
  // moves about 5 floats per weight (reads gradient, weight and history,
  // writes weight and history): ~800.
  double device_update_gbytes = 800;
};

// The emulated device's rebuild of one SFB weight of `rows` x `cols` from
// `workers` workers' factors: 2 (workers run.batch) rows cols FLOPs at
// device_gflops plus 4 rows cols bytes at device_update_gbytes. Charged at
// the compute's batch K, as the compute is (LayerTimes), not at the factors'
// rows actually sent: in a model shrunk by F that is the full-size rebuild
// / F, which the emulated device (slowed as the compute: docs/SCALING.md)
// takes as long as the real device takes the full-size one. (A GEMM over the
// K / sqrt(F) factor rows sent would cost 1/F^1.5, sqrt(F) = 16 times too
// little at F = 256: bench/sim/models.h.)
double RebuildSeconds(const EmulatedRun& run, int workers, int64_t rows, int64_t cols);

// The factors' rows per worker over the compute's batch in `model` (its first
// fully connected layer's FactorRows / batch: 1 at full size, about
// 1/sqrt(F) in a model shrunk by F; every fully connected layer of a model
// has the same), 1 if it has none.
double FactorRowsPerBatch(const ModelSpec& model, int batch);

// What HybComm must be told when run.rebuild_on_device: the rebuild runs on
// the emulated device, and the client skips it. HybComm counts the GEMM over
// the factor rows it sends, so it is told the device's rate times
// FactorRowsPerBatch(model, run.batch): it then prices the rebuild at what
// RebuildSeconds charges. Leaves `options` alone otherwise (the client times
// this CPU).
void SetRebuildOptions(const EmulatedRun& run, const ModelSpec& model, ClientOptions* options,
                       ClientInternals* internals);

// Per timed iteration.
struct WorkerTimes {
  std::vector<double> iteration_s;      // From its first layer's wait to the next iteration's.
  std::vector<double> all_iteration_s;  // The same of every iteration, the warm-up's too.
  std::vector<double> compute_s;        // Slept (emulated compute).
  std::vector<double> wait_s;           // Blocked in WaitWeights and GradientsReady.
  // The client's counters after the forward of the first timed iteration
  // (every pull of that clock is in, and so every push of the clock before)
  // and after the weights of the clock after the last have arrived. Own
  // factor messages are counted when the scheduler sends them, which can lag
  // the wait; read the counters again once the job has finished (LocalJob::
  // Finish) for exactly `iterations` clocks of traffic.
  ClientStats timed_begin, timed_end;
};

// The emulated device's clock. Each layer's compute ends at a deadline that
// runs on from the previous layer's: on a loaded machine every sleep
// overshoots (by up to milliseconds), and over a model's hundreds of layers a
// sleep of its own per layer would add them all up. The deadlines restart
// from `ready` only after a wait that blocked, as the device would have idled.
// What a layer reports as its compute is the time it held the device: from
// its start, or from where the previous layer really ended if that was later
// (an overshoot the deadline absorbed is counted once, not again by the next
// layer), to when its sleep really returned. So an iteration's compute adds
// up to its elapsed time less the blocked waits, whatever the overshoots.
class EmulatedDevice {
 public:
  using Clock = std::chrono::steady_clock;
  // A layer of `seconds` may start at `ready` (`blocked`: its caller waited
  // for it). Returns the deadline to sleep until.
  Clock::time_point Begin(double seconds, Clock::time_point ready, bool blocked);
  // The layer's sleep returned at `now`: the seconds it held the device.
  double End(Clock::time_point now);

 private:
  bool started_ = false;
  Clock::time_point deadline_{}, start_{}, last_end_{};
};

// Emulated forward and backward seconds of each layer.
void LayerTimes(const ModelSpec& model, const EmulatedRun& run, std::vector<double>* forward,
                std::vector<double>* backward);

// Runs the worker on `client` (connected, nothing registered yet). Fully
// connected layers' weights are registered with sufficient factors (K = batch
// rows, as the trainer's InnerProduct does; a shrunk model's FactorRows), so
// the client's --sfb decides
// whether they travel as factors among the workers or through the servers;
// the full gradient the servers get is exactly left^T * right. With
// run.rebuild_on_device the client must have been connected with
// SetRebuildOptions(run, ...).
Status RunEmulatedWorker(Client& client, const ModelSpec& model, const EmulatedRun& run, WorkerTimes* times);

}  // namespace bench
}  // namespace nereus

#endif  // NEREUS_BENCH_HARNESS_EMULATED_WORKER_H_
