#include "worker/client/merge_profiler.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "worker/client/timeline.h"

namespace nereus {

StatusOr<LinkFit> CalibrateLink(Node* node, RequestTable* requests) {
  auto scratch = std::make_shared<std::vector<float>>((2 << 20) / sizeof(float), 0.0f);
  std::vector<PingSample> pings;
  const int num_servers = node->job().num_servers();
  for (int i = 0; i < num_servers; ++i) {
    // Workers start together after the init barrier: each begins with a
    // different server, so that no server's link is timed by all at once.
    const int s = (i + std::max(0, node->rank())) % num_servers;
    for (uint64_t bytes = 32 << 10; bytes <= (2u << 20); bytes *= 2) {
      // Small pings are cheap even on a slow link: more of them.
      const int reps = bytes <= (256u << 10) ? 7 : 3;
      for (int rep = 0; rep < reps; ++rep) {
        const uint64_t id = requests->NextId();
        auto state = std::make_shared<Handle::State>(1);
        Request r;
        r.kind = Request::Kind::kPong;
        r.state = state;
        r.server = s;
        r.what = "PING of server " + std::to_string(s);
        requests->Add(id, std::move(r));
        Message m;
        m.header.set_op(pb::PING);
        m.header.set_request_id(id);
        m.payload.push_back(Buffer::Of(scratch).Slice(0, bytes));
        const int64_t t0 = MonotonicMicros();
        RETURN_IF_ERROR(node->Send(node->server(s), std::move(m)));
        RETURN_IF_ERROR(MakeHandle(state).Wait());
        pings.push_back(PingSample{s, static_cast<double>(bytes), (MonotonicMicros() - t0) * 1e-6});
      }
    }
  }
  return FitLinkRobust(pings);
}

void MergeProfiler::Reset(int num_layers) {
  num_layers_ = num_layers;
  groups_ = OnePerLayer(num_layers);
  group_of_.clear();
  for (int l = 0; l < num_layers; ++l) group_of_.push_back(l);
}

MergeProfiler::ClockProfile& MergeProfiler::Profile(int64_t clock) {
  ClockProfile& p = profiles_[clock];
  if (p.ready_us.empty()) p.ready_us.assign(num_layers_, 0);
  return p;
}

void MergeProfiler::RecordReady(int64_t clock, int layer, int64_t us) { Profile(clock).ready_us[layer] = us; }

void MergeProfiler::RecordWaitEnd(int64_t clock, int64_t us) {
  ClockProfile& p = Profile(clock);
  p.last_wait_us = std::max(p.last_wait_us, us);
}

bool MergeProfiler::WantsPlan(int64_t clock) const {
  return !planned_ && enabled_ && clock > std::max(1, profile_iterations_);
}

void MergeProfiler::Plan(const std::vector<uint64_t>& layer_bytes, int rank) {
  const int64_t K = std::max(1, profile_iterations_);
  planned_ = true;
  const int L = num_layers_;
  std::vector<double> bytes(L), tb(L, 0.0);
  for (int l = 0; l < L; ++l) bytes[l] = static_cast<double>(layer_bytes[l]);
  for (int l = 0; l < L; ++l) {
    std::vector<double> v;
    for (int64_t c = 1; c <= K; ++c) {
      auto it = profiles_.find(c);
      if (it == profiles_.end()) continue;
      const auto& p = it->second;
      const int64_t end = p.ready_us[l];
      const int64_t begin = l + 1 < L ? p.ready_us[l + 1] : p.last_wait_us;
      if (end > 0 && begin > 0 && end >= begin) v.push_back((end - begin) * 1e-6);
    }
    if (!v.empty()) {
      std::sort(v.begin(), v.end());
      tb[l] = v[v.size() / 2];
    }
  }
  const MergeChoice choice = ChooseMerges(link_, bytes, tb);
  groups_ = choice.groups;
  group_of_.assign(L, 0);
  for (size_t g = 0; g < groups_.size(); ++g)
    for (int l = groups_[g].first; l <= groups_[g].last; ++l) group_of_[l] = static_cast<int>(g);
  LOG(INFO) << "worker " << rank << ": merging " << L << " layers into " << groups_.size()
            << " groups (MG-WFBP's plan: modelled communication end " << choice.merged_end * 1e3
            << " ms after backward start, unmerged " << choice.unmerged_end * 1e3 << " ms"
            << (choice.merged ? ")" : "; a gain under 1% is not worth a group's costs, so no merging)");
  profiles_.clear();
}

}  // namespace nereus
