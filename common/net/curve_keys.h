// The CURVE key files of a job, made by `nereus_keygen DIR --servers=S
// --workers=W` and read by every process given --curve_dir=DIR:
//   DIR/job.public,  DIR/job.secret    the pair every node's receiving socket
//                                      serves with (peers encrypt to it);
//   DIR/NAME.public, DIR/NAME.secret   each node's own pair, NAME one of
//                                      coordinator, server-R, worker-R; it
//                                      connects with it, and the job admits
//                                      exactly the NAME.public keys in DIR.
// Keys are z85 text (40 characters) on one line; secrets are mode 0600.
#ifndef NEREUS_COMMON_NET_CURVE_KEYS_H_
#define NEREUS_COMMON_NET_CURVE_KEYS_H_

#include <string>

#include "common/base/status.h"
#include "common/net/message.h"
#include "common/net/transport.h"

namespace nereus {

// "coordinator", "server-3", "worker-0".
std::string CurveKeyName(pb::Role role, int rank);

// Writes a fresh job pair and one pair per node into `dir` (created if
// missing). Refuses to overwrite existing key files.
Status WriteJobKeys(const std::string& dir, int servers, int workers);

// The keys node `name` uses: the job pair, its own pair and every NAME.public
// in `dir` as the admitted members. Errors name the file and the problem
// (missing, not a key, a secret that does not match its public key).
StatusOr<CurveKeys> LoadCurveKeys(const std::string& dir, const std::string& name);

}  // namespace nereus

#endif  // NEREUS_COMMON_NET_CURVE_KEYS_H_
