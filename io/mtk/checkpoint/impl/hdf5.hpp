#pragma once
// RAII and error handling around the HDF5 C API, and the reads and writes the checkpoint code
// makes. Internal: HDF5 types stay inside io/mtk/checkpoint.

#include <mtk/checkpoint/checkpoint.hpp>
#include <mtk/parallel/communicator.hpp>

#include <hdf5.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mtk::ckpt {

/// An HDF5 identifier closed by its close function when it goes out of scope.
class H5Id {
 public:
  H5Id() = default;
  H5Id(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  H5Id(const H5Id&) = delete;
  H5Id& operator=(const H5Id&) = delete;
  H5Id(H5Id&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  H5Id& operator=(H5Id&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = o.id_;
      close_ = o.close_;
      o.id_ = -1;
    }
    return *this;
  }
  ~H5Id() { reset(); }
  void reset() {
    if (id_ >= 0 && close_ != nullptr)
      close_(id_);
    id_ = -1;
  }
  hid_t release() {
    const hid_t id = id_;
    id_ = -1;
    return id;
  }
  hid_t get() const { return id_; }
  operator hid_t() const { return id_; }  // NOLINT(google-explicit-constructor)

 private:
  hid_t id_ = -1;
  herr_t (*close_)(hid_t) = nullptr;
};

/// `id`, or an mtk::Error naming `what` and HDF5's error stack when it is negative.
hid_t h5(hid_t id, const std::string& where, const std::string& what);
/// Fails naming `what` and HDF5's error stack when `r` is negative.
void h5ok(herr_t r, const std::string& where, const std::string& what);
/// HDF5 prints its error stack by default; MTK puts it into its own messages instead.
void quiet_hdf5();

void write_string_attribute(hid_t obj, const char* name, const std::string& value,
                            const std::string& where, const std::string& what);
/// The string attribute `name` of `obj`; false when it is absent.
bool read_string_attribute(hid_t obj, const char* name, std::string* value,
                           const std::string& where, const std::string& what);

/// File access for reading: each rank opens the file on its own (POSIX), so that a damaged file
/// makes single ranks fail without leaving others inside a collective HDF5 call.
H5Id read_fapl(const std::string& where);
/// File access for writing through MPI-IO over `comm` (collective); `*collective` receives
/// whether data transfers should be collective (see hdf5.cpp).
H5Id write_fapl(const Communicator& comm, bool* collective, const std::string& where);

std::vector<hsize_t> hsizes(const std::vector<std::int64_t>& v);
/// How values of a stored dtype are held: "float32" as IEEE little-endian floats, "bfloat16" as
/// the 16-bit patterns in little-endian unsigned integers (HDF5 has no bfloat16 type).
struct StoredType {
  std::size_t bytes = 4;  ///< per value
  hid_t file = -1;        ///< the dataset's type
  hid_t memory = -1;      ///< the type of the values in memory
};
/// The StoredType of metadata dtype `dtype`; fails naming `what` when it is neither.
StoredType stored_type(const std::string& dtype, const std::string& where, const std::string& what);
/// Reads the block [origin, origin + shape) of a dataset into `dst` (row-major) as values of
/// HDF5 memory type `memory` (float32 datasets: H5T_NATIVE_FLOAT).
void read_block(hid_t dset, const std::vector<std::int64_t>& origin,
                const std::vector<std::int64_t>& shape, void* dst, hid_t memory,
                const std::string& where, const std::string& what);
/// Reads the block [origin, origin + shape) of a float32 dataset into `dst` (row-major).
void read_block(hid_t dset, const std::vector<std::int64_t>& origin,
                const std::vector<std::int64_t>& shape, float* dst, const std::string& where,
                const std::string& what);
/// Checks a dataset against its metadata entry: its dtype's type, dims attribute, global shape.
void check_dataset(hid_t dset, const CheckpointVariable& v, const std::string& file,
                   const std::string& where);

}  // namespace mtk::ckpt
