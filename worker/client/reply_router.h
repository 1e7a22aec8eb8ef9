// ReplyRouter: what the client does with each message a server sends back.
#ifndef NEREUS_WORKER_CLIENT_REPLY_ROUTER_H_
#define NEREUS_WORKER_CLIENT_REPLY_ROUTER_H_

#include <cstdint>
#include <map>
#include <vector>

#include "common/net/message.h"
#include "common/net/node.h"
#include "worker/client/factor_exchange.h"
#include "worker/client/host_aggregator.h"
#include "worker/client/request_table.h"
#include "worker/client/server_queues.h"
#include "worker/client/timeline.h"

namespace nereus {

// Matches replies (PUSH_ACK, INIT_ACK, PONG, PULL_REPLY, FACTORS_ACK,
// LEND_REPLY, HAND_BACK_ACK, ERROR) to their requests: completes or fails the handles, copies pulled weights into
// place, releases the server's credit and records the network spans on the timeline; hands other workers' FACTORS to
// the FactorExchange. Owns nothing; runs on the Node's receive thread. A bad reply fails its request (or is logged),
// never the process.
//
// Messages of a new kind (e.g. from other workers) get a case in OnData.
class ReplyRouter {
 public:
  // Every pointer must outlive this object.
  ReplyRouter(const Node* node, RequestTable* requests, ServerQueues* queues)
      : node_(node), requests_(requests), queues_(queues) {}

  // Set once by Client start-up, before any request exists.
  void set_timeline(Timeline* timeline) { timeline_ = timeline; }
  // Set once at construction: where FACTORS from other workers go.
  void set_factors(FactorExchange* factors) { factors_ = factors; }
  // Set once at construction: where other workers' PUSHes go (host-local
  // aggregation, on a host's first worker), and who hands on the weights
  // and errors of the pulls riding on this worker's pushes for them.
  void set_aggregator(HostAggregator* aggregator) { aggregator_ = aggregator; }

  // Node::DataHandler.
  void OnData(const Endpoint& from, StatusOr<Message> msg, const pb::Header& partial);

 private:
  void ReceiveWeights(uint64_t id, int64_t version, int64_t apply_begin, int64_t apply_us,
                      const std::vector<Buffer>& payload, int64_t now);
  void Finished(const Request& r) { queues_->Release(r.server, r.credit); }
  // Fails request `id` and the pulls riding on it; its credit is released,
  // or added to `credit` (by server) for the caller to release.
  void Fail(uint64_t id, const Status& err, std::map<int, uint64_t>* credit = nullptr);
  // The PUSH_ACK of a batch: completes every unit it lists.
  void AckBatch(const pb::Header& h, int64_t now);

  const Node* const node_;
  RequestTable* const requests_;
  ServerQueues* const queues_;
  Timeline* timeline_ = nullptr;
  FactorExchange* factors_ = nullptr;
  HostAggregator* aggregator_ = nullptr;
};

}  // namespace nereus

#endif  // NEREUS_WORKER_CLIENT_REPLY_ROUTER_H_
