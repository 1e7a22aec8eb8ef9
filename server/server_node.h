// ServerNode: a parameter-server process's body — a Node joined to the job,
// feeding a ParamServer and sending its replies. Used by nereus_server and by
// in-process jobs (benchmarks).
#ifndef NEREUS_SERVER_SERVER_NODE_H_
#define NEREUS_SERVER_SERVER_NODE_H_

#include <condition_variable>
#include <memory>
#include <mutex>

#include "common/node.h"
#include "server/param_server.h"

namespace nereus {

class ServerNode : public ReplySink {
 public:
  explicit ServerNode(NodeOptions options);
  ~ServerNode() override;

  // Joins the job and serves until it shuts down (OK) or aborts (the error).
  // Blocking.
  Status Run();

  void Reply(const Endpoint& to, Message msg) override;

 private:
  void OnData(const Endpoint& from, StatusOr<Message> msg, const pb::Header& partial);

  std::mutex mu_;
  std::condition_variable ready_;
  std::unique_ptr<ParamServer> server_;  // GUARDED_BY(mu_) until set, then read-only.
  bool failed_ = false;                  // GUARDED_BY(mu_): Start failed; drop data.
  Node node_;                            // Last: stopped before server_ goes away.
};

}  // namespace nereus

#endif  // NEREUS_SERVER_SERVER_NODE_H_
