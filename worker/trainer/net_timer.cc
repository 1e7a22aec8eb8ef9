#include "worker/trainer/net_timer.h"

#include <cstdio>
#include <sstream>
#include <utility>

#include "common/base/clock.h"
#include "worker/trainer/gpu/device.h"
#ifdef NEREUS_HAVE_CUDA
#include "worker/trainer/gpu/event_clock.h"
#endif

namespace nereus {
namespace {

class HostLayerClock : public LayerClock {
 public:
  explicit HostLayerClock(int slots) : start_(slots), ms_(slots, 0.0) {}
  void Start(int slot) override { start_[slot] = SteadyClock::now(); }
  void Stop(int slot) override { ms_[slot] += 1e3 * SecondsSince(start_[slot]); }
  StatusOr<std::vector<double>> Read() override {
    std::vector<double> out(ms_.size(), 0.0);
    out.swap(ms_);
    return out;
  }

 private:
  std::vector<SteadyClock::time_point> start_;
  std::vector<double> ms_;
};

std::string Ms(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4f", ms);
  return buf;
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::unique_ptr<LayerClock> NewHostLayerClock(int slots) { return std::make_unique<HostLayerClock>(slots); }

StatusOr<NetTiming> TimeNet(Net* net, int iterations, std::unique_ptr<LayerClock> clock) {
  if (iterations <= 0)
    return InvalidArgumentError("--iterations must be > 0 to time a net, got " + std::to_string(iterations));
  const int layers = net->num_layers();
  if (clock == nullptr) {
#ifdef NEREUS_HAVE_CUDA
    if (net->device() != nullptr && !net->device()->is_stand_in()) {
      ASSIGN_OR_RETURN(clock, gpu::NewEventClock(net->device(), 2 * layers));
    }
#endif
    if (clock == nullptr) clock = NewHostLayerClock(2 * layers);
  }
  // Slot l: layer l's forward; slot layers + l: its backward. The hooks run
  // around every layer's call, so nothing else is timed.
  bool timing = false;
  LayerClock* c = clock.get();
  net->add_before_forward([&, c](int l) {
    if (timing) c->Start(l);
    return Status::OK();
  });
  net->add_after_forward([&, c](int l) {
    if (timing) c->Stop(l);
    return Status::OK();
  });
  net->add_before_backward([&, c, layers](int l) {
    if (timing) c->Start(layers + l);
    return Status::OK();
  });
  net->add_after_backward([&, c, layers](int l) {
    if (timing) c->Stop(layers + l);
    return Status::OK();
  });
  gpu::ScopedDevice scope(net->device());
  // One pass not timed: data layers fill their prefetch, a GPU's
  // convolutions time and pick their algorithms, memory is allocated.
  RETURN_IF_ERROR(net->ForwardBackward().status().Annotate("timing net " + net->name() + ": the first pass"));
  if (net->device() != nullptr) RETURN_IF_ERROR(net->device()->Synchronize());
  std::vector<double> sums(2 * layers, 0.0);
  double wall_ms = 0;
  for (int i = 0; i < iterations; ++i) {
    timing = true;
    const auto begin = SteadyClock::now();
    Status st = net->ForwardBackward().status();
    if (st.ok() && net->device() != nullptr) st = net->device()->Synchronize();
    wall_ms += 1e3 * SecondsSince(begin);
    timing = false;
    RETURN_IF_ERROR(st.Annotate("timing net " + net->name() + ", pass " + std::to_string(i + 1)));
    ASSIGN_OR_RETURN(std::vector<double> pass, c->Read());
    for (int s = 0; s < 2 * layers; ++s) sums[s] += pass[s];
  }
  NetTiming t;
  t.net = net->name();
  t.device = net->device() != nullptr ? net->device()->description() : "CPU";
  t.iterations = iterations;
  t.wall_ms = wall_ms / iterations;
  for (int l = 0; l < layers; ++l) {
    LayerTiming lt;
    lt.name = net->UniqueLayerName(l);
    lt.type = net->layers()[l]->type();
    lt.forward_ms = sums[l] / iterations;
    lt.backward_ms = sums[layers + l] / iterations;
    t.forward_ms += lt.forward_ms;
    t.backward_ms += lt.backward_ms;
    t.layers.push_back(std::move(lt));
  }
  if (net->device() != nullptr) t.peak_device_bytes = net->device()->memory()->peak_bytes();
  return t;
}

std::string FormatNetTiming(const NetTiming& t) {
  std::ostringstream os;
  os << "Timing net " << t.net << " on " << t.device << ": average over " << t.iterations << " pass(es)\n";
  size_t width = 5;
  for (const auto& l : t.layers) width = std::max(width, l.name.size());
  for (const auto& l : t.layers) {
    os << l.name << std::string(width + 2 - l.name.size(), ' ') << "forward: " << Ms(l.forward_ms) << " ms.\n";
    os << l.name << std::string(width + 2 - l.name.size(), ' ') << "backward: " << Ms(l.backward_ms) << " ms.\n";
  }
  os << "Average Forward pass: " << Ms(t.forward_ms) << " ms.\n";
  os << "Average Backward pass: " << Ms(t.backward_ms) << " ms.\n";
  os << "Average Forward-Backward: " << Ms(t.forward_ms + t.backward_ms) << " ms (the layers' sum; " << Ms(t.wall_ms)
     << " ms per pass on the host's clock).\n";
  if (t.peak_device_bytes > 0) os << "Peak device memory: " << gpu::FormatBytes(t.peak_device_bytes) << ".\n";
  return os.str();
}

std::string NetTimingJson(const NetTiming& t) {
  std::ostringstream os;
  os << "{\"net\": " << JsonString(t.net) << ", \"device\": " << JsonString(t.device)
     << ", \"iterations\": " << t.iterations << ", \"forward_ms\": " << Ms(t.forward_ms)
     << ", \"backward_ms\": " << Ms(t.backward_ms) << ", \"wall_ms\": " << Ms(t.wall_ms)
     << ", \"peak_device_bytes\": " << t.peak_device_bytes << ", \"layers\": [";
  for (size_t i = 0; i < t.layers.size(); ++i) {
    const auto& l = t.layers[i];
    os << (i ? ", " : "") << "{\"name\": " << JsonString(l.name) << ", \"type\": " << JsonString(l.type)
       << ", \"forward_ms\": " << Ms(l.forward_ms) << ", \"backward_ms\": " << Ms(l.backward_ms) << "}";
  }
  os << "]}";
  return os.str();
}

}  // namespace nereus
