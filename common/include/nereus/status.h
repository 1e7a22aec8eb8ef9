// Status and StatusOr: the result of anything a peer, a file, the network or a
// user can make fail. Broken internal invariants are checks that stop the
// process, never a Status.
//
// Part of Nereus's public API: includes only the standard library.
#ifndef NEREUS_STATUS_H_
#define NEREUS_STATUS_H_

#include <optional>
#include <ostream>
#include <string>
#include <utility>

namespace nereus {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // A caller, an option or a file said something wrong.
  kNotFound,            // Unknown tensor, partition, node, file.
  kFailedPrecondition,  // Asked at the wrong time (before Start, after Stop).
  kUnavailable,         // A peer is dead or unreachable.
  kDeadlineExceeded,    // A timeout expired.
  kAborted,             // The job was aborted (another node failed).
  kDataLoss,            // A malformed message or file.
  kInternal,
  kResourceExhausted,  // Out of memory (a device's, say) or another finite resource.
  // The job rolls back to a checkpoint (a node rejoined it): this process's
  // part of the job is over; it joins the job again with resume set, keeping
  // its rank (docs/RELIABILITY.md, "Rejoining").
  kRollback,
};

// "OK", "INVALID_ARGUMENT", ...
const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status OK() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "OK", or "CODE: message".
  std::string ToString() const;

  void IgnoreError() const {}

  // Returns a copy whose message is "context: message".
  Status Annotate(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline std::ostream& operator<<(std::ostream& os, const Status& s) { return os << s.ToString(); }

inline Status InvalidArgumentError(std::string m) { return Status(StatusCode::kInvalidArgument, std::move(m)); }
inline Status NotFoundError(std::string m) { return Status(StatusCode::kNotFound, std::move(m)); }
inline Status FailedPreconditionError(std::string m) { return Status(StatusCode::kFailedPrecondition, std::move(m)); }
inline Status UnavailableError(std::string m) { return Status(StatusCode::kUnavailable, std::move(m)); }
inline Status DeadlineExceededError(std::string m) { return Status(StatusCode::kDeadlineExceeded, std::move(m)); }
inline Status AbortedError(std::string m) { return Status(StatusCode::kAborted, std::move(m)); }
inline Status DataLossError(std::string m) { return Status(StatusCode::kDataLoss, std::move(m)); }
inline Status InternalError(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }
inline Status ResourceExhaustedError(std::string m) { return Status(StatusCode::kResourceExhausted, std::move(m)); }
inline Status RollbackError(std::string m) { return Status(StatusCode::kRollback, std::move(m)); }
inline bool IsRollback(const Status& s) { return s.code() == StatusCode::kRollback; }

namespace status_internal {
// Logs `what` (and the status) and aborts the process: a StatusOr used
// against its contract is a bug of the caller, not an error to return.
[[noreturn]] void Die(const char* what, const Status& status);
}  // namespace status_internal

// Holds either a value or a non-OK Status. Reading the value of one that holds
// an error, or building one from an OK Status, stops the process.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const Status& status) : status_(status) {  // NOLINT: implicit by design
    if (status_.ok()) status_internal::Die("StatusOr built from an OK status without a value", status_);
  }
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  const T& value() const& {
    CheckOk();
    return *value_;
  }
  T& value() & {
    CheckOk();
    return *value_;
  }
  T&& value() && {
    CheckOk();
    return std::move(*value_);
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  void CheckOk() const {
    if (!status_.ok()) status_internal::Die("the value of a StatusOr that holds an error was read", status_);
  }

  Status status_;
  std::optional<T> value_;
};

}  // namespace nereus

#endif  // NEREUS_STATUS_H_
