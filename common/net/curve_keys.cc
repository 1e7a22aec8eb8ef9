#include "common/net/curve_keys.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace nereus {
namespace {

constexpr size_t kZ85KeyChars = 40;

bool IsZ85Key(const std::string& k) {
  if (k.size() != kZ85KeyChars) return false;
  uint8_t bin[32];
  return zmq_z85_decode(bin, k.c_str()) != nullptr;
}

StatusOr<std::string> ReadKey(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFoundError("cannot read CURVE key " + path + ": " + std::strerror(errno));
  std::string key;
  std::getline(in, key);
  while (!key.empty() && (key.back() == '\r' || key.back() == ' ')) key.pop_back();
  if (!IsZ85Key(key)) return InvalidArgumentError(path + " does not hold a CURVE key (40 z85 characters)");
  return key;
}

Status WriteKey(const std::string& path, const std::string& key, mode_t mode) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, mode);
  if (fd < 0) return FailedPreconditionError("cannot create " + path + ": " + std::strerror(errno));
  const std::string line = key + "\n";
  const bool ok = write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) && fsync(fd) == 0;
  close(fd);
  if (!ok) return UnavailableError("cannot write " + path + ": " + std::strerror(errno));
  return Status::OK();
}

Status WritePair(const std::string& dir, const std::string& name) {
  char pub[41], sec[41];
  if (zmq_curve_keypair(pub, sec) != 0)
    return FailedPreconditionError(std::string("zmq_curve_keypair: ") + zmq_strerror(zmq_errno()) +
                                   " (is libzmq built with CURVE?)");
  RETURN_IF_ERROR(WriteKey(dir + "/" + name + ".secret", sec, 0600));
  return WriteKey(dir + "/" + name + ".public", pub, 0644);
}

// Loads NAME.public and NAME.secret and checks that they belong together.
Status LoadPair(const std::string& dir, const std::string& name, std::string* pub, std::string* sec) {
  ASSIGN_OR_RETURN(*pub, ReadKey(dir + "/" + name + ".public"));
  ASSIGN_OR_RETURN(*sec, ReadKey(dir + "/" + name + ".secret"));
  char derived[41];
  if (zmq_curve_public(derived, sec->c_str()) != 0 || *pub != derived)
    return InvalidArgumentError(dir + "/" + name + ".secret does not belong to " + dir + "/" + name + ".public");
  return Status::OK();
}

}  // namespace

std::string CurveKeyName(pb::Role role, int rank) {
  if (role == pb::COORDINATOR) return "coordinator";
  return std::string(role == pb::SERVER ? "server-" : "worker-") + std::to_string(rank);
}

Status WriteJobKeys(const std::string& dir, int servers, int workers) {
  if (servers < 1 || workers < 1)
    return InvalidArgumentError("--servers and --workers must be >= 1, got " + std::to_string(servers) + " and " +
                                std::to_string(workers));
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return UnavailableError("cannot create " + dir + ": " + std::strerror(errno));
  RETURN_IF_ERROR(WritePair(dir, "job"));
  RETURN_IF_ERROR(WritePair(dir, CurveKeyName(pb::COORDINATOR, 0)));
  for (int r = 0; r < servers; ++r) RETURN_IF_ERROR(WritePair(dir, CurveKeyName(pb::SERVER, r)));
  for (int r = 0; r < workers; ++r) RETURN_IF_ERROR(WritePair(dir, CurveKeyName(pb::WORKER, r)));
  return Status::OK();
}

StatusOr<CurveKeys> LoadCurveKeys(const std::string& dir, const std::string& name) {
  CurveKeys k;
  RETURN_IF_ERROR(LoadPair(dir, "job", &k.job_public, &k.job_secret).Annotate("--curve_dir"));
  RETURN_IF_ERROR(LoadPair(dir, name, &k.node_public, &k.node_secret).Annotate("--curve_dir"));
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return NotFoundError("--curve_dir: cannot list " + dir + ": " + std::strerror(errno));
  const std::string suffix = ".public";
  while (dirent* e = readdir(d)) {
    const std::string f = e->d_name;
    if (f.size() <= suffix.size() || f.compare(f.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    const std::string member = f.substr(0, f.size() - suffix.size());
    if (member == "job") continue;
    auto key = ReadKey(dir + "/" + f);
    if (!key.ok()) {
      closedir(d);
      return key.status().Annotate("--curve_dir");
    }
    k.members[*key] = member;
  }
  closedir(d);
  return k;
}

}  // namespace nereus
