#include "worker/client/reply_router.h"

#include <cstring>
#include <map>
#include <string>

namespace nereus {

void ReplyRouter::OnData(const Endpoint& from, StatusOr<Message> msg, const pb::Header& partial) {
  if (!msg.ok()) {
    LOG(ERROR) << "worker " << node_->rank() << ": bad message from " << from << ": " << msg.status().message();
    Request r;
    if (partial.request_id() != 0 && requests_->Take(partial.request_id(), &r)) {
      r.state->Fail(msg.status());
      Finished(r);
    }
    return;
  }
  const pb::Header& h = msg->header;
  const int64_t now = MonotonicMicros();
  switch (h.op()) {
    case pb::FACTORS:
      if (factors_ != nullptr) {
        factors_->OnFactors(from, *msg);
      } else {
        LOG(WARNING) << "worker " << node_->rank() << ": FACTORS from " << from << " before start-up";
      }
      break;
    case pb::PUSH: {
      // Host-local aggregation: another worker of this host.
      pb::Role role;
      int rank = -1;
      if (aggregator_ != nullptr && node_->Lookup(from, &role, &rank) && role == pb::WORKER) {
        aggregator_->OnLocalPush(from, rank, std::move(*msg));
      } else {
        LOG(WARNING) << "worker " << node_->rank() << ": unexpected PUSH from " << from;
      }
      break;
    }
    case pb::PUSH_ACK:
      if (h.parts_size() > 0) {  // A batch: one ack for every unit in it.
        AckBatch(h, now);
        break;
      }
      [[fallthrough]];
    case pb::FACTORS_ACK:
    case pb::HAND_BACK_ACK:
    case pb::INIT_ACK:
    case pb::PONG: {
      Request r;
      if (!requests_->Take(h.request_id(), &r)) break;
      if (timeline_ && r.kind == Request::Kind::kAck && h.op() == pb::PUSH_ACK) {
        timeline_->Span(Lane::kQueue, r.what, r.clock, r.enqueue_us, r.dispatch_us);
        timeline_->Span(Lane::kPush, r.what, r.clock, r.dispatch_us, now);
      }
      r.state->Complete();
      Finished(r);
      break;
    }
    case pb::ERROR: {
      const Status err = InvalidArgumentError(h.error());
      if (h.parts_size() == 0) {
        Fail(h.request_id(), err);
        break;
      }
      // A refused batch: every unit in it.
      std::map<int, uint64_t> credit;
      for (const pb::Part& p : h.parts()) Fail(p.request_id(), err.Annotate("refused with its batch"), &credit);
      for (const auto& [server, bytes] : credit) queues_->Release(server, bytes);
      break;
    }
    case pb::LEND_REPLY:
      // The solver's history of a partition lent to the workers (HybComm's
      // switch to factors): one frame, into the tensor's history; none when
      // none was asked for (the first clock's LEND).
      if (msg->payload.empty() && h.state_arrays_size() == 0) {
        Request r;
        if (!requests_->Take(h.request_id(), &r)) break;
        if (r.kind == Request::Kind::kAck) {
          r.state->Complete();
        } else {
          r.state->Fail(DataLossError(r.what + ": the LEND_REPLY carries no history"));
        }
        Finished(r);
        break;
      }
      if (h.dtype() != pb::FLOAT32 || msg->payload.size() != 1) {
        LOG(ERROR) << "worker " << node_->rank() << ": LEND_REPLY with dtype " << pb::DType_Name(h.dtype()) << " and "
                   << msg->payload.size() << " frames";
        Fail(h.request_id(), DataLossError("a LEND_REPLY without its one history frame"));
        break;
      }
      ReceiveWeights(h.request_id(), h.clock(), 0, 0, msg->payload, now);
      break;
    case pb::PULL_REPLY: {
      if (h.dtype() != pb::FLOAT32) {
        LOG(ERROR) << "worker " << node_->rank() << ": PULL_REPLY with dtype " << pb::DType_Name(h.dtype());
        break;
      }
      if (h.parts_size() == 0) {
        if (aggregator_ != nullptr)
          aggregator_->Relay(h.request_id(), h.clock(), h.apply_begin_us(), h.apply_us(), msg->payload);
        ReceiveWeights(h.request_id(), h.clock(), h.apply_begin_us(), h.apply_us(), msg->payload, now);
      } else {
        if (static_cast<int>(msg->payload.size()) != h.parts_size()) {
          LOG(ERROR) << "worker " << node_->rank() << ": merged PULL_REPLY with " << h.parts_size() << " parts and "
                     << msg->payload.size() << " frames";
          break;
        }
        for (int i = 0; i < h.parts_size(); ++i) {
          const pb::Part& p = h.parts(i);
          if (aggregator_ != nullptr)
            aggregator_->Relay(p.request_id(), p.clock(), p.apply_begin_us(), p.apply_us(), {msg->payload[i]});
          ReceiveWeights(p.request_id(), p.clock(), p.apply_begin_us(), p.apply_us(), {msg->payload[i]}, now);
        }
      }
      break;
    }
    default:
      LOG(WARNING) << "worker " << node_->rank() << ": unexpected " << OpName(h.op()) << " from " << from;
  }
}

void ReplyRouter::Fail(uint64_t id, const Status& err, std::map<int, uint64_t>* credit) {
  Request r;
  if (!requests_->Take(id, &r)) return;
  r.state->Fail(err);
  for (uint64_t pid : r.piggyback) {
    Request p;
    if (requests_->Take(pid, &p)) p.state->Fail(err.Annotate("the push carrying this pull was refused"));
    if (aggregator_ != nullptr) aggregator_->FailRelay(pid, err);
  }
  if (credit != nullptr) {
    (*credit)[r.server] += r.credit;
  } else {
    Finished(r);
  }
}

void ReplyRouter::AckBatch(const pb::Header& h, int64_t now) {
  // Every unit's credit goes back at once, so the queue refills with one
  // dispatch (and may batch again) instead of one per unit.
  std::map<int, uint64_t> credit;
  for (const pb::Part& p : h.parts()) {
    Request r;
    if (!requests_->Take(p.request_id(), &r)) continue;
    if (timeline_ && r.kind == Request::Kind::kAck) {
      timeline_->Span(Lane::kQueue, r.what, r.clock, r.enqueue_us, r.dispatch_us);
      timeline_->Span(Lane::kPush, r.what, r.clock, r.dispatch_us, now);
    }
    r.state->Complete();
    credit[r.server] += r.credit;
  }
  for (const auto& [server, bytes] : credit) queues_->Release(server, bytes);
}

void ReplyRouter::ReceiveWeights(uint64_t id, int64_t version, int64_t apply_begin, int64_t apply_us,
                                 const std::vector<Buffer>& payload, int64_t now) {
  Request r;
  if (!requests_->Take(id, &r)) return;
  size_t bytes = 0;
  for (const Buffer& b : payload) bytes += b.size();
  if (bytes != r.length * sizeof(float)) {
    r.state->Fail(DataLossError(r.what + ": reply carries " + std::to_string(bytes) + " bytes, expected " +
                                std::to_string(r.length * sizeof(float))));
    Finished(r);
    return;
  }
  queues_->CountPulled(bytes);
  CopyFrames(payload, reinterpret_cast<char*>(r.dst));
  if (timeline_) {
    if (r.dispatch_us > 0) {  // An explicit pull: it queued here, then travelled.
      timeline_->Span(Lane::kQueue, r.what, r.clock, r.enqueue_us, r.dispatch_us);
      timeline_->Span(Lane::kPull, r.what, r.clock, r.dispatch_us, now);
    } else if (apply_begin > 0) {  // Rode on a push: apply, then the way back.
      timeline_->Span(Lane::kServerApply, r.what, r.clock, apply_begin, apply_begin + apply_us);
      timeline_->Span(Lane::kPull, r.what, r.clock, apply_begin + apply_us, now);
    }
  }
  r.state->Complete(version);
  Finished(r);
}

}  // namespace nereus
