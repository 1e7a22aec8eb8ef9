#include "common/update/hybcomm.h"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <limits>
#include <sstream>
#include <utility>

#include "common/base/enum_names.h"

namespace nereus {

StatusOr<SfbMode> ParseSfbMode(const std::string& name) {
  if (name == "auto") return SfbMode::kAuto;
  if (name == "off") return SfbMode::kOff;
  if (name == "on") return SfbMode::kOn;
  return InvalidArgumentError("--sfb must be auto, off or on, got \"" + name + "\"");
}

const char* SfbModeName(SfbMode mode) {
  static constexpr const char* kNames[] = {"auto", "off", "on"};
  static_assert(std::size(kNames) == static_cast<size_t>(SfbMode::kOn) + 1, "an SfbMode without a name");
  return NameOf(mode, kNames);
}

namespace {

// Rates auto needs, named for errors; empty if all are > 0 (+inf allowed).
std::string BadRate(const HybCommRates& r) {
  const std::pair<const char*, double> rates[] = {{"link rate (bytes/s)", r.link_bytes_per_s},
                                                  {"rebuild GEMM rate (FLOP/s)", r.rebuild_flops_per_s},
                                                  {"rebuild SGD step rate (bytes/s)", r.update_bytes_per_s},
                                                  {"server apply rate (bytes/s)", r.apply_bytes_per_s}};
  for (const auto& [what, v] : rates) {
    if (v > 0) continue;  // NaN fails this too.
    std::ostringstream os;
    os << "the " << what << " is " << (v == 0 ? "unknown (0)" : std::to_string(v) + ", which is not > 0");
    return os.str();
  }
  return "";
}

std::string Reason(const HybCommChoice& c) {
  if (c.sfb_s == c.ps_s) return "auto: same cost, SFB (a tie goes to SFB)";
  if (c.sfb)
    return c.sfb_bytes > c.ps_bytes ? "auto: SFB costs less, though it moves more bytes" : "auto: SFB costs less";
  return c.sfb_bytes < c.ps_bytes ? "auto: PS costs less, though SFB moves fewer bytes" : "auto: PS costs less";
}

}  // namespace

StatusOr<std::vector<HybCommChoice>> DecideHybComm(SfbMode mode, int workers, int servers, pb::Consistency consistency,
                                                   const HybCommRates& rates, const std::vector<FcLayerShape>& layers) {
  if (workers < 1 || servers < 1)
    return InvalidArgumentError("HybComm needs at least one worker and one server, got " + std::to_string(workers) +
                                " worker(s) and " + std::to_string(servers) + " server(s)");
  const bool bsp = consistency == pb::BSP || consistency == pb::CONSISTENCY_UNSPECIFIED;
  if (mode == SfbMode::kOn && !bsp)
    return InvalidArgumentError(
        "--sfb=on needs --consistency=bsp: sufficient factors are applied once per clock with every worker's "
        "factors of that clock, which " +
        pb::Consistency_Name(consistency) + " does not wait for (use --sfb=auto or off)");
  const std::string bad_rate = BadRate(rates);
  if (mode == SfbMode::kAuto && bsp && !layers.empty() && !bad_rate.empty())
    return InvalidArgumentError("HybComm (--sfb=auto) cannot price the layers: " + bad_rate);
  const double p1 = workers, p2 = servers;
  std::vector<HybCommChoice> out;
  for (const FcLayerShape& l : layers) {
    if (l.rows < 1 || l.cols < 1 || l.batch < 1)
      return InvalidArgumentError("layer \"" + l.name + "\": HybComm needs a positive shape and batch, got " +
                                  std::to_string(l.rows) + " x " + std::to_string(l.cols) + " with batch " +
                                  std::to_string(l.batch));
    const double m = static_cast<double>(l.rows), n = static_cast<double>(l.cols), k = static_cast<double>(l.batch);
    HybCommChoice c;
    c.layer = l;
    c.ps_bytes = 4.0 * 2.0 * m * n * (p1 + p2 - 2) / p2;
    c.sfb_bytes = 4.0 * 2.0 * k * (p1 - 1) * (m + n);
    c.rebuild_flops = 2.0 * (p1 * k) * m * n;
    if (bad_rate.empty()) {
      c.priced = true;
      c.ps_link_s = c.ps_bytes / 2 / rates.link_bytes_per_s;
      c.ps_apply_s = 4.0 * m * n / p2 / rates.apply_bytes_per_s;
      c.ps_s = c.ps_link_s + c.ps_apply_s;
      c.sfb_link_s = c.sfb_bytes / 2 / rates.link_bytes_per_s;
      c.sfb_rebuild_s = c.rebuild_flops / rates.rebuild_flops_per_s + 4.0 * m * n / rates.update_bytes_per_s;
      c.sfb_hidden_s = std::min(c.sfb_rebuild_s, std::max(0.0, l.overlap_s));
      c.sfb_s = c.sfb_link_s + (c.sfb_rebuild_s - c.sfb_hidden_s);
    }
    switch (mode) {
      case SfbMode::kOff:
        c.sfb = false;
        c.reason = "--sfb=off";
        break;
      case SfbMode::kOn:
        c.sfb = true;
        c.reason = "--sfb=on";
        break;
      case SfbMode::kAuto:
        if (!bsp) {
          c.sfb = false;
          c.reason = "auto falls back to PS under " + pb::Consistency_Name(consistency) + " (SFB needs BSP)";
        } else {
          c.sfb = c.sfb_s <= c.ps_s;
          c.reason = Reason(c);
        }
        break;
    }
    out.push_back(std::move(c));
  }
  return out;
}

namespace {

std::string Rate(double v, double unit, const char* name) {
  if (!(v > 0)) return std::string("? ") + name;
  if (v == std::numeric_limits<double>::infinity()) return std::string("free (inf ") + name + ")";
  char b[64];
  std::snprintf(b, sizeof(b), "%.3g %s", v / unit, name);
  return b;
}

std::string Ms(const HybCommChoice& c, double s) {
  if (!c.priced) return "-";
  char b[32];
  std::snprintf(b, sizeof(b), "%.3f", s * 1e3);
  return b;
}

}  // namespace

std::string FormatHybCommTable(SfbMode mode, int workers, int servers, const HybCommRates& rates,
                               const std::vector<HybCommChoice>& choices) {
  std::string out = "HybComm (--sfb=" + std::string(SfbModeName(mode)) + ", " + std::to_string(workers) +
                    " worker(s), " + std::to_string(servers) + " server(s)); per clock per node; link " +
                    Rate(rates.link_bytes_per_s, 1e9, "GB/s") + " each way; rebuild on " + rates.rebuild_on +
                    ": GEMM " + Rate(rates.rebuild_flops_per_s, 1e9, "GFLOP/s") + ", SGD step " +
                    Rate(rates.update_bytes_per_s, 1e9, "GB/s") + "; server apply " +
                    Rate(rates.apply_bytes_per_s, 1e9, "GB/s") +
                    (rates.origin.empty() ? "" : " (" + rates.origin + ")") + "; costs in ms:\n";
  char line[512];
  std::snprintf(line, sizeof(line), "  %-24s %-14s %6s %14s %14s %10s %10s %10s %10s %10s %10s %10s %-4s %s\n", "layer",
                "shape", "batch", "PS bytes", "SFB bytes", "PS link", "PS apply", "PS", "SFB link", "SFB rebld",
                "hidden", "SFB", "path", "why");
  out += line;
  for (const HybCommChoice& c : choices) {
    const std::string shape = std::to_string(c.layer.rows) + "x" + std::to_string(c.layer.cols);
    std::snprintf(line, sizeof(line), "  %-24s %-14s %6lld %14.0f %14.0f %10s %10s %10s %10s %10s %10s %10s %-4s %s\n",
                  c.layer.name.c_str(), shape.c_str(), static_cast<long long>(c.layer.batch), c.ps_bytes, c.sfb_bytes,
                  Ms(c, c.ps_link_s).c_str(), Ms(c, c.ps_apply_s).c_str(), Ms(c, c.ps_s).c_str(),
                  Ms(c, c.sfb_link_s).c_str(), Ms(c, c.sfb_rebuild_s).c_str(), Ms(c, c.sfb_hidden_s).c_str(),
                  Ms(c, c.sfb_s).c_str(), c.sfb ? "SFB" : "PS", c.reason.c_str());
    out += line;
  }
  return out;
}

}  // namespace nereus
