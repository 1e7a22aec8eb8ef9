// How fast this CPU does the work HybComm's cost model prices
// (common/update/hybcomm.h), timed with the code that does it: a worker's rebuild of
// an SFB update (FactorGradient's GEMM, common/update/sfb.h, and SgdStep) and a
// server's apply (SgdStepAveraged, common/update/sgd.h). For a client given no rates
// (worker/client) and the pipeline bench. Each figure is the best of a few
// timed repeats after a warm-up: scheduling delays on a loaded machine only
// ever add time.
#ifndef NEREUS_COMMON_UPDATE_COMPUTE_RATES_H_
#define NEREUS_COMMON_UPDATE_COMPUTE_RATES_H_

namespace nereus {

struct CpuRates {
  // FactorGradient of a 1024 x 1024 weight from 4 workers' 64 rows (K = 256
  // stacked), FLOPs per second (2 per multiply-add), with OpenBLAS's threads.
  double gemm_flops_per_s = 0;
  // SgdStep with momentum and weight decay over 1 Mi floats (4 MiB of
  // weights, beyond most L2 caches), bytes of weights per second, one thread.
  double step_bytes_per_s = 0;
};

// Times both (about 0.1 s on a 2-core machine).
CpuRates MeasureCpuRates();

// MeasureCpuRates() once per process: the first caller times (callers on
// other threads wait for it), later calls return the same figures. A fixed
// property of the machine, cached so that several clients in one process
// (the benchmarks, tests) neither time it again nor time it all at once.
const CpuRates& ThisCpuRates();

// A server's apply with `gradients` (>= 1) workers: SgdStepAveraged (the
// average made on the fly, then the step) over 1 Mi floats, bytes of weights
// per second, one thread.
double MeasureApplyBytesPerS(int gradients);

}  // namespace nereus

#endif  // NEREUS_COMMON_UPDATE_COMPUTE_RATES_H_
