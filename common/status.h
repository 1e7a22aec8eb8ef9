// Status and StatusOr: the result of anything a peer, a file, the network or a
// user can make fail. Broken internal invariants are CHECKs, never a Status.
#ifndef NEREUS_COMMON_STATUS_H_
#define NEREUS_COMMON_STATUS_H_

#include <glog/logging.h>

#include <optional>
#include <ostream>
#include <string>
#include <utility>

namespace nereus {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // A caller, a flag or a file said something wrong.
  kNotFound,            // Unknown tensor, chunk, node, file.
  kFailedPrecondition,  // Asked at the wrong time (before Start, after Stop).
  kUnavailable,         // A peer is dead or unreachable.
  kDeadlineExceeded,    // A timeout expired.
  kAborted,             // The job was aborted (another node failed).
  kDataLoss,            // A malformed message or file.
  kInternal,
  kResourceExhausted,  // Out of memory (a device's, say) or another finite resource.
  // The job rolls back to a checkpoint (a node rejoined it): this process's
  // part of the job is over; it joins the job again with resume, keeping its
  // rank (see Coordinator, and the RunServer/RunTraining loops).
  kRollback,
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status OK() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
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

// Holds either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const Status& status) : status_(status) {  // NOLINT: implicit by design
    CHECK(!status_.ok()) << "StatusOr built from an OK status without a value";
  }
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  const T& value() const& {
    CHECK(ok()) << status_;
    return *value_;
  }
  T& value() & {
    CHECK(ok()) << status_;
    return *value_;
  }
  T&& value() && {
    CHECK(ok()) << status_;
    return std::move(*value_);
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace nereus

#define NEREUS_CONCAT_INNER(a, b) a##b
#define NEREUS_CONCAT(a, b) NEREUS_CONCAT_INNER(a, b)

// Returns from the current function if `expr` is not OK.
#define RETURN_IF_ERROR(expr)      \
  do {                             \
    ::nereus::Status _st = (expr); \
    if (!_st.ok()) return _st;     \
  } while (0)

#define ASSIGN_OR_RETURN_IMPL(var, lhs, expr) \
  auto var = (expr);                          \
  if (!var.ok()) return var.status();         \
  lhs = std::move(var).value()

// ASSIGN_OR_RETURN(auto x, Foo()) declares x from a StatusOr or returns its error.
#define ASSIGN_OR_RETURN(lhs, expr) ASSIGN_OR_RETURN_IMPL(NEREUS_CONCAT(_status_or_, __LINE__), lhs, expr)

#endif  // NEREUS_COMMON_STATUS_H_
