// Reading a whole file, for the code that reads one into memory (checkpoint
// shards, IDX files, encoded images).
#ifndef NEREUS_COMMON_BASE_FILE_UTIL_H_
#define NEREUS_COMMON_BASE_FILE_UTIL_H_

#include <string>

#include "common/base/status.h"

namespace nereus {

// The bytes of the file at `path`, or an error naming it as "<what> '<path>'"
// (e.g. what = "IDX file"): NOT_FOUND "cannot open ...: <reason>" when it
// cannot be opened, UNAVAILABLE "cannot read ...: <reason>" when a read fails
// (an interrupted read is retried).
StatusOr<std::string> ReadWholeFile(const std::string& path, const std::string& what);

}  // namespace nereus

#endif  // NEREUS_COMMON_BASE_FILE_UTIL_H_
