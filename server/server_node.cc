#include "server/server_node.h"

namespace nereus {

ServerNode::ServerNode(NodeOptions options) : node_(std::move(options)) {}

ServerNode::~ServerNode() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    failed_ = true;  // Releases a receive thread waiting for server_.
  }
  ready_.notify_all();
}

Status ServerNode::Run() {
  Status st = node_.Start(
      [this](const Endpoint& from, StatusOr<Message> msg, const pb::Header& partial) {
        OnData(from, std::move(msg), partial);
      },
      [](const Status&) {});
  if (!st.ok()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      failed_ = true;
    }
    ready_.notify_all();
    return st;
  }
  {
    ParamServerOptions o;
    o.rank = node_.rank();
    o.num_workers = node_.job().num_workers();
    o.consistency = node_.job().consistency();
    o.staleness = node_.job().staleness();
    std::lock_guard<std::mutex> lock(mu_);
    server_ = std::make_unique<ParamServer>(o, this);
  }
  ready_.notify_all();
  st = node_.Finish();
  if (st.ok()) LOG(INFO) << node_.name() << " shut down cleanly";
  return st;
}

void ServerNode::Reply(const Endpoint& to, Message msg) {
  // Weights travel over the worker's parallel streams (spread by chunk);
  // everything else on the first.
  const int stream = msg.header.op() == pb::PULL_REPLY ? msg.header.priority() : 0;
  Status st = node_.Send(to, std::move(msg), stream);
  if (!st.ok()) LOG(WARNING) << node_.name() << ": reply to " << to << " failed: " << st.message();
}

void ServerNode::OnData(const Endpoint& from, StatusOr<Message> msg, const pb::Header& partial) {
  // Data can arrive between the start barrier and server_ being built.
  std::unique_lock<std::mutex> lock(mu_);
  ready_.wait(lock, [this] { return server_ != nullptr || failed_; });
  if (server_ == nullptr) return;
  lock.unlock();
  pb::Role role;
  int rank = -1;
  if (!node_.Lookup(from, &role, &rank) || role != pb::WORKER) rank = -1;
  server_->Handle(from, rank, std::move(msg), partial);
}

}  // namespace nereus
