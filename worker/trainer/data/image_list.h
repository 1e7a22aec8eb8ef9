// Caffe's image list files (ImageData's source, convert_imageset's LISTFILE):
// one image per line, "PATH LABEL", split at the line's last space (so a
// path may hold spaces), the label a decimal integer. Blank lines are
// skipped; a trailing carriage return is ignored.
#ifndef NEREUS_WORKER_TRAINER_DATA_IMAGE_LIST_H_
#define NEREUS_WORKER_TRAINER_DATA_IMAGE_LIST_H_

#include <string>
#include <vector>

#include "common/base/status.h"

namespace nereus {
namespace data {

struct ImageListEntry {
  std::string path;  // As written (without a root folder).
  int label = 0;
  int line = 0;  // 1-based line of the list file.
};

// Reads the list at `list_path`. Errors name the file and the line: NOT_FOUND
// when it cannot be read, INVALID_ARGUMENT for a line without a label (Caffe
// would read label 0) or with a label that is not an integer, or a list with
// no images.
StatusOr<std::vector<ImageListEntry>> ReadImageList(const std::string& list_path);

}  // namespace data
}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_DATA_IMAGE_LIST_H_
