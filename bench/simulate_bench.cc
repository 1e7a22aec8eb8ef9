// nereus_bench simulate: predicts the iteration time and the scaling of a
// model's job on H hosts (one worker and one server each) with the
// event-driven simulator (bench/sim/simulator.h), one CSV line a configuration.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "bench/harness/emulated_worker.h"
#include "bench/sim/models.h"
#include "bench/sim/simulator.h"
#include "common/update/hybcomm.h"
#include "server/server_flags.h"
#include "worker/client/client_flags.h"

DEFINE_string(host_list, "", "simulate: hosts to predict, comma separated (default: --hosts).");
DEFINE_string(link_list, "",
              "simulate, pipeline: link rates in Mbit/s, comma separated (default: --link_mbit); pipeline runs "
              "each in turn (0 = unshaped), its rows gathered into one --json.");
DEFINE_double(alpha_us, 0, "simulate: fixed cost of every message (the client's measured alpha), microseconds.");
DEFINE_double(beta_ns, 0,
              "simulate: seconds a byte takes on a link, in ns (the client's measured beta); 0: from the link rate, "
              "counting TCP/IP and Ethernet headers at MTU 1500.");
DEFINE_double(apply_ns_per_byte, 0.25,
              "simulate: a server's apply, per byte of a partition and per worker gradient averaged, in ns.");
DEFINE_double(compute_scale, 1,
              "simulate: multiply every layer's compute time by this (e.g. the emulated workers' measured compute / "
              "the nominal one, where sleeps overshoot on a loaded machine).");
DEFINE_double(layer_overhead_us, 0,
              "simulate: added to every layer's forward and backward, in microseconds (what each of the emulated "
              "workers' sleeps overshoots on a loaded machine: (measured - nominal compute) / (2 x layers)).");
DEFINE_int32(sim_iterations, 5, "simulate: iterations simulated (the first one is not counted).");
DEFINE_double(sfb_apply_ns_per_byte, -1,
              "simulate: a worker's SGD step on a sufficient-factor layer's weight, per byte of it, in ns; -1: "
              "--apply_ns_per_byte (the client steps on the CPU, as a server does).");
DEFINE_double(rebuild_gflops, -1,
              "simulate: the rate of a worker's rebuild of a sufficient-factor layer's gradient (a GEMM of "
              "2 K P M N FLOPs, K the factors' rows), GFLOP/s; -1: --device_gflops (rebuilt on the worker's device); "
              "0: free. --sfb (off, auto, on) decides which layers travel as factors, as HybComm does in a job.");

DEFINE_string(rebuild_rows, "batch",
              "simulate: what a sufficient-factor layer's rebuild is charged for in a model shrunk by F "
              "(--model_scale): batch, 2 K P M N FLOPs at the compute's batch K (the full-size rebuild / F, as the "
              "compute; what the emulated device charges, cluster --sfb_rebuild=device), or factors, the GEMM over "
              "the factors sent, K / sqrt(F) rows each (/ F^1.5; what the emulated client's real GEMM computes, "
              "--sfb_rebuild=cpu). The same at full size.");
DEFINE_int32(sim_apply_threads, 0,
             "simulate: partitions a server applies at once, each at --apply_ns_per_byte; 0: --apply_threads as the "
             "servers take it (-1, the default, one per core of this machine).");

DECLARE_string(model);
DECLARE_double(link_mbit);
DECLARE_double(device_gflops);
DECLARE_int32(batch);
DECLARE_uint64(partition_bytes);
DECLARE_int32(hosts);
DECLARE_double(latency_us);
DECLARE_double(model_scale);
DECLARE_string(sfb);
DECLARE_string(sfb_rebuild);

