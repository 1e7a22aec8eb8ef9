// libFuzzer target: the bytes a peer sends, as the server sees them. Each
// input is a sequence of multipart messages, each decoded by DecodeMessage
// (common/net/message.cc) and handed, decoded or not, to a ParamServer
// (server/param_server.cc) that already holds two initialized partitions; every
// reply it makes is encoded as the transport would. Built with ASan and
// UBSan by scripts/fuzz.sh; any crash, leak or sanitizer report fails it.
//
// Input format (all cut short where the input ends):
//   byte 0: server settings: consistency (bits 0-1), workers - 1 (bits 2-3);
//   then per message: 1 byte sender (a worker rank below the job's count, or
//   -1: not a worker), 1 byte frame count (low 4 bits), and per frame a
//   2-byte little-endian length and that many bytes. Frame 0 is the header.
//
// With NEREUS_FUZZ_WRITE_SEEDS=DIR set, LLVMFuzzerInitialize writes the seed
// corpus (real messages: INIT, PUSH, merged PUSH, PULL, batched PULL, PING)
// there and exits;
// tests/server/fuzz_corpus/ holds its output.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "common/net/message.h"
#include "server/param_server.h"

namespace nereus {
namespace {

class EncodingSink : public ReplySink {
 public:
  void Reply(const Endpoint& to, Message msg) override {
    const std::string h = EncodeHeader(&msg);
    for (const Buffer& b : msg.payload) bytes_ += b.size();
    bytes_ += h.size() + to.size();
  }

