#include "common/hybcomm.h"

#include <cstdio>
#include <iterator>

#include "common/enum_names.h"

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

StatusOr<std::vector<HybCommChoice>> DecideHybComm(SfbMode mode, int workers, int servers, pb::Consistency consistency,
                                                   const std::vector<FcLayerShape>& layers) {
  if (workers < 1 || servers < 1)
    return InvalidArgumentError("HybComm needs at least one worker and one server, got " + std::to_string(workers) +
                                " worker(s) and " + std::to_string(servers) + " server(s)");
  const bool bsp = consistency == pb::BSP || consistency == pb::CONSISTENCY_UNSPECIFIED;
  if (mode == SfbMode::kOn && !bsp)
    return InvalidArgumentError(
        "--sfb=on needs --consistency=bsp: sufficient factors are applied once per clock with every worker's "
        "factors of that clock, which " +
        pb::Consistency_Name(consistency) + " does not wait for (use --sfb=auto or off)");
  const unsigned __int128 p1 = static_cast<unsigned>(workers), p2 = static_cast<unsigned>(servers);
  std::vector<HybCommChoice> out;
  for (const FcLayerShape& l : layers) {
    if (l.rows < 1 || l.cols < 1 || l.batch < 1)
      return InvalidArgumentError("layer \"" + l.name + "\": HybComm needs a positive shape and batch, got " +
                                  std::to_string(l.rows) + " x " + std::to_string(l.cols) + " with batch " +
                                  std::to_string(l.batch));
    const unsigned __int128 m = static_cast<uint64_t>(l.rows), n = static_cast<uint64_t>(l.cols),
                            k = static_cast<uint64_t>(l.batch);
    HybCommChoice c;
    c.layer = l;
    c.ps_bytes = 4.0 * 2.0 * static_cast<double>(m * n) * static_cast<double>(p1 + p2 - 2) / static_cast<double>(p2);
    c.sfb_bytes = 4.0 * 2.0 * static_cast<double>(k * (p1 - 1) * (m + n));
    // 2K(P1-1)(M+N) <= 2MN(P1+P2-2)/P2  <=>  K(P1-1)(M+N) P2 <= MN(P1+P2-2).
    const bool cheaper = k * (p1 - 1) * (m + n) * p2 <= m * n * (p1 + p2 - 2);
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
          c.sfb = cheaper;
          c.reason = cheaper ? "auto: SFB bytes <= PS bytes" : "auto: SFB bytes > PS bytes";
        }
        break;
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::string FormatHybCommTable(SfbMode mode, int workers, int servers, const std::vector<HybCommChoice>& choices) {
  std::string out = "HybComm (--sfb=" + std::string(SfbModeName(mode)) + ", " + std::to_string(workers) +
                    " worker(s), " + std::to_string(servers) + " server(s)); bytes per clock per node:\n";
  char line[512];
  std::snprintf(line, sizeof(line), "  %-24s %-14s %6s %14s %14s %-4s %s\n", "layer", "shape", "batch", "PS bytes",
                "SFB bytes", "path", "why");
  out += line;
  for (const HybCommChoice& c : choices) {
    const std::string shape = std::to_string(c.layer.rows) + "x" + std::to_string(c.layer.cols);
    std::snprintf(line, sizeof(line), "  %-24s %-14s %6lld %14.0f %14.0f %-4s %s\n", c.layer.name.c_str(),
                  shape.c_str(), static_cast<long long>(c.layer.batch), c.ps_bytes, c.sfb_bytes, c.sfb ? "SFB" : "PS",
                  c.reason.c_str());
    out += line;
  }
  return out;
}

}  // namespace nereus
