// Status and StatusOr for the code inside Nereus: the public types
// (nereus/status.h, which a user of the client library sees) plus what only
// the library uses, the early-return macros, and glog, whose CHECKs guard our
// own invariants (a broken one is never a Status).
#ifndef NEREUS_COMMON_BASE_STATUS_H_
#define NEREUS_COMMON_BASE_STATUS_H_

#include <glog/logging.h>

#include <utility>

#include "nereus/status.h"

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

#endif  // NEREUS_COMMON_BASE_STATUS_H_
