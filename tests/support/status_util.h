// Checking the errors a test expects: a Status whose message names the
// problem.
#ifndef NEREUS_TESTS_SUPPORT_STATUS_UTIL_H_
#define NEREUS_TESTS_SUPPORT_STATUS_UTIL_H_

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/base/status.h"

namespace nereus {
namespace test {

// Fails unless `status` is an error whose message contains each of `parts`.
inline void ExpectErrorContains(const Status& status, const std::vector<std::string>& parts) {
  ASSERT_FALSE(status.ok()) << "expected an error containing \"" << parts.front() << "\"";
  for (const std::string& part : parts) {
    EXPECT_NE(std::string::npos, status.message().find(part)) << status.message();
  }
}

}  // namespace test
}  // namespace nereus

#endif  // NEREUS_TESTS_SUPPORT_STATUS_UTIL_H_
