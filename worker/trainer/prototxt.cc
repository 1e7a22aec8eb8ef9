#include "worker/trainer/prototxt.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>

#include "worker/trainer/upgrade_net.h"

namespace nereus {
namespace {

// Collects the text parser's errors as "source:line:col: message", with the
// common "has no field named" message rewritten to name the field first.
class ErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  ErrorCollector(std::string source, const std::string& text) : source_(std::move(source)) {
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) lines_.push_back(l);
  }

  void AddError(int line, google::protobuf::io::ColumnNumber column, const std::string& message) override {
    if (!errors_.empty()) errors_ += "\n";
    std::string field;
    const std::string rewritten = Rewrite(message, &field);
    // The parser points after an unknown field's name; point at the name.
    if (!field.empty() && line >= 0 && static_cast<size_t>(line) < lines_.size()) {
      const std::string& l = lines_[line];
      const size_t at = l.rfind(field, column >= 0 ? static_cast<size_t>(column) : std::string::npos);
      if (at != std::string::npos) column = static_cast<int>(at);
    }
    errors_ += Where(line, column) + rewritten;
  }
  void AddWarning(int line, google::protobuf::io::ColumnNumber column, const std::string& message) override {
    LOG(WARNING) << Where(line, column) << message;
  }
  const std::string& errors() const { return errors_; }

 private:
  std::string Where(int line, int column) const {
    // The parser reports 0-based lines and columns; -1 means "no position".
    if (line < 0) return source_ + ": ";
    return source_ + ":" + std::to_string(line + 1) + ":" + std::to_string(column + 1) + ": ";
  }
  static std::string Rewrite(const std::string& message, std::string* field) {
    static const std::regex kNoField(R"re(Message type "([^"]+)" has no field named "([^"]+)"\.?)re");
    std::smatch m;
    if (std::regex_match(message, m, kNoField)) {
      *field = m[2].str();
      return "unknown field \"" + m[2].str() + "\" in " + m[1].str() + ": " + WhatField(m[1].str(), m[2].str());
    }
    return message;
  }
  // Whether `field` is a Caffe field of message `type` that Nereus leaves out
  // (caffe.proto lists them in the message's caffe_fields_not_supported
  // option) or no Caffe field at all.
  static std::string WhatField(const std::string& type, const std::string& field) {
    const auto* desc = google::protobuf::DescriptorPool::generated_pool()->FindMessageTypeByName(type);
    if (desc != nullptr) {
      std::istringstream names(desc->options().GetExtension(caffe::caffe_fields_not_supported));
      for (std::string name; names >> name;) {
        if (name == field) return "a Caffe field that Nereus does not support";
      }
    }
    return "not a Caffe field (Nereus reads Caffe's own field names)";
  }

  std::string source_;
  std::vector<std::string> lines_;
  std::string errors_;
};

Status ParseWithInfo(const std::string& text, const std::string& source, google::protobuf::Message* message,
                     google::protobuf::TextFormat::ParseInfoTree* info) {
  ErrorCollector collector(source, text);
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&collector);
  parser.AllowUnknownField(false);
  parser.AllowUnknownExtension(false);
  if (info != nullptr) parser.WriteLocationsTo(info);
  if (!parser.ParseFromString(text, message)) {
    std::string errors = collector.errors();
    if (errors.empty()) errors = source + ": cannot parse as " + message->GetTypeName();
    return InvalidArgumentError(errors);
  }
  return Status::OK();
}

void FillLayerLines(const google::protobuf::TextFormat::ParseInfoTree& info, const caffe::NetParameter& param,
                    const std::string& source, PrototxtLocations* locations) {
  locations->source = source;
  // A V1 net lists `layers`, upgraded one for one to `layer`.
  const bool v1 = param.layers_size() > 0 && param.layer_size() == 0;
  const int count = v1 ? param.layers_size() : param.layer_size();
  locations->layer_lines.assign(count, 0);
  const auto* field = caffe::NetParameter::descriptor()->FindFieldByName(v1 ? "layers" : "layer");
  for (int i = 0; i < count; ++i) {
    const auto loc = info.GetLocation(field, i);
    if (loc.line >= 0) locations->layer_lines[i] = loc.line + 1;
  }
}

}  // namespace

