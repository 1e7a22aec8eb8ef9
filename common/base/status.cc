#include "common/base/status.h"

#include <cstdlib>
#include <iterator>

#include "common/base/enum_names.h"

namespace nereus {

const char* StatusCodeName(StatusCode code) {
  static constexpr const char* kNames[] = {"OK",          "INVALID_ARGUMENT",   "NOT_FOUND", "FAILED_PRECONDITION",
                                           "UNAVAILABLE", "DEADLINE_EXCEEDED",  "ABORTED",   "DATA_LOSS",
                                           "INTERNAL",    "RESOURCE_EXHAUSTED", "ROLLBACK"};
  static_assert(std::size(kNames) == static_cast<size_t>(StatusCode::kRollback) + 1, "a StatusCode without a name");
  return NameOf(code, kNames, "UNKNOWN");
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

namespace status_internal {
void Die(const char* what, const Status& status) {
  LOG(FATAL) << what << ": " << status;
  std::abort();  // Not reached: LOG(FATAL) aborts.
}
}  // namespace status_internal

Status Status::Annotate(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_);
}

}  // namespace nereus
