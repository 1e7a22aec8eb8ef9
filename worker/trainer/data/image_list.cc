#include "worker/trainer/data/image_list.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace nereus {
namespace data {

StatusOr<std::vector<ImageListEntry>> ReadImageList(const std::string& list_path) {
  std::ifstream in(list_path);
  if (!in) return NotFoundError("cannot read image list '" + list_path + "': " + std::strerror(errno));
  std::vector<ImageListEntry> entries;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const std::string where = "image list '" + list_path + "' line " + std::to_string(number);
    const std::size_t space = line.find_last_of(' ');
    if (space == std::string::npos || space == 0 || space + 1 == line.size()) {
      return InvalidArgumentError(where + ": '" + line + "' has no label (each line is 'PATH LABEL')");
    }
    const std::string label = line.substr(space + 1);
    errno = 0;
    char* end = nullptr;
    const long value = std::strtol(label.c_str(), &end, 10);
    if (end == label.c_str() || *end != '\0' || errno != 0 || value < INT_MIN || value > INT_MAX) {
      return InvalidArgumentError(where + ": the label '" + label + "' is not an integer (each line is 'PATH LABEL')");
    }
    entries.push_back(ImageListEntry{line.substr(0, space), static_cast<int>(value), number});
  }
  if (in.bad()) return NotFoundError("cannot read image list '" + list_path + "': " + std::strerror(errno));
  if (entries.empty()) return InvalidArgumentError("image list '" + list_path + "' lists no images");
  return entries;
}

}  // namespace data
}  // namespace nereus