 private:
  size_t bytes_ = 0;
};

// Caffe's "step" policy with a short step: the rate changes every 3 clocks.
pb::SgdConfig StepDecaySgd() {
  pb::SgdConfig sgd;
  sgd.set_base_lr(0.01f);
  sgd.set_lr_policy("step");
  sgd.set_gamma(0.5f);
  sgd.set_stepsize(3);
  sgd.set_momentum(0.9f);
  sgd.set_weight_decay(0.001f);
  return sgd;
}

Message Init(int tensor, int length) {
  Message m;
  m.header.set_op(pb::INIT_PARTITION);
  m.header.set_request_id(1);
  m.header.set_tensor(tensor);
  m.header.set_dtype(pb::FLOAT32);
  auto* meta = m.header.mutable_partition_meta();
  meta->set_tensor(tensor);
  meta->set_length(length);
  meta->set_lr_mult(1);
  meta->set_decay_mult(1);
  *m.header.mutable_sgd() = StepDecaySgd();
  m.payload.push_back(Buffer::Of(std::make_shared<std::vector<float>>(length, 0.5f)));
  return m;
}

Message Push(int tensor, int length, int64_t clock, uint64_t pull_id) {
  Message m;
  m.header.set_op(pb::PUSH);
  m.header.set_request_id(10 + clock);
  m.header.set_tensor(tensor);
  m.header.set_clock(clock);
  m.header.set_dtype(pb::FLOAT32);
  m.header.set_pull_request_id(pull_id);
  m.payload.push_back(Buffer::Of(std::make_shared<std::vector<float>>(length, 0.25f)));
  return m;
}

Message MergedPush(int64_t clock) {
  Message m;
  m.header.set_op(pb::PUSH);
  m.header.set_dtype(pb::FLOAT32);
  for (int t = 0; t < 2; ++t) {
    pb::Part* p = m.header.add_parts();
    p->set_tensor(t);
    p->set_clock(clock);
    p->set_payload_bytes((t == 0 ? 8 : 4) * sizeof(float));
    p->set_request_id(20 + t);
    p->set_pull_request_id(30 + t);
    m.payload.push_back(Buffer::Of(std::make_shared<std::vector<float>>(t == 0 ? 8 : 4, -0.125f)));
  }
  return m;
}

// A batch of pulls (the client's --batch_bytes): one PULL, a part per unit.
Message BatchedPull(int64_t clock) {
  Message m;
  m.header.set_op(pb::PULL);
  for (int t = 0; t < 2; ++t) {
    pb::Part* p = m.header.add_parts();
    p->set_tensor(t);
    p->set_clock(clock);
    p->set_request_id(50 + t);
  }
  return m;
}

Message Simple(pb::Op op, int64_t clock) {
  Message m;
  m.header.set_op(op);
  m.header.set_request_id(40);
  m.header.set_clock(clock);
  return m;
}

// One message in the input format.
void Append(std::string* out, int sender, Message m) {
  const std::string h = EncodeHeader(&m);
  std::vector<std::string> frames = {h};
  for (const Buffer& b : m.payload) frames.emplace_back(b.data(), b.size());
  out->push_back(static_cast<char>(sender));
  out->push_back(static_cast<char>(frames.size()));
  for (const std::string& f : frames) {
    out->push_back(static_cast<char>(f.size() & 0xff));
    out->push_back(static_cast<char>(f.size() >> 8));
    *out += f;
  }
}

void WriteSeeds(const std::string& dir) {
  std::vector<std::string> seeds;
  for (int settings : {0x01, 0x05, 0x02, 0x07, 0x03}) {  // BSP/SSP/ASYNC, 1-2 workers.
    std::string s(1, static_cast<char>(settings));
    Append(&s, 0, Push(0, 8, 0, 11));
    Append(&s, 1, Push(0, 8, 0, 12));
    Append(&s, 0, MergedPush(1));
    Append(&s, 0, Simple(pb::PULL, 1));
    Append(&s, 1, BatchedPull(1));
    Append(&s, 0, Simple(pb::PING, 0));
    Append(&s, 0, Init(2, 16));
    seeds.push_back(s);
  }
  for (size_t i = 0; i < seeds.size(); ++i) {
    std::ofstream out(dir + "/seed" + std::to_string(i), std::ios::binary);
    out << seeds[i];
  }
}

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}
  bool empty() const { return p_ >= end_; }
  uint8_t Byte() { return p_ < end_ ? *p_++ : 0; }
  Buffer Bytes(size_t n) {
    n = std::min<size_t>(n, static_cast<size_t>(end_ - p_));
    Buffer b = Buffer::CopyOf(p_, n);  // Aligned, as the transport's frames are.
    p_ += n;
    return b;
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

}  // namespace
}  // namespace nereus

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  if (const char* dir = std::getenv("NEREUS_FUZZ_WRITE_SEEDS")) {
    nereus::WriteSeeds(dir);
    std::exit(0);
  }
  FLAGS_minloglevel = 3;  // Refusals are the point here, not their log lines.
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace nereus;
  Reader in(data, size);
  const uint8_t settings = in.Byte();
  ParamServerOptions o;
  o.consistency = static_cast<pb::Consistency>(1 + (settings & 3) % 3);
  o.num_workers = 1 + ((settings >> 2) & 3);
  o.staleness = o.consistency == pb::SSP ? 2 : 0;
  EncodingSink sink;
  ParamServer server(o, &sink);
  pb::Header none;
  for (auto [tensor, length] : {std::pair<int, int>{0, 8}, {1, 4}}) {
    Message m = Init(tensor, length);
    const std::string h = EncodeHeader(&m);
    server.Handle("w0", 0, DecodeMessage(Buffer::CopyOf(h.data(), h.size()), m.payload), none);
  }
  while (!in.empty()) {
    const int sender = in.Byte();
    const int worker = sender < o.num_workers ? sender : -1;
    const int frames = in.Byte() & 15;
    std::vector<Buffer> f;
    for (int i = 0; i < frames; ++i) {
      const size_t len = in.Byte() | (static_cast<size_t>(in.Byte()) << 8);
      f.push_back(in.Bytes(len));
    }
    const Endpoint from = "tcp://127.0.0.1:" + std::to_string(sender);
    pb::Header partial;
    if (f.empty()) {
      server.Handle(from, worker, DataLossError("malformed message: no header frame"), partial);
      continue;
    }
    Buffer header = f[0];
    f.erase(f.begin());
    StatusOr<Message> msg = DecodeMessage(header, std::move(f), &partial);
    server.Handle(from, worker, std::move(msg), partial);
  }
  return 0;
}

#ifdef NEREUS_FUZZ_REPLAY
// Without libFuzzer (the ordinary build): runs the files named on the
// command line through the target once each, so the corpus keeps passing.
#include <iostream>
#include <iterator>

int main(int argc, char** argv) {
  LLVMFuzzerInitialize(&argc, &argv);
  for (int i = 1; i < argc; ++i) {
    std::ifstream f(argv[i], std::ios::binary);
    if (!f) {
      std::cerr << "cannot read " << argv[i] << "\n";
      return 2;
    }
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::cout << "replayed " << argc - 1 << " input(s)\n";
  return 0;
}
#endif
