#include "bench/sim/simulator.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <queue>
#include <tuple>

#include "common/net/shard_map.h"

namespace nereus {
namespace bench {

double PayloadBytesPerSecond(double mbit, int mtu) {
  // TCP/IPv4 with timestamps: 52 header bytes a segment; the shaper counts
  // the 14-byte Ethernet header too.
  const double payload = mtu - 52, wire = mtu + 14;
  return mbit * 1e6 / 8 * payload / wire;
}

namespace {

struct Partition {
  int layer = 0;
  int server = 0;
  uint64_t bytes = 0;
};

struct Queued {
  uint64_t priority;  // (layer << 32 | sequence) under priority/full, sequence otherwise.
  int partition;      // -1: a message of the factors of `layer` for `clock`.
  int layer = 0;
  int64_t clock = 0;
  bool operator>(const Queued& o) const { return priority > o.priority; }
};

class Sim {
 public:
  Sim(const std::vector<SimLayer>& layers, const SimOptions& o, std::vector<Partition> parts)
      : layers_(layers), o_(o), parts_(std::move(parts)), L_(static_cast<int>(layers.size())), H_(o.hosts) {
    per_layer_.assign(L_, 0);
    for (const Partition& p : parts_) ++per_layer_[p.layer];
    factor_bytes_.assign(L_, 0);
    rebuild_s_.assign(L_, 0);
    for (int l = 0; l < L_; ++l) {
      const SimLayer& x = layers_[l];
      if (!x.sfb) continue;
      ++per_layer_[l];  // The weight, rebuilt from the factors.
      factor_bytes_[l] = 4 * static_cast<uint64_t>(x.sfb_factor_rows) * (x.sfb_rows + x.sfb_cols);
      const double m = static_cast<double>(x.sfb_rows), n = static_cast<double>(x.sfb_cols);
      const double k = static_cast<double>(x.sfb_rebuild_rows > 0 ? x.sfb_rebuild_rows : x.sfb_factor_rows);
      const double flops = 2.0 * k * H_ * m * n;
      const double step = o_.sfb_apply_s_per_byte < 0 ? o_.apply_s_per_byte : o_.sfb_apply_s_per_byte;
      rebuild_s_[l] = (o_.sfb_flops_per_s > 0 ? flops / o_.sfb_flops_per_s : 0) + 4 * m * n * step;
    }
    layer_parts_.resize(L_);
    for (size_t i = 0; i < parts_.size(); ++i) layer_parts_[parts_[i].layer].push_back(static_cast<int>(i));
    workers_.resize(H_);
    for (Worker& w : workers_) {
      w.queues.resize(2 * H_);  // Servers 0..H-1, then peers (factors).
      w.inflight.assign(2 * H_, 0);
      w.received.assign(L_, 0);
      w.ready_clock.assign(L_, 0);  // Clock 0's weights are there at the start.
      w.factors.resize(L_);
    }
    sent_.assign(H_, 0);
    received_.assign(H_, 0);
    factor_sent_.assign(H_, 0);
    applier_free_.assign(H_, 0);
    applier_busy_.assign(H_, 0);
    arrived_.assign(parts_.size(), 0);
    partition_free_.assign(parts_.size(), 0);
    server_free_.assign(H_, std::vector<double>(std::max(1, o.apply_threads), 0.0));
    up_free_.assign(H_, 0);
    down_free_.assign(H_, 0);
    up_busy_.assign(H_, 0);
    down_busy_.assign(H_, 0);
    credit_ = (o.schedule == Schedule::kPriority || o.schedule == Schedule::kFull) ? o.credit_bytes : 0;
  }

