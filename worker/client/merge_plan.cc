#include "worker/client/merge_plan.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

namespace nereus {

StatusOr<LinkModel> FitLinkModel(const std::vector<std::pair<double, double>>& samples) {
  const double n = static_cast<double>(samples.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [x, y] : samples) {
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  const double den = n * sxx - sx * sx;
  if (samples.size() < 2 || std::fabs(den) < 1e-12 * std::max(1.0, sxx * n))
    return InvalidArgumentError("need samples of at least two different sizes to fit alpha and beta");
  LinkModel m;
  m.beta = (n * sxy - sx * sy) / den;
  m.alpha = (sy - m.beta * sx) / n;
  return m;
}

LinkFit FitLinkRobust(const std::vector<PingSample>& pings, const LinkModel& fallback) {
  LinkFit fit;
  std::map<std::pair<int, double>, double> minimum;  // (target, bytes) -> seconds.
  for (const PingSample& p : pings) {
    if (!std::isfinite(p.seconds) || p.seconds <= 0) continue;
    auto [it, inserted] = minimum.emplace(std::make_pair(p.target, p.bytes), p.seconds);
    if (!inserted) it->second = std::min(it->second, p.seconds);
  }
  std::vector<std::pair<double, double>> points;
  for (const auto& [key, seconds] : minimum) points.emplace_back(key.second, seconds);
  if (!points.empty()) {
    fit.min_round_trip = points[0].second;
    for (const auto& pt : points) fit.min_round_trip = std::min(fit.min_round_trip, pt.second);
  }
  std::ostringstream measured;
  measured << pings.size() << " pings, " << points.size() << " (target, size) minima, smallest round trip "
           << fit.min_round_trip * 1e6 << " us";
  auto line = FitLinkModel(points);
  if (line.ok()) {
    fit.fitted_alpha = line->alpha;
    fit.fitted_beta = line->beta;
    measured << ", least squares alpha " << line->alpha * 1e6 << " us, beta " << line->beta * 1e9 << " ns/byte";
  }
  if (!line.ok() || !std::isfinite(line->alpha) || !std::isfinite(line->beta) || line->beta <= 0) {
    fit.model = fallback;
    fit.fell_back = true;
    std::ostringstream note;
    note << "implausible link calibration ("
         << (!line.ok() ? std::string(line.status().message()) : std::string("beta not positive")) << "; "
         << measured.str() << "): using the default alpha " << fallback.alpha * 1e6 << " us, beta "
         << fallback.beta * 1e9 << " ns/byte";
    fit.note = note.str();
    return fit;
  }
  fit.model = *line;
  // A negative start-up cost is noise around a tiny one.
  fit.model.alpha = std::max(0.0, fit.model.alpha);
  if (fit.model.alpha > fit.min_round_trip) {
    fit.model.alpha = fit.min_round_trip;
    fit.alpha_bounded = true;
    fit.note = "link calibration: alpha bounded by the smallest round trip (" + measured.str() + ")";
  }
  return fit;
}

namespace {

// tau_c for the current merged sizes (t_c[l] == 0 for a layer merged away).
void ComputeTauC(const std::vector<double>& tau_b, const std::vector<double>& t_b, const std::vector<double>& t_c,
                 std::vector<double>* tau_c) {
  const int L = static_cast<int>(t_b.size());
  tau_c->assign(L, 0);
  (*tau_c)[L - 1] = tau_b[L - 1] + t_b[L - 1];
  for (int l = L - 2; l >= 0; --l) (*tau_c)[l] = std::max((*tau_c)[l + 1] + t_c[l + 1], tau_b[l] + t_b[l]);
}

}  // namespace

std::vector<MergeGroup> PlanMerges(const LinkModel& link, const std::vector<double>& bytes,
                                   const std::vector<double>& backward_s) {
  const int L = static_cast<int>(bytes.size());
  CHECK_EQ(backward_s.size(), bytes.size());
  std::vector<MergeGroup> groups;
  if (L == 0) return groups;
  std::vector<double> p = bytes, t_b = backward_s, tau_b(L, 0), t_c(L), tau_c;
  for (int l = L - 2; l >= 0; --l) tau_b[l] = tau_b[l + 1] + t_b[l + 1];
  for (int l = 0; l < L; ++l) t_c[l] = link.alpha + link.beta * p[l];
  ComputeTauC(tau_b, t_b, t_c, &tau_c);
  std::vector<bool> merged_into_prev(L, false);  // Layer l travels with layer l-1.
  for (int l = L - 1; l >= 1; --l) {
    const double r = tau_b[l - 1] + t_b[l - 1];
    if (r < tau_c[l] + t_c[l] && (tau_c[l] > r || r - tau_c[l] < link.alpha)) {
      p[l - 1] += p[l];
      p[l] = 0;
      t_c[l] = 0;
      t_c[l - 1] = link.alpha + link.beta * p[l - 1];
      merged_into_prev[l] = true;
      ComputeTauC(tau_b, t_b, t_c, &tau_c);
    }
  }
  int first = 0;
  for (int l = 1; l <= L; ++l) {
    if (l == L || !merged_into_prev[l]) {
      groups.push_back(MergeGroup{first, l - 1});
      first = l;
    }
  }
  return groups;
}

double ModelledFinish(const LinkModel& link, const std::vector<double>& bytes, const std::vector<double>& backward_s,
                      const std::vector<MergeGroup>& plan) {
  const int L = static_cast<int>(bytes.size());
  std::vector<double> tau_b(L, 0), t_c(L, 0), tau_c;
  for (int l = L - 2; l >= 0; --l) tau_b[l] = tau_b[l + 1] + backward_s[l + 1];
  for (const MergeGroup& g : plan) {
    double p = 0;
    for (int l = g.first; l <= g.last; ++l) p += bytes[l];
    t_c[g.first] = link.alpha + link.beta * p;  // The group leaves with its first (last-ready) layer.
  }
  ComputeTauC(tau_b, backward_s, t_c, &tau_c);
  return tau_c[0] + t_c[0];
}

std::vector<MergeGroup> OnePerLayer(int layers) {
  std::vector<MergeGroup> groups;
  for (int l = 0; l < layers; ++l) groups.push_back(MergeGroup{l, l});
  return groups;
}

MergeChoice ChooseMerges(const LinkModel& link, const std::vector<double>& bytes,
                         const std::vector<double>& backward_s) {
  MergeChoice c;
  const int L = static_cast<int>(bytes.size());
  std::vector<MergeGroup> plan = PlanMerges(link, bytes, backward_s);
  c.merged_end = ModelledFinish(link, bytes, backward_s, plan);
  c.unmerged_end = ModelledFinish(link, bytes, backward_s, OnePerLayer(L));
  c.merged = static_cast<int>(plan.size()) < L && c.merged_end <= c.unmerged_end * (1 - kMinMergeGain);
  c.groups = c.merged ? std::move(plan) : OnePerLayer(L);
  return c;
}

}  // namespace nereus
