// Reading Caffe's configuration files: NetParameter and SolverParameter in
// protobuf text format, and binary protos (.caffemodel, .solverstate,
// mean.binaryproto). Anything the text parser cannot map — an unknown field,
// a field Nereus does not support, a bad value — is an error of the form
//   lenet.prototxt:12:5: unknown field "foo" in caffe.ConvolutionParameter: not a
//   Caffe field (Nereus reads Caffe's own field names)
// or, for a field of Caffe's that caffe.proto leaves out (its message's
// caffe_fields_not_supported option), "...: a Caffe field that Nereus does
// not support"; never a silent skip.
#ifndef NEREUS_WORKER_TRAINER_PROTOTXT_H_
#define NEREUS_WORKER_TRAINER_PROTOTXT_H_

#include <google/protobuf/message.h>

#include <string>
#include <vector>

#include "common/base/status.h"
#include "proto/caffe.pb.h"

namespace nereus {

// Where each layer of a parsed NetParameter was written, for error messages
// (an unknown layer type is only found when the Net is built).
struct PrototxtLocations {
  std::string source;            // File name (or "<string>").
  std::vector<int> layer_lines;  // 1-based line of layer(i)'s "layer {"; 0 when unknown.
};

// Parses `text` as a text-format message of `message`'s type. `source` names
// the text in error messages.
Status ParseTextProto(const std::string& text, const std::string& source, google::protobuf::Message* message);

// Parses a NetParameter; fills `locations` (may be null) with layer lines.
Status ParseNetParameter(const std::string& text, const std::string& source, caffe::NetParameter* param,
                         PrototxtLocations* locations = nullptr);
Status ReadNetParameterFromTextFile(const std::string& path, caffe::NetParameter* param,
                                    PrototxtLocations* locations = nullptr);

// Parses a SolverParameter. `net_param_locations` (may be null) receives the
// layer lines of an inline net_param / train_net_param.
Status ParseSolverParameter(const std::string& text, const std::string& source, caffe::SolverParameter* param,
                            PrototxtLocations* net_param_locations = nullptr);
Status ReadSolverParameterFromTextFile(const std::string& path, caffe::SolverParameter* param,
                                       PrototxtLocations* net_param_locations = nullptr);

// Binary protos. Read reports a missing file as NotFound and a malformed one
// as DataLoss; Write reports I/O failures as Unavailable. Write is atomic
// (writes path.tmp, then renames).
Status ReadProtoFromBinaryFile(const std::string& path, google::protobuf::Message* message);
Status WriteProtoToBinaryFile(const google::protobuf::Message& message, const std::string& path);

// Reads a whole file into *contents.
Status ReadFileToString(const std::string& path, std::string* contents);

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_PROTOTXT_H_