Status ReadFileToString(const std::string& path, std::string* contents) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot open " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return UnavailableError("error reading " + path);
  *contents = ss.str();
  return Status::OK();
}

Status ParseTextProto(const std::string& text, const std::string& source, google::protobuf::Message* message) {
  return ParseWithInfo(text, source, message, nullptr);
}

Status ParseNetParameter(const std::string& text, const std::string& source, caffe::NetParameter* param,
                         PrototxtLocations* locations) {
  google::protobuf::TextFormat::ParseInfoTree info;
  RETURN_IF_ERROR(ParseWithInfo(text, source, param, &info));
  if (locations != nullptr) FillLayerLines(info, *param, source, locations);
  return UpgradeNetAsNeeded(source, param);
}

Status ReadNetParameterFromTextFile(const std::string& path, caffe::NetParameter* param, PrototxtLocations* locations) {
  std::string text;
  RETURN_IF_ERROR(ReadFileToString(path, &text));
  return ParseNetParameter(text, path, param, locations);
}

Status ParseSolverParameter(const std::string& text, const std::string& source, caffe::SolverParameter* param,
                            PrototxtLocations* net_param_locations) {
  google::protobuf::TextFormat::ParseInfoTree info;
  RETURN_IF_ERROR(ParseWithInfo(text, source, param, &info));
  if (net_param_locations != nullptr) {
    const auto* desc = caffe::SolverParameter::descriptor();
    const char* field_name = param->has_net_param()         ? "net_param"
                             : param->has_train_net_param() ? "train_net_param"
                                                            : nullptr;
    if (field_name != nullptr) {
      const auto* field = desc->FindFieldByName(field_name);
      const auto* tree = info.GetTreeForNested(field, -1);
      const caffe::NetParameter& net = param->has_net_param() ? param->net_param() : param->train_net_param();
      if (tree != nullptr) {
        FillLayerLines(*tree, net, source, net_param_locations);
      } else {
        net_param_locations->source = source;
        net_param_locations->layer_lines.assign(std::max(net.layer_size(), net.layers_size()), 0);
      }
    }
  }
  if (param->has_net_param()) RETURN_IF_ERROR(UpgradeNetAsNeeded(source, param->mutable_net_param()));
  if (param->has_train_net_param()) {
    RETURN_IF_ERROR(UpgradeNetAsNeeded(source, param->mutable_train_net_param()));
  }
  for (auto& test_net : *param->mutable_test_net_param()) {
    RETURN_IF_ERROR(UpgradeNetAsNeeded(source, &test_net));
  }
  return Status::OK();
}

Status ReadSolverParameterFromTextFile(const std::string& path, caffe::SolverParameter* param,
                                       PrototxtLocations* net_param_locations) {
  std::string text;
  RETURN_IF_ERROR(ReadFileToString(path, &text));
  return ParseSolverParameter(text, path, param, net_param_locations);
}

Status ReadProtoFromBinaryFile(const std::string& path, google::protobuf::Message* message) {
  std::string bytes;
  RETURN_IF_ERROR(ReadFileToString(path, &bytes));
  if (bytes.size() > static_cast<size_t>(INT32_MAX)) {
    return DataLossError(path + ": " + std::to_string(bytes.size()) + " bytes, more than a binary " +
                         message->GetTypeName() + " can hold (2 GiB)");
  }
  google::protobuf::io::ArrayInputStream raw(bytes.data(), static_cast<int>(bytes.size()));
  google::protobuf::io::CodedInputStream coded(&raw);
  coded.SetTotalBytesLimit(INT32_MAX);
  if (!message->ParseFromCodedStream(&coded)) {
    return DataLossError(path + ": not a valid binary " + message->GetTypeName());
  }
  return Status::OK();
}

Status WriteProtoToBinaryFile(const google::protobuf::Message& message, const std::string& path) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return UnavailableError("cannot open " + tmp + " for writing");
    if (!message.SerializeToOstream(&out)) return UnavailableError("error writing " + tmp);
    out.close();
    if (!out) return UnavailableError("error closing " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return UnavailableError("cannot rename " + tmp + " to " + path);
  }
  return Status::OK();
}

}  // namespace nereus
