// Where the public API's plain structs (nereus/options.h, nereus/client.h)
// meet the wire format (proto/nereus.proto): the one place each is converted,
// so that neither a user of the library nor its installed headers need
// protobuf.
#ifndef NEREUS_WORKER_CLIENT_OPTIONS_PROTO_H_
#define NEREUS_WORKER_CLIENT_OPTIONS_PROTO_H_

#include "nereus/client.h"
#include "nereus/options.h"
#include "proto/nereus.pb.h"

namespace nereus {

// Field by field; a round trip gives back what went in.
pb::SgdConfig SgdConfigToProto(const SgdConfig& sgd);
SgdConfig SgdConfigFromProto(const pb::SgdConfig& sgd);

JobInfo JobInfoFromProto(const pb::JobConfig& job);

}  // namespace nereus

#endif  // NEREUS_WORKER_CLIENT_OPTIONS_PROTO_H_
