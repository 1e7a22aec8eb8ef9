#include "common/net/refusal_log.h"

#include <glog/logging.h>

namespace nereus {

std::string EscapeBytes(const std::string& bytes, size_t max_chars) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (out.size() >= max_chars) {
      out += "...(" + std::to_string(bytes.size()) + " bytes)";
      break;
    }
    const unsigned char c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x20 && c <= 0x7e && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

RefusalLog::RefusalLog(std::string who, std::chrono::milliseconds interval, size_t max_peers)
    : who_(std::move(who)), interval_(interval), max_peers_(std::max<size_t>(1, max_peers)) {}

bool RefusalLog::Refuse(const std::string& peer, const std::string& why) {
  const auto now = std::chrono::steady_clock::now();
  std::string key = EscapeBytes(peer);
  uint64_t unlogged = 0;
  {
    MutexLock lock(&mu_);
    ++total_;
    auto it = peers_.find(key);
    if (it == peers_.end()) {
      if (peers_.size() >= max_peers_) {
        // Forget peers quiet for a whole interval; if none, share one entry.
        for (auto p = peers_.begin(); p != peers_.end();) {
          p = now - p->second.logged >= interval_ ? peers_.erase(p) : std::next(p);
        }
        if (peers_.size() >= max_peers_) key = "(one of many peers)";
      }
      it = peers_.find(key);
      if (it == peers_.end()) {
        it = peers_.emplace(key, Entry{}).first;
        it->second.logged = now - interval_;
      }
    }
    Entry& e = it->second;
    if (now - e.logged < interval_) {
      ++e.unlogged;
      return false;
    }
    unlogged = e.unlogged;
    e.unlogged = 0;
    e.logged = now;
  }
  LOG(WARNING) << who_ << ": from " << key << ": " << EscapeBytes(why, 512);
  if (unlogged > 0) {
    LOG(WARNING) << who_ << ": (and " << unlogged << " more refusal(s) from " << key << " in the last "
                 << interval_.count() / 1000.0 << " s, not logged)";
  }
  return true;
}

uint64_t RefusalLog::total() const {
  MutexLock lock(&mu_);
  return total_;
}

}  // namespace nereus