  SimResult Run() {
    for (int w = 0; w < H_; ++w) At(0, [this, w] { StartForward(w, 0); });
    while (!events_.empty()) {
      Event e = events_.top();
      events_.pop();
      now_ = e.time;
      ++count_;
      e.run();
    }
    SimResult r;
    for (const SimLayer& l : layers_) r.compute_s += l.forward_s + l.backward_s;
    double sum = 0;
    int n = 0;
    for (const Worker& w : workers_) {
      // starts[i]: iteration i's first forward began; the last entry is the
      // start of the iteration after the last one simulated.
      for (size_t i = 2; i < w.starts.size(); ++i, ++n) sum += w.starts[i] - w.starts[i - 1];
    }
    r.iteration_s = n ? sum / n : 0;
    r.wait_s = r.iteration_s - r.compute_s;
    double busy = 0;
    for (int h = 0; h < H_; ++h) busy = std::max({busy, up_busy_[h], down_busy_[h]});
    r.link_busy_s = busy / std::max(1, o_.iterations);
    const double per = static_cast<double>(H_) * std::max(1, o_.iterations);
    for (int h = 0; h < H_; ++h) {
      r.sent_bytes += sent_[h] / per;
      r.received_bytes += received_[h] / per;
      r.factor_bytes_sent += factor_sent_[h] / per;
      r.rebuild_s += applier_busy_[h] / per;
    }
    r.events = count_;
    for (const Worker& w : workers_) r.starts.push_back(w.starts);
    return r;
  }

 private:
  struct Event {
    double time;
    uint64_t seq;
    std::function<void()> run;
    bool operator>(const Event& e) const { return std::tie(time, seq) > std::tie(e.time, e.seq); }
  };
  struct Worker {
    // Per destination: servers 0..H-1, then the peers H..2H-1 (factors).
    std::vector<std::priority_queue<Queued, std::vector<Queued>, std::greater<Queued>>> queues;
    std::vector<uint64_t> inflight;               // Bytes awaiting their ack, per destination.
    std::vector<std::map<int64_t, int>> factors;  // Per SFB layer: clock -> workers' factors here.
    std::vector<int> received;                    // Partitions of the layer's next clock received.
    std::vector<int64_t> ready_clock;
    std::vector<double> starts;
    int waiting_layer = -1;  // Forward blocked on this layer's weights.
    int64_t clock = 0;
    uint64_t sequence = 0;
  };

  void At(double t, std::function<void()> f) { events_.push(Event{t, seq_++, std::move(f)}); }

  // A message of `bytes` from host `from` to host `to`, sent now; `deliver`
  // runs when it has arrived whole.
  void Send(int from, int to, uint64_t bytes, std::function<void()> deliver) {
    if (from == to) {
      At(now_ + o_.alpha_s, std::move(deliver));
      return;
    }
    if (bytes == 0) {  // An ack: its few bytes are not counted on the links.
      At(now_ + o_.latency_s + o_.alpha_s, std::move(deliver));
      return;
    }
    const double tx = bytes / o_.link_bytes_per_s;
    sent_[from] += bytes;
    received_[to] += bytes;
    const double up_start = std::max(now_, up_free_[from]);
    const double up_end = up_start + tx;
    up_free_[from] = up_end;
    up_busy_[from] += tx;
    // The first byte reaches the receiver's downlink after the latency.
    At(up_start + o_.latency_s, [this, to, tx, up_end, deliver = std::move(deliver)]() mutable {
      const double start = std::max(now_, down_free_[to]);
      const double end = std::max(start + tx, up_end + o_.latency_s);
      down_free_[to] = end;
      down_busy_[to] += tx;
      At(end + o_.alpha_s, std::move(deliver));
    });
  }

  void StartForward(int w, int layer) {
    Worker& k = workers_[w];
    const bool all_at_once = o_.schedule == Schedule::kSequential && layer == 0;
    for (int l = layer; l < (all_at_once ? L_ : layer + 1); ++l) {
      if (k.ready_clock[l] < k.clock) {
        k.waiting_layer = l;
        return;
      }
    }
    k.waiting_layer = -1;
    if (layer == 0) {
      k.starts.push_back(now_);
      if (k.clock == o_.iterations) return;  // The iteration after the last: done.
    }
    // The rebuild of the clock before, on the device (SimOptions::rebuild_on_device).
    const double rebuild = o_.rebuild_on_device && layers_[layer].sfb && k.clock >= 1 ? rebuild_s_[layer] : 0;
    At(now_ + rebuild + layers_[layer].forward_s, [this, w, layer] {
      if (layer + 1 < L_)
        StartForward(w, layer + 1);
      else
        Backward(w, L_ - 1);
    });
  }

