// nereus_bench pipeline: workers emulate a model's per-layer compute (slept,
// from its FLOPs at --device_gflops) and do real pushes and pulls through real
// servers, under one schedule; reports the median iteration time against the
// lower bound max(compute, bytes over the busiest link / its rate).
#include <gflags/gflags.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "bench/bench.h"
#include "bench/harness/emulated_worker.h"
#include "bench/harness/local_job.h"
#include "bench/harness/netns.h"
#include "bench/harness/watchdog.h"
#include "bench/sim/models.h"
#include "common/net/node_flags.h"
#include "common/update/compute_rates.h"
#include "common/update/hybcomm.h"
#include "server/server_flags.h"
#include "worker/client/client_flags.h"

DEFINE_string(model, "vgg19", "pipeline, cluster, simulate: vgg19, vgg19_22k, resnet50, inception_v3 or lenet.");
DEFINE_int32(workers, 2, "pipeline: workers (threads of this process, each with its own client).");
DEFINE_int32(servers, 2, "pipeline: servers.");
DEFINE_double(link_mbit, 0,
              "pipeline: if > 0, run the whole job inside a network namespace of its own whose loopback is shaped "
              "(tc tbf) to this many Mbit/s; every byte between workers and servers crosses that one link. cluster: "
              "every host's link, each way. simulate: the link rate predicted for.");
DEFINE_double(device_gflops, 1000, "pipeline: emulated device speed; a layer's forward takes FLOPs / this.");
DEFINE_int32(batch, 32, "pipeline: samples per worker per iteration.");
DEFINE_int32(iterations, 8, "pipeline: iterations timed (after --warmup).");
DEFINE_int32(warmup, 5, "pipeline: iterations not timed (merging is planned in these).");
DEFINE_uint64(partition_bytes, 1 << 20,
              "Tensors are cut into partitions of at most this many bytes: the unit servers store and "
              "update and the unit the scheduler orders.");
DEFINE_string(batch_sweep, "",
              "pipeline: comma-separated --batch_bytes values (e.g. 0,65536) to run every schedule with, one after "
              "the other within each round (empty: --batch_bytes alone).");
DEFINE_int32(rounds, 1,
             "pipeline: run every (schedule, --batch_sweep value) this many times, interleaved round by round, so "
             "the settings compared share the machine's slow and fast moments; each run is its own row.");
DEFINE_string(sfb_rebuild, "cpu",
              "pipeline, cluster: where a layer sent as sufficient factors is rebuilt. cpu: by each worker's client "
              "on this CPU (a real OpenBLAS GEMM and SGD step); HybComm is told this CPU's GEMM rate divided by "
              "--workers and its one-thread step rate times min(1, cores / --workers) (pipeline: the workers share "
              "this machine) unless --sfb_rebuild_gflops/--sfb_update_gbytes say otherwise. device: on the emulated "
              "device, as Poseidon rebuilt on the GPU: the layer's forward first holds the device for 2(P1 K)MN "
              "FLOPs at --device_gflops (K the batch, also in a model shrunk by --model_scale: the full-size "
              "rebuild / F, as the compute) plus 4MN bytes at --device_update_gbytes, HybComm is told those rates "
              "(the GEMM's scaled to the factor rows it counts), and the client skips the arithmetic (those weights "
              "are not updated; nothing checks them). pipeline: a comma-separated list runs each in turn (--sfb=off "
              "once per round). simulate: device holds the simulated device for the rebuild before the layer's next "
              "forward, cpu rebuilds on the worker's applier beside its compute.");
DEFINE_double(device_update_gbytes, 800,
              "pipeline, cluster, --sfb_rebuild=device: GB of weights per second of the emulated device's SGD step "
              "after a rebuild (an H200 copies 4.15 TB/s on the device and a momentum step moves ~5 floats per "
              "weight: ~800).");
DECLARE_string(json);
DECLARE_string(sfb);
DECLARE_double(model_scale);
DECLARE_string(link_list);
DEFINE_bool(inside_netns, false, "pipeline: internal; set when re-run inside the shaped namespace.");

