// RefusalLog: logs refused messages without letting a peer fill the disk.
// Each peer gets at most one line per interval; the next line says how many
// refusals were not logged in between. Peers are named escaped (a routing
// identity is whatever bytes the peer chose).
#ifndef NEREUS_COMMON_NET_REFUSAL_LOG_H_
#define NEREUS_COMMON_NET_REFUSAL_LOG_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include "common/base/mutex.h"

namespace nereus {

// `bytes` as printable ASCII: characters outside 0x20..0x7e and the backslash
// become \xHH; longer than `max_chars` input is cut with "...(N bytes)".
std::string EscapeBytes(const std::string& bytes, size_t max_chars = 96);

class RefusalLog {
 public:
  // `who` prefixes every line ("server 0", "coordinator", "transport at ...").
  // At most `max_peers` peers are tracked apart; beyond that, refusals from
  // new peers share one entry (a stranger inventing identities gets no more
  // lines than one peer).
  explicit RefusalLog(std::string who, std::chrono::milliseconds interval = std::chrono::seconds(10),
                      size_t max_peers = 1024);

  // Records a refusal of something `peer` (raw bytes; escaped here) sent;
  // `why` says what and why ("refused a message: ..."). Logs a WARNING
  // "<who>: from <peer>: <why>" unless this peer was logged within the interval.
  // Returns true if it logged. Thread-safe.
  bool Refuse(const std::string& peer, const std::string& why) NEREUS_LOCKS_EXCLUDED(mu_);

  // Every refusal recorded, logged or not.
  uint64_t total() const NEREUS_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    std::chrono::steady_clock::time_point logged;
    uint64_t unlogged = 0;
  };

  const std::string who_;
  const std::chrono::milliseconds interval_;
  const size_t max_peers_;
  mutable Mutex mu_;
  std::map<std::string, Entry> peers_ NEREUS_GUARDED_BY(mu_);  // Escaped peer -> state.
  uint64_t total_ NEREUS_GUARDED_BY(mu_) = 0;
};

}  // namespace nereus

#endif  // NEREUS_COMMON_NET_REFUSAL_LOG_H_