  void Backward(int w, int layer) {
    At(now_ + layers_[layer].backward_s, [this, w, layer] {
      Worker& k = workers_[w];
      if (o_.schedule != Schedule::kSequential) Push(w, layer_parts_[layer], {layer});
      if (layer > 0) {
        Backward(w, layer - 1);
        return;
      }
      if (o_.schedule == Schedule::kSequential) {
        std::vector<int> all, layers;
        for (int l = 0; l < L_; ++l) {
          all.insert(all.end(), layer_parts_[l].begin(), layer_parts_[l].end());
          layers.push_back(l);
        }
        Push(w, all, layers);
      }
      ++k.clock;
      StartForward(w, 0);
    });
  }

  // The pushes of `partitions` and the factors of the SFB layers among
  // `layers`, of the worker's current clock.
  void Push(int w, const std::vector<int>& partitions, const std::vector<int>& layers) {
    Worker& k = workers_[w];
    std::vector<bool> touched(2 * H_, false);
    auto prio = [&](int layer) {
      const uint64_t seq = k.sequence++;
      return credit_ > 0 ? (static_cast<uint64_t>(layer) << 32 | seq) : seq;
    };
    for (int p : partitions) {
      const Partition& part = parts_[p];
      k.queues[part.server].push(Queued{prio(part.layer), p});
      touched[part.server] = true;
    }
    for (int l : layers) {
      if (!layers_[l].sfb) continue;
      OnFactors(w, l, k.clock);  // Its own.
      for (int j = 0; j < H_; ++j) {
        if (j == w) continue;
        k.queues[H_ + j].push(Queued{prio(l), -1, l, k.clock});
        touched[H_ + j] = true;
      }
    }
    for (int d = 0; d < 2 * H_; ++d)
      if (touched[d]) Dispatch(w, d);
  }

  // Destination d: server d, or (d >= H) worker d - H.
  void Dispatch(int w, int d) {
    Worker& k = workers_[w];
    auto& q = k.queues[d];
    while (!q.empty()) {
      const Queued item = q.top();
      const uint64_t bytes = item.partition >= 0 ? parts_[item.partition].bytes : factor_bytes_[item.layer];
      if (credit_ > 0 && k.inflight[d] > 0 && k.inflight[d] + bytes > credit_) return;
      q.pop();
      k.inflight[d] += bytes;
      if (item.partition >= 0) {
        const int p = item.partition;
        Send(w, d, bytes, [this, w, d, p] { OnPush(w, d, p); });
      } else {
        const int j = d - H_;
        factor_sent_[w] += bytes;
        Send(w, j, bytes, [this, w, j, d, bytes, item] {
          // The FACTORS_ACK frees the credit.
          Send(j, w, 0, [this, w, d, bytes] {
            workers_[w].inflight[d] -= bytes;
            Dispatch(w, d);
          });
          OnFactors(j, item.layer, item.clock);
        });
      }
    }
  }

  // Worker j has one more worker's factors of `layer` for `clock`; with all
  // of them, its applier rebuilds and applies (one at a time).
  void OnFactors(int j, int layer, int64_t clock) {
    auto& m = workers_[j].factors[layer];
    if (++m[clock] < H_) return;
    m.erase(clock);
    if (o_.rebuild_on_device) {  // Made before the layer's next forward (StartForward).
      applier_busy_[j] += rebuild_s_[layer];
      OnLayerPart(j, layer);
      return;
    }
    const double start = std::max(now_, applier_free_[j]);
    const double end = start + rebuild_s_[layer];
    applier_free_[j] = end;
    applier_busy_[j] += rebuild_s_[layer];
    At(end, [this, j, layer] { OnLayerPart(j, layer); });
  }

  void OnPush(int w, int s, int p) {
    // The ack (a few bytes) frees the credit.
    Send(s, w, 0, [this, w, s, p] {
      workers_[w].inflight[s] -= parts_[p].bytes;
      Dispatch(w, s);
    });
    if (++arrived_[p] < H_) return;
    arrived_[p] = 0;
    // The apply thread free first (the lowest of those free at once); a
    // partition's updates in order.
    std::vector<double>& threads = server_free_[s];
    double& thread = *std::min_element(threads.begin(), threads.end());
    const double start = std::max({now_, thread, partition_free_[p]});
    const double end = start + parts_[p].bytes * static_cast<double>(H_) * o_.apply_s_per_byte;
    thread = end;
    partition_free_[p] = end;
    At(end, [this, s, p] {
      for (int w = 0; w < H_; ++w) Send(s, w, parts_[p].bytes, [this, w, p] { OnWeights(w, p); });
    });
  }