namespace nereus {
namespace bench {

int RunSimulate(BenchContext& ctx) {
  (void)ctx;
  auto model = ValueOrLog(ModelByName(FLAGS_model));
  auto schedule = ValueOrLog(ParseSchedule(FLAGS_schedule));
  if (!model || !schedule) return 2;
  const ModelSpec shrunk = Shrink(*model, FLAGS_model_scale);
  auto sfb = ValueOrLog(ParseSfbMode(FLAGS_sfb));
  if (!sfb) return 2;
  if (!(FLAGS_compute_scale > 0)) {
    LOG(ERROR) << "--compute_scale must be > 0";
    return 2;
  }
  const EmulatedRun run = EmulatedRunFromFlags();
  std::vector<double> fwd, bwd;
  LayerTimes(shrunk, run, &fwd, &bwd);
  for (size_t l = 0; l < fwd.size(); ++l) {
    fwd[l] = fwd[l] * FLAGS_compute_scale + FLAGS_layer_overhead_us * 1e-6;
    bwd[l] = bwd[l] * FLAGS_compute_scale + FLAGS_layer_overhead_us * 1e-6;
  }
  const double rebuild_gflops = FLAGS_rebuild_gflops < 0 ? FLAGS_device_gflops : FLAGS_rebuild_gflops;
  if (FLAGS_rebuild_rows != "batch" && FLAGS_rebuild_rows != "factors") {
    LOG(ERROR) << "--rebuild_rows must be batch or factors, got \"" << FLAGS_rebuild_rows << "\"";
    return 2;
  }
  if (FLAGS_sfb_rebuild != "cpu" && FLAGS_sfb_rebuild != "device") {
    LOG(ERROR) << "simulate: --sfb_rebuild must be cpu or device, got \"" << FLAGS_sfb_rebuild << "\"";
    return 2;
  }
  const RebuildCharge charge = FLAGS_rebuild_rows == "batch" ? RebuildCharge::kFullSize : RebuildCharge::kFactorsSent;
  int apply_threads = FLAGS_sim_apply_threads;
  if (apply_threads <= 0) {
    auto threads = ValueOrLog(ApplyThreadsFromFlags());
    if (!threads) return 2;
    apply_threads = std::max(1, *threads);  // 0 (the receive thread) applies one at a time too.
  }
  std::vector<int> hosts;
  for (const std::string& h : SplitCsv(FLAGS_host_list)) hosts.push_back(std::stoi(h));
  if (hosts.empty()) hosts.push_back(FLAGS_hosts);
  std::vector<double> links;
  for (const std::string& r : SplitCsv(FLAGS_link_list)) links.push_back(std::stod(r));
  if (links.empty()) links.push_back(FLAGS_link_mbit);
  const double scale = std::max(1.0, FLAGS_model_scale);
  std::printf(
      "model,schedule,hosts,link_mbit,model_scale,iteration_s,compute_s,wait_s,samples_per_s,efficiency,sfb_layers,"
      "sent_bytes,factor_bytes,rebuild_s\n");
  std::vector<Record> records;
  for (double mbit : links) {
    SimOptions o;
    o.schedule = *schedule;
    if (mbit <= 0 && FLAGS_beta_ns <= 0) {
      LOG(ERROR) << "simulate needs --link_mbit (or --link_list) > 0 or --beta_ns";
      return 2;
    }
    o.link_bytes_per_s = FLAGS_beta_ns > 0 ? 1e9 / FLAGS_beta_ns : PayloadBytesPerSecond(mbit);
    o.latency_s = FLAGS_latency_us * 1e-6;
    o.alpha_s = FLAGS_alpha_us * 1e-6;
    o.apply_s_per_byte = FLAGS_apply_ns_per_byte * 1e-9;
    o.apply_threads = apply_threads;
    o.rebuild_on_device = FLAGS_sfb_rebuild == "device";
    o.partition_bytes = std::max<uint64_t>(4, static_cast<uint64_t>(FLAGS_partition_bytes / scale));
    o.credit_bytes = std::max<uint64_t>(4, static_cast<uint64_t>(FLAGS_credit_bytes / scale));
    o.iterations = FLAGS_sim_iterations;
    o.sfb_flops_per_s = rebuild_gflops * 1e9;
    o.sfb_apply_s_per_byte = FLAGS_sfb_apply_ns_per_byte < 0 ? -1 : FLAGS_sfb_apply_ns_per_byte * 1e-9;
    // Each host count's; HybComm decides per host count, as in a job.
    auto simulate = [&](int h, int* sfb_layers) -> StatusOr<SimResult> {
      std::vector<HybCommChoice> choices;
      o.hosts = h;
      ASSIGN_OR_RETURN(auto layers,
                       SimLayersOf(shrunk, fwd, bwd, h, *sfb, FLAGS_batch, HybCommRatesOf(o), &choices, charge));
      *sfb_layers = 0;
      for (const HybCommChoice& c : choices) *sfb_layers += c.sfb;
      return Simulate(layers, o);
    };
    int sfb_layers = 0;
    for (int h : hosts) {
      auto r = simulate(h, &sfb_layers);
      if (!r.ok()) {
        LOG(ERROR) << r.status().message();
        return 2;
      }
      const double samples = h * FLAGS_batch / r->iteration_s;
      // Against compute alone (simulator.h), the same in every study.
      const double efficiency = ScalingEfficiency(*r);
      std::printf("%s,%s,%d,%g,%g,%.6f,%.6f,%.6f,%.3f,%.4f,%d,%.0f,%.0f,%.6f\n", FLAGS_model.c_str(),
                  ScheduleName(*schedule), h, mbit, scale, r->iteration_s, r->compute_s, r->wait_s, samples, efficiency,
                  sfb_layers, r->sent_bytes, r->factor_bytes_sent, r->rebuild_s);
      std::fflush(stdout);
      Record rec;
      rec.Set("model", FLAGS_model).Set("schedule", ScheduleName(*schedule)).Set("hosts", h);
      rec.Set("link_mbit", mbit).Set("model_scale", scale).Set("iteration_s", r->iteration_s);
      rec.Set("compute_s", r->compute_s).Set("wait_s", r->wait_s).Set("samples_per_s", samples);
      rec.Set("efficiency", efficiency).Set("sfb", FLAGS_sfb).Set("sfb_layers", sfb_layers);
      rec.Set("rebuild_rows", FLAGS_rebuild_rows).Set("sfb_rebuild", FLAGS_sfb_rebuild);
      rec.Set("apply_threads", apply_threads).Set("alpha_us", FLAGS_alpha_us);
      rec.Set("sent_bytes", r->sent_bytes).Set("factor_bytes", r->factor_bytes_sent).Set("rebuild_s", r->rebuild_s);
      records.push_back(rec);
    }
  }
  return WriteJson(records) ? 0 : 1;
}

}  // namespace bench
}  // namespace nereus
