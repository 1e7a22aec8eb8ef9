// What the trainer's HDF5 code shares (Caffe's HDF5 snapshots,
// hdf5_snapshot.cc; the HDF5Data and HDF5Output layers, data/): an owned
// HDF5 identifier, and calls with HDF5's own error printing off, so that a
// failure is reported once, as a Status naming the file, not as an HDF5
// stack dump. Include only from .cc files that link nereus_hdf5.
#ifndef NEREUS_WORKER_TRAINER_HDF5_HANDLE_H_
#define NEREUS_WORKER_TRAINER_HDF5_HANDLE_H_

#include <hdf5.h>

#include <utility>

namespace nereus {

// Closes an HDF5 object (file, group, dataset, dataspace) when it goes out
// of scope. Move-only.
class Hdf5Handle {
 public:
  Hdf5Handle() = default;
  Hdf5Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  Hdf5Handle(Hdf5Handle&& other) noexcept { *this = std::move(other); }
  Hdf5Handle& operator=(Hdf5Handle&& other) noexcept {
    if (this != &other) {
      Reset();
      id_ = std::exchange(other.id_, -1);
      close_ = other.close_;
    }
    return *this;
  }
  Hdf5Handle(const Hdf5Handle&) = delete;
  Hdf5Handle& operator=(const Hdf5Handle&) = delete;
  ~Hdf5Handle() { Reset(); }

  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }
  // Closes it now; the close's result (negative: it failed).
  herr_t Reset() {
    herr_t result = 0;
    if (id_ >= 0) result = close_(id_);
    id_ = -1;
    return result;
  }

 private:
  hid_t id_ = -1;
  herr_t (*close_)(hid_t) = nullptr;
};

// Runs `f` with HDF5's automatic error printing off on this thread
// (restored after).
template <typename F>
auto Hdf5Quiet(F f) -> decltype(f()) {
  H5E_auto2_t func = nullptr;
  void* data = nullptr;
  H5Eget_auto2(H5E_DEFAULT, &func, &data);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  auto result = f();
  H5Eset_auto2(H5E_DEFAULT, func, data);
  return result;
}

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_HDF5_HANDLE_H_