  void OnWeights(int w, int p) { OnLayerPart(w, parts_[p].layer); }

  // One more part of layer l's weights of the next clock (a partition from
  // its server, or the rebuilt SFB weight) is in place at worker w.
  void OnLayerPart(int w, int l) {
    Worker& k = workers_[w];
    if (++k.received[l] < per_layer_[l]) return;
    k.received[l] = 0;
    ++k.ready_clock[l];
    if (k.waiting_layer == l) StartForward(w, o_.schedule == Schedule::kSequential ? 0 : l);
  }

  const std::vector<SimLayer>& layers_;
  const SimOptions o_;
  const std::vector<Partition> parts_;
  const int L_, H_;
  std::vector<int> per_layer_;
  std::vector<std::vector<int>> layer_parts_;
  std::vector<Worker> workers_;
  std::vector<int> arrived_;                      // Pushes of the partition's current clock in.
  std::vector<double> partition_free_;            // Per partition: when its last apply ends.
  std::vector<std::vector<double>> server_free_;  // Per server, per apply thread: free from.
  std::vector<double> up_free_, down_free_, up_busy_, down_busy_;
  std::vector<uint64_t> factor_bytes_;                 // Per layer: one worker's factors (SFB layers).
  std::vector<double> rebuild_s_;                      // Per layer: one rebuild and SGD step (SFB layers).
  std::vector<double> sent_, received_, factor_sent_;  // Per host, whole run.
  std::vector<double> applier_free_, applier_busy_;    // Per worker.
  uint64_t credit_ = 0;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  double now_ = 0;
  uint64_t seq_ = 0, count_ = 0;
};

}  // namespace

StatusOr<SimResult> Simulate(const std::vector<SimLayer>& layers, const SimOptions& o) {
  if (layers.empty()) return InvalidArgumentError("simulate: the model has no layers");
  if (o.hosts < 1) return InvalidArgumentError("simulate: hosts must be >= 1, got " + std::to_string(o.hosts));
  if (!(o.link_bytes_per_s > 0)) return InvalidArgumentError("simulate: the link rate must be > 0");
  if (o.iterations < 2) return InvalidArgumentError("simulate: iterations must be >= 2");
  if (o.latency_s < 0 || o.alpha_s < 0 || o.apply_s_per_byte < 0)
    return InvalidArgumentError("simulate: latency, alpha and apply cost must be >= 0");
  if (o.apply_threads < 1)
    return InvalidArgumentError("simulate: apply_threads must be >= 1, got " + std::to_string(o.apply_threads));
  std::vector<uint64_t> elements;
  std::vector<int> layer_of;
  for (size_t l = 0; l < layers.size(); ++l)
    for (uint64_t n : layers[l].tensor_elements) {
      elements.push_back(n);
      layer_of.push_back(static_cast<int>(l));
    }
  if (o.sfb_flops_per_s < 0) return InvalidArgumentError("simulate: the rebuild rate must be >= 0");
  // Every tensor is placed (the servers hold the SFB ones too, as a job
  // does), but an SFB layer's weight never travels to its server.
  std::vector<bool> by_factors;
  for (size_t l = 0; l < layers.size(); ++l) {
    const SimLayer& x = layers[l];
    if (x.sfb) {
      if (x.tensor_elements.empty() || x.sfb_rows < 1 || x.sfb_cols < 1 || x.sfb_factor_rows < 1 ||
          x.tensor_elements[0] != static_cast<uint64_t>(x.sfb_rows * x.sfb_cols))
        return InvalidArgumentError("simulate: layer " + std::to_string(l) +
                                    " is SFB but its first tensor is not its sfb_rows x sfb_cols weight, or a "
                                    "dimension is < 1");
    }
    for (size_t t = 0; t < x.tensor_elements.size(); ++t) by_factors.push_back(x.sfb && t == 0);
  }
  ASSIGN_OR_RETURN(ShardMap map, ShardMap::Build(elements, o.partition_bytes, o.hosts));
  std::vector<Partition> parts;
  for (int t = 0; t < map.num_tensors(); ++t) {
    if (by_factors[t]) continue;
    for (const PartitionPlacement& c : map.partitions(t))
      parts.push_back(Partition{layer_of[t], c.server, c.length * 4});
  }
  Sim sim(layers, o, std::move(parts));
  return sim.Run();
}

double ScalingEfficiency(const SimResult& r) { return r.iteration_s > 0 ? r.compute_s / r.iteration_s : 0; }

HybCommRates HybCommRatesOf(const SimOptions& o) {
  constexpr double kFree = std::numeric_limits<double>::infinity();
  auto rate = [&](double seconds_per_unit) { return seconds_per_unit > 0 ? 1 / seconds_per_unit : kFree; };
  HybCommRates r;
  r.link_bytes_per_s = o.link_bytes_per_s > 0 ? o.link_bytes_per_s : kFree;
  r.rebuild_flops_per_s = o.sfb_flops_per_s > 0 ? o.sfb_flops_per_s : kFree;
  r.update_bytes_per_s = rate(o.sfb_apply_s_per_byte < 0 ? o.apply_s_per_byte : o.sfb_apply_s_per_byte);
  // A partition's apply takes bytes x workers x apply_s_per_byte on one of
  // apply_threads.
  r.apply_bytes_per_s = std::max(1, o.apply_threads) * rate(std::max(1, o.hosts) * o.apply_s_per_byte);
  r.rebuild_on = "the simulated worker";
  r.origin = "the simulator's";
  return r;
}

StatusOr<std::vector<SimLayer>> SimLayersOf(const ModelSpec& model, const std::vector<double>& forward_s,
                                            const std::vector<double>& backward_s, int hosts, SfbMode sfb, int batch,
                                            const HybCommRates& rates, std::vector<HybCommChoice>* choices,
                                            RebuildCharge charge) {
  const size_t L = model.layers.size();
  if (forward_s.size() != L || backward_s.size() != L)
    return InvalidArgumentError("simulate: " + std::to_string(L) + " layers but " + std::to_string(forward_s.size()) +
                                " forward and " + std::to_string(backward_s.size()) + " backward times");
  std::vector<SimLayer> layers(L);
  std::vector<FcLayerShape> fc;
  std::vector<size_t> fc_layer;
  for (size_t l = 0; l < L; ++l) {
    const ModelLayer& m = model.layers[l];
    layers[l].forward_s = forward_s[l];
    layers[l].backward_s = backward_s[l];
    for (const auto& shape : m.params) {
      uint64_t n = 1;
      for (int64_t d : shape) n *= static_cast<uint64_t>(d);
      layers[l].tensor_elements.push_back(n);
    }
    if (m.fully_connected && !m.params.empty() && m.params[0].size() == 2) {
      FcLayerShape shape{m.name, m.params[0][0], m.params[0][1], FactorRows(m, batch)};
      // The rebuild runs beside the backward of the layers below this one.
      for (size_t below = 0; below < l; ++below) shape.overlap_s += backward_s[below];
      fc.push_back(shape);
      fc_layer.push_back(l);
    }
  }
  // Each layer priced on its own (DecideHybComm's choices are per layer):
  // HybComm counts 2 K' P M N FLOPs over the K' factor rows sent, so the
  // rebuild charged at K_r rows is told to it as a rate K' / K_r times the
  // rebuild's.
  std::vector<HybCommChoice> chosen;
  for (const FcLayerShape& shape : fc) {
    const int64_t charged = charge == RebuildCharge::kFullSize ? batch : shape.batch;
    HybCommRates r = rates;
    r.rebuild_flops_per_s *= static_cast<double>(shape.batch) / static_cast<double>(std::max<int64_t>(1, charged));
    ASSIGN_OR_RETURN(std::vector<HybCommChoice> one, DecideHybComm(sfb, hosts, hosts, pb::BSP, r, {shape}));
    chosen.push_back(std::move(one[0]));
  }
  for (size_t i = 0; i < chosen.size(); ++i) {
    SimLayer& x = layers[fc_layer[i]];
    x.sfb = chosen[i].sfb;
    x.sfb_rows = chosen[i].layer.rows;
    x.sfb_cols = chosen[i].layer.cols;
    x.sfb_factor_rows = chosen[i].layer.batch;
    x.sfb_rebuild_rows = charge == RebuildCharge::kFullSize ? batch : x.sfb_factor_rows;
  }
  if (choices != nullptr) *choices = std::move(chosen);
  return layers;
}

}  // namespace bench
}  // namespace nereus
