// Checking the errors a test expects: a Status whose message names the
// problem, or a log or message that holds given lines.
#ifndef NEREUS_TESTS_SUPPORT_STATUS_UTIL_H_
#define NEREUS_TESTS_SUPPORT_STATUS_UTIL_H_

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/base/status.h"

namespace nereus {
namespace test {

// Fails unless `text` (a log, a message) contains each of `parts`; a
// failure shows `text`.
inline void ExpectContains(const std::string& text, const std::vector<std::string>& parts) {
  for (const std::string& part : parts) EXPECT_NE(text.find(part), std::string::npos) << text;
}

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