namespace nereus {
namespace bench {

EmulatedRun EmulatedRunFromFlags(bool rebuild_on_device) {
  EmulatedRun run;
  run.device_gflops = FLAGS_device_gflops;
  run.batch = FLAGS_batch;
  run.warmup = FLAGS_warmup;
  run.iterations = FLAGS_iterations;
  run.rebuild_on_device = rebuild_on_device;
  run.device_update_gbytes = FLAGS_device_update_gbytes;
  return run;
}
namespace {

struct Outcome {
  double iteration_s = 0;  // Median.
  double compute_s = 0;
  // Measured from the clients' counters, per worker per timed iteration
  // (mean over workers): what its link would carry both ways (gradients and
  // factors sent, weights and other workers' factors received).
  double bytes_per_worker = 0;
  double link_bytes = 0;  // Every worker's bytes, each counted once (what crosses the one shaped link).
  double lower_bound_s = 0;
  // Per worker per timed iteration (mean over workers).
  double push_messages = 0, pull_messages = 0, batches = 0, batched_units = 0;
  double factor_messages = 0;
  double factor_bytes_received = 0;  // As counted in the window (see RunOne).
  double factor_apply_s = 0;         // The client's factor GEMMs and SGD steps (a thread of its own).
  int sfb_tensors = 0;               // Tensors the client sent as factors (in the last clock).
  // HybComm's measured switching on worker 0: path switches, clocks on a
  // path under trial; and the warm-up's iterations in all (median over the
  // workers), where the trials run: what they cost shows against the same
  // clocks of a fixed choice.
  uint64_t sfb_switches = 0, sfb_trial_clocks = 0;
  double warmup_s = 0;
  // The rebuild rates HybComm was told (0: the client timed them; off and on do not price).
  double rebuild_gflops = 0, update_gbytes = 0;
};

// The EmulatedRun of the flags, rebuilding SFB layers on the emulated device
// or not.
// --sfb_rebuild=cpu: the share of this CPU's rebuild rates HybComm is told
// each worker has, where the flags give none (the --workers clients of this
// process rebuild the same clock at once: OpenBLAS's GEMM uses every core, so
// each gets 1/W of it; the SGD step runs on one thread per worker).
void SetCpuShare(ClientOptions* o) {
  const CpuRates& cpu = ThisCpuRates();
  const double w = std::max(1, FLAGS_workers);
  const double cores = std::max(1u, std::thread::hardware_concurrency());
  if (o->sfb_rebuild_gflops <= 0) o->sfb_rebuild_gflops = cpu.gemm_flops_per_s / 1e9 / w;
  if (o->sfb_update_gbytes <= 0) o->sfb_update_gbytes = cpu.step_bytes_per_s / 1e9 * std::min(1.0, cores / w);
}

StatusOr<Outcome> RunOne(const ModelSpec& model, Schedule schedule, uint64_t batch_bytes, const std::string& sfb,
                         const std::string& rebuild, Watchdog* wd) {
  const std::string phase = std::string("pipeline ") + model.name + " " + ScheduleName(schedule) +
                            " batch_bytes=" + std::to_string(batch_bytes) + " sfb=" + sfb + " rebuild=" + rebuild;
  wd->Phase(phase + ": job start");
  LocalJobOptions o;
  o.servers = FLAGS_servers;
  o.workers = FLAGS_workers;
  o.job.set_partition_bytes(FLAGS_partition_bytes);
  o.job.set_heartbeat_timeout_ms(60000);
  // --schedule may say "all"; the client options are those of one schedule.
  const std::string asked = FLAGS_schedule, asked_sfb = FLAGS_sfb;
  const uint64_t asked_batch = FLAGS_batch_bytes;
  FLAGS_schedule = ScheduleName(schedule);
  FLAGS_batch_bytes = batch_bytes;
  FLAGS_sfb = sfb;
  auto client = ClientOptionsFromFlags();
  FLAGS_schedule = asked;
  FLAGS_batch_bytes = asked_batch;
  FLAGS_sfb = asked_sfb;
  ASSIGN_OR_RETURN(o.client, client);
  o.client.merge_profile_iterations = std::min(3, std::max(1, FLAGS_warmup - 2));
  o.server_transport.streams_per_peer = schedule == Schedule::kFull ? FLAGS_streams : 1;
  ASSIGN_OR_RETURN(o.server_apply_threads, ApplyThreadsFromFlags());
  const EmulatedRun run = EmulatedRunFromFlags(rebuild == "device");
  if (run.rebuild_on_device)
    SetRebuildOptions(run, model, &o.client, &o.client_internals);
  else if (sfb == "auto")
    SetCpuShare(&o.client);
  ASSIGN_OR_RETURN(auto job, LocalJob::Start(o));
  std::vector<double> fwd, bwd;
  LayerTimes(model, run, &fwd, &bwd);
  double compute = 0;
  for (size_t l = 0; l < fwd.size(); ++l) compute += fwd[l] + bwd[l];
  const int W = FLAGS_workers;
  std::vector<WorkerTimes> times(W);
  std::vector<Status> status(W);
  std::vector<std::thread> threads;
  wd->Phase(phase + ": INIT and " + std::to_string(FLAGS_warmup + FLAGS_iterations) + " iterations");
  for (int r = 0; r < W; ++r)
    threads.emplace_back([&, r] { status[r] = RunEmulatedWorker(job->worker(r), model, run, &times[r]); });
  for (auto& t : threads) t.join();
  for (auto& s : status) RETURN_IF_ERROR(s);
  const int sfb_tensors = static_cast<int>(job->worker(0).sfb_tensors().size());
  const ClientStats worker0 = job->worker(0).stats();
  wd->Phase(phase + ": job finish");
  RETURN_IF_ERROR(job->Finish());
  // Every worker has its last weights, so every factor message of the last
  // clock has left: the counters now hold exactly the timed clocks' traffic
  // (nothing moves after the last weights).
  for (int r = 0; r < W; ++r) times[r].timed_end = job->worker(r).stats();
  std::vector<double> all;
  for (auto& v : times) all.insert(all.end(), v.iteration_s.begin(), v.iteration_s.end());
  Outcome out;
  out.iteration_s = Median(all);
  out.compute_s = compute;
  out.sfb_tensors = sfb_tensors;
  out.sfb_switches = worker0.sfb_switches;
  out.sfb_trial_clocks = worker0.sfb_trial_clocks;
  {
    std::vector<double> warm;
    for (const WorkerTimes& t : times) {
      double sum = 0;
      for (int i = 0; i < FLAGS_warmup && i < static_cast<int>(t.all_iteration_s.size()); ++i)
        sum += t.all_iteration_s[i];
      warm.push_back(sum);
    }
    out.warmup_s = Median(warm);
  }
  out.rebuild_gflops = o.client.sfb_rebuild_gflops;
  out.update_gbytes = o.client.sfb_update_gbytes;
  const double per = static_cast<double>(W) * std::max(1, FLAGS_iterations);
  for (const WorkerTimes& t : times) {
    const ClientStats &a = t.timed_begin, &b = t.timed_end;
    out.push_messages += (b.push_messages - a.push_messages) / per;
    out.pull_messages += (b.pull_messages - a.pull_messages) / per;
    out.batches += (b.batches - a.batches) / per;
    out.batched_units += (b.batched_units - a.batched_units) / per;
    out.factor_messages += (b.factor_messages - a.factor_messages) / per;
    out.factor_apply_s += (b.factor_apply_us - a.factor_apply_us) * 1e-6 / per;
    const double sent = static_cast<double>((b.push_bytes - a.push_bytes) + (b.pull_bytes - a.pull_bytes) +
                                            (b.factor_bytes - a.factor_bytes));
    out.link_bytes += sent * W / per;
    // What it receives of the others' factors equals what it sends them
    // (same batch and shapes on every worker). Counted from its own sends:
    // the received counter can miss a fast peer's factors of the first timed
    // clock, which may arrive before this worker's window opens.
    out.bytes_per_worker += (sent + (b.factor_bytes - a.factor_bytes)) / per;
    out.factor_bytes_received += (b.factor_bytes_received - a.factor_bytes_received) / per;
  }
  // Inside the namespace every byte of every worker crosses the one shaped
  // loopback once; otherwise the link is taken as free.
  const double link_s = FLAGS_link_mbit > 0 ? out.link_bytes * 8 / (FLAGS_link_mbit * 1e6) : 0;
  out.lower_bound_s = std::max(compute, link_s);
  return out;
}

int RunInside(Watchdog* wd) {
  auto full = ValueOrLog(ModelByName(FLAGS_model));
  if (!full) return 2;
  if (FLAGS_model_scale < 1) {
    LOG(ERROR) << "--model_scale must be >= 1, got " << FLAGS_model_scale;
    return 2;
  }
  // Fully connected weights stay matrices with factors (bench/sim/models.h).
  const ModelSpec shrunk = Shrink(*full, FLAGS_model_scale);
  const ModelSpec* model = &shrunk;
  std::vector<std::string> rebuilds = SplitCsv(FLAGS_sfb_rebuild);
  for (const std::string& r : rebuilds)
    if (r != "cpu" && r != "device") {
      LOG(ERROR) << "--sfb_rebuild must be cpu or device (or a comma-separated list of them), got \"" << r << "\"";
      return 2;
    }
  if (rebuilds.empty()) {
    LOG(ERROR) << "--sfb_rebuild: give cpu or device (or a comma-separated list of them)";
    return 2;
  }
  std::vector<Schedule> schedules;
  if (FLAGS_schedule == "all") {
    schedules = {Schedule::kSequential, Schedule::kWfbp, Schedule::kPriority, Schedule::kFull};
  } else {
    auto s = ValueOrLog(ParseSchedule(FLAGS_schedule));
    if (!s) return 2;
    schedules = {*s};
  }
  std::vector<uint64_t> sweep = {FLAGS_batch_bytes};
  if (!FLAGS_batch_sweep.empty()) {
    sweep.clear();
    for (const std::string& v : SplitCsv(FLAGS_batch_sweep)) {
      char* end = nullptr;
      const unsigned long long b = std::strtoull(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0') {
        LOG(ERROR) << "--batch_sweep: \"" << v << "\" is not a byte count";
        return 2;
      }
      sweep.push_back(b);
    }
  }
  if (FLAGS_rounds < 1) {
    LOG(ERROR) << "--rounds must be >= 1";
    return 2;
  }
  // --sfb may list modes (e.g. off,auto) to run side by side.
  const std::vector<std::string> sfb_modes = SplitCsv(FLAGS_sfb);
  for (const std::string& m : sfb_modes) {
    auto parsed = ParseSfbMode(m);
    if (!parsed.ok()) {
      LOG(ERROR) << "--sfb: " << parsed.status().message();
      return 2;
    }
  }
  if (sfb_modes.empty()) {
    LOG(ERROR) << "--sfb: give auto, off or on (or a comma-separated list of them)";
    return 2;
  }
  // Each --sfb mode with each --sfb_rebuild place; off rebuilds nothing, so it runs once.
  std::vector<std::pair<std::string, std::string>> runs;
  for (const std::string& sfb : sfb_modes)
    for (const std::string& rebuild : rebuilds) {
      runs.emplace_back(sfb, rebuild);
      if (sfb == "off") break;
    }
  std::printf("%s (--model_scale=%g): %.1f M parameters, %d worker(s), %d server(s), batch %d, link %s\n",
              model->name.c_str(), FLAGS_model_scale, model->parameters() / 1e6, FLAGS_workers, FLAGS_servers,
              FLAGS_batch,
              FLAGS_link_mbit > 0 ? (std::to_string(static_cast<int>(FLAGS_link_mbit)) + " Mbit/s").c_str()
                                  : "loopback (unshaped)");
  std::printf("%-11s %7s %5s %7s %4s %12s %10s %10s %10s %10s %9s %9s %10s %9s\n", "schedule", "batch_B", "sfb",
              "rebuild", "SFB", "iteration_s", "compute_s", "bound_s", "x bound", "samples/s", "push/it", "pull/it",
              "MB/worker", "apply_s");
  JsonRows json(FLAGS_json);
  for (int round = 0; round < FLAGS_rounds; ++round) {
    for (Schedule s : schedules) {
      for (uint64_t batch_bytes : sweep) {
        for (const auto& [sfb, rebuild] : runs) {
          auto out = RunOne(*model, s, batch_bytes, sfb, rebuild, wd);
          if (!out.ok()) {
            LOG(ERROR) << "pipeline " << ScheduleName(s) << " batch_bytes=" << batch_bytes << " sfb=" << sfb
                       << " rebuild=" << rebuild << ": " << out.status();
            return 1;
          }
          const double samples = FLAGS_workers * FLAGS_batch / out->iteration_s;
          std::printf("%-11s %7llu %5s %7s %4d %12.3f %10.3f %10.3f %10.3f %10.1f %9.1f %9.1f %10.1f %9.3f\n",
                      ScheduleName(s), static_cast<unsigned long long>(batch_bytes), sfb.c_str(), rebuild.c_str(),
                      out->sfb_tensors, out->iteration_s, out->compute_s, out->lower_bound_s,
                      out->iteration_s / out->lower_bound_s, samples, out->push_messages, out->pull_messages,
                      out->bytes_per_worker / 1e6, out->factor_apply_s);
          std::fflush(stdout);
          Record r;
          r.Set("model", model->name).Set("workers", FLAGS_workers).Set("servers", FLAGS_servers);
          r.Set("schedule", ScheduleName(s)).Set("iterations", FLAGS_iterations).Set("iteration_s", out->iteration_s);
          r.Set("compute_s", out->compute_s).Set("bytes_per_worker", out->bytes_per_worker);
          r.Set("lower_bound_s", out->lower_bound_s).Set("samples_per_s", samples);
          r.Set("link_mbit", FLAGS_link_mbit);
          r.Set("batch_bytes", static_cast<unsigned long long>(batch_bytes)).Set("round", round);
          r.Set("push_messages_per_iter", out->push_messages).Set("pull_messages_per_iter", out->pull_messages);
          r.Set("batches_per_iter", out->batches).Set("batched_units_per_iter", out->batched_units);
          r.Set("sfb", sfb).Set("sfb_tensors", out->sfb_tensors).Set("link_bytes_per_iter", out->link_bytes);
          r.Set("factor_messages_per_iter", out->factor_messages).Set("factor_apply_s", out->factor_apply_s);
          r.Set("batch", FLAGS_batch).Set("factor_bytes_received_per_iter", out->factor_bytes_received);
          r.Set("sfb_rebuild", rebuild).Set("model_scale", FLAGS_model_scale);
          r.Set("device_gflops", FLAGS_device_gflops).Set("rebuild_gflops", out->rebuild_gflops);
          r.Set("update_gbytes", out->update_gbytes);
          r.Set("warmup", FLAGS_warmup).Set("warmup_s", out->warmup_s);
          r.Set("sfb_switches", static_cast<unsigned long long>(out->sfb_switches));
          r.Set("sfb_trial_clocks", static_cast<unsigned long long>(out->sfb_trial_clocks));
          r.Set("sfb_trial_clocks_flag", FLAGS_sfb_trial_clocks);
          if (!json.Add(r)) return 1;
        }
      }
    }
  }
  wd->Idle();
  if (!FLAGS_json.empty()) std::printf("wrote %s\n", FLAGS_json.c_str());
  return 0;
}

// Runs the pipeline at one link rate in a child process: inside a shaped
// namespace of its own when `mbit` > 0. Its rows go to `json` (if set).
int RunAtRate(BenchContext& ctx, double mbit, const std::string& json) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return 1;
  self[n] = '\0';
  std::vector<std::string> args = {self};
  args.insert(args.end(), ctx.args.begin() + 1, ctx.args.end());
  // Later flags win: this rate alone, its own JSON file.
  std::ostringstream rate;
  rate << mbit;
  args.push_back("--link_mbit=" + rate.str());
  args.push_back("--link_list=");
  args.push_back("--json=" + json);
  args.push_back("--inside_netns");
  std::unique_ptr<NetNamespace> ns;
  if (mbit > 0) {
    ctx.watchdog->Phase("pipeline: creating the namespace shaped to " + rate.str() + " Mbit/s");
    auto created = NetNamespace::Create("nereus_bench_" + std::to_string(getpid()), mbit);
    if (!created.ok()) {
      LOG(ERROR) << "--link_mbit needs a network namespace: " << created.status().message();
      return 1;
    }
    ns = std::move(created).value();
    args = ns->Wrap(args);
  }
  // The run inside bounds its own phases (same --phase_timeout_s).
  ctx.watchdog->Idle();
  std::string out;
  const int code = RunCommand(args, &out);
  std::fputs(out.c_str(), stdout);
  std::fflush(stdout);
  return code;
}

}  // namespace

int RunPipeline(BenchContext& ctx) {
  if (FLAGS_inside_netns) return RunInside(ctx.watchdog);
  std::vector<double> rates;
  for (const std::string& v : SplitCsv(FLAGS_link_list)) {
    char* end = nullptr;
    const double r = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || r < 0) {
      LOG(ERROR) << "--link_list: \"" << v << "\" is not a rate in Mbit/s (0 = unshaped)";
      return 2;
    }
    rates.push_back(r);
  }
  if (rates.empty()) {
    if (FLAGS_link_mbit <= 0) return RunInside(ctx.watchdog);
    return RunAtRate(ctx, FLAGS_link_mbit, FLAGS_json);
  }
  // One child per rate, one after the other; their rows are gathered into
  // --json in the order run (each row carries its link_mbit).
  std::vector<std::string> rows;
  for (size_t i = 0; i < rates.size(); ++i) {
    const double r = rates[i];
    const std::string part = FLAGS_json.empty() ? "" : FLAGS_json + ".rate" + std::to_string(i);
    const int code = RunAtRate(ctx, r, part);
    if (!part.empty()) {
      std::ifstream in(part);
      for (std::string line; std::getline(in, line);) {
        if (line.rfind("  {", 0) != 0) continue;
        if (line.back() == ',') line.pop_back();
        rows.push_back(line);
      }
      std::remove(part.c_str());
    }
    if (code != 0) return code;
  }
  if (!FLAGS_json.empty()) {
    std::ofstream out(FLAGS_json, std::ios::trunc);
    out << "[\n";
    for (size_t i = 0; i < rows.size(); ++i) out << rows[i] << (i + 1 < rows.size() ? ",\n" : "\n");
    out << "]\n";
    if (!out) {
      LOG(ERROR) << "cannot write --json=" << FLAGS_json;
      return 1;
    }
  }
  return 0;
}

}  // namespace bench
}  // namespace nereus
