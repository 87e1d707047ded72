#include <mtk/base/error.hpp>
#include <mtk/base/runtime_options.hpp>
#include <mtk/checkpoint/impl/format.hpp>
#include <mtk/checkpoint/impl/hdf5.hpp>
#include <mtk/parallel/mpi_interop.hpp>

#include <cstdlib>
#include <cstring>
#include <utility>

namespace mtk::ckpt {

namespace {

herr_t collect_h5_error(unsigned n, const H5E_error2_t* e, void* data) {
  auto* s = static_cast<std::string*>(data);
  if (n >= 4)
    return 0;
  if (!s->empty())
    *s += " <- ";
  *s += cat(e->func_name ? e->func_name : "?", ": ", e->desc ? e->desc : "?");
  return 0;
}

herr_t find_fletcher32_error(unsigned, const H5E_error2_t* e, void* data) {
  if (e->desc != nullptr && std::strstr(e->desc, "Fletcher32") != nullptr)
    *static_cast<bool*>(data) = true;
  return 0;
}

std::string h5_errors() {
  std::string s;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, &collect_h5_error, &s);
  H5Eclear2(H5E_DEFAULT);
  return s.empty() ? std::string("no HDF5 error details") : "HDF5: " + s;
}

// A failed H5Dread: a chunk whose Fletcher32 checksum does not match is reported as corruption.
void read_failed(const std::string& where, const std::string& what) {
  bool checksum = false;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, &find_fletcher32_error, &checksum);
  const std::string details = h5_errors();
  if (checksum)
    fail(where, cat(what, " is corrupted: HDF5's Fletcher32 checksum of its chunk does not match (",
                    details, ")"));
  fail(where, cat("reading ", what, " failed (", details, ")"));
}

}  // namespace

hid_t h5(hid_t id, const std::string& where, const std::string& what) {
  if (id < 0)
    fail(where, cat(what, " failed (", h5_errors(), ")"));
  return id;
}

void h5ok(herr_t r, const std::string& where, const std::string& what) {
  if (r < 0)
    fail(where, cat(what, " failed (", h5_errors(), ")"));
}

void quiet_hdf5() {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

void write_string_attribute(hid_t obj, const char* name, const std::string& value,
                            const std::string& where, const std::string& what) {
  H5Id type(h5(H5Tcopy(H5T_C_S1), where, "H5Tcopy"), H5Tclose);
  h5ok(H5Tset_size(type, value.size() + 1), where, "H5Tset_size");
  h5ok(H5Tset_strpad(type, H5T_STR_NULLTERM), where, "H5Tset_strpad");
  H5Id space(h5(H5Screate(H5S_SCALAR), where, "H5Screate"), H5Sclose);
  H5Id attr(h5(H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT), where,
               cat("creating attribute '", name, "' of ", what)),
            H5Aclose);
  h5ok(H5Awrite(attr, type, value.c_str()), where, cat("writing attribute '", name, "' of ", what));
}

bool read_string_attribute(hid_t obj, const char* name, std::string* value,
                           const std::string& where, const std::string& what) {
  const htri_t exists = H5Aexists(obj, name);
  if (exists < 0)
    h5ok(-1, where, cat("H5Aexists('", name, "') on ", what));
  if (exists == 0)
    return false;
  H5Id attr(h5(H5Aopen(obj, name, H5P_DEFAULT), where, cat("opening attribute '", name, "'")),
            H5Aclose);
  H5Id type(h5(H5Aget_type(attr), where, "H5Aget_type"), H5Tclose);
  if (H5Tget_class(type) != H5T_STRING || H5Tis_variable_str(type) > 0)
    fail(where, cat("attribute '", name, "' of ", what, " is not a fixed-length string"));
  const size_t n = H5Tget_size(type);
  std::string buf(n, '\0');
  H5Id mem(h5(H5Tcopy(H5T_C_S1), where, "H5Tcopy"), H5Tclose);
  h5ok(H5Tset_size(mem, n), where, "H5Tset_size");
  h5ok(H5Aread(attr, mem, buf.data()), where, cat("reading attribute '", name, "' of ", what));
  buf.resize(std::strlen(buf.c_str()));
  *value = buf;
  return true;
}

H5Id read_fapl(const std::string& where) {
  H5Id fapl(h5(H5Pcreate(H5P_FILE_ACCESS), where, "H5Pcreate(file access)"), H5Pclose);
  h5ok(H5Pset_fapl_sec2(fapl), where, "H5Pset_fapl_sec2");
  h5ok(H5Pset_file_locking(fapl, false, true), where, "H5Pset_file_locking");
  return fapl;
}

std::vector<hsize_t> hsizes(const std::vector<std::int64_t>& v) {
  return std::vector<hsize_t>(v.begin(), v.end());
}

StoredType stored_type(const std::string& dtype, const std::string& where,
                       const std::string& what) {
  if (dtype == "float32")
    return {4, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT};
  if (dtype == "bfloat16")
    return {2, H5T_STD_U16LE, H5T_NATIVE_UINT16};
  fail(where, cat(what, ": dtype '", dtype, "' is not supported (float32, bfloat16)"));
}

void read_block(hid_t dset, const std::vector<std::int64_t>& origin,
                const std::vector<std::int64_t>& shape, float* dst, const std::string& where,
                const std::string& what) {
  read_block(dset, origin, shape, static_cast<void*>(dst), H5T_NATIVE_FLOAT, where, what);
}

void read_block(hid_t dset, const std::vector<std::int64_t>& origin,
                const std::vector<std::int64_t>& shape, void* dst, hid_t memory,
                const std::string& where, const std::string& what) {
  if (shape.empty()) {
    if (H5Dread(dset, memory, H5S_ALL, H5S_ALL, H5P_DEFAULT, dst) < 0)
      read_failed(where, what);
    return;
  }
  if (product(shape) == 0)
    return;
  H5Id fspace(h5(H5Dget_space(dset), where, "H5Dget_space"), H5Sclose);
  const auto start = hsizes(origin), count = hsizes(shape);
  h5ok(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr),
       where, cat("selecting ", what));
  H5Id mspace(h5(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr), where,
                 "H5Screate_simple"),
              H5Sclose);
  if (H5Dread(dset, memory, mspace, fspace, H5P_DEFAULT, dst) < 0)
    read_failed(where, what);
}

// SHA-256 of the block [origin, origin + shape) of a dataset, read in pieces along dim 0.
// How the slices are written. Each slice is one contiguous chunk written by one rank. When the
// ranks span several nodes the data is written with collective MPI-IO and ROMIO's defaults (and
// the file system's driver) decide on aggregation. When every rank shares one node (one file
// system client) aggregation only adds copies and synchronisation: collective buffering and data
// sieving are disabled and each rank writes its chunk with independent MPI-IO (measured 3-6x
// faster on 2 and 4 ranks of one node; docs/checkpoint-format.md). Dataset creation and all
// other metadata stay collective. Overrides: MTK_CKPT_MPIIO=collective|independent,
// MTK_CKPT_MPIIO_HINTS="key=value,key=value" (e.g. romio_cb_write=enable,cb_nodes=8).
H5Id write_fapl(const Communicator& comm, bool* collective, const std::string& where) {
  const bool one_node = comm.min(comm.split_node().size() == comm.size() ? 1 : 0) != 0;
  *collective = !one_node;
  const RuntimeOptions& options = runtime_options();
  if (options.ckpt_mpiio() == "collective")
    *collective = true;
  else if (options.ckpt_mpiio() == "independent")
    *collective = false;
  std::vector<std::pair<std::string, std::string>> hints;
  if (one_node) {
    hints.emplace_back("romio_cb_write", "disable");
    hints.emplace_back("romio_ds_write", "disable");
  }
  for (const auto& hint : options.ckpt_mpiio_hints())
    hints.push_back(hint);
  H5Id fapl(h5(H5Pcreate(H5P_FILE_ACCESS), where, "H5Pcreate(file access)"), H5Pclose);
  const MpiInfo info(hints);
  h5ok(H5Pset_fapl_mpio(fapl, mpi_comm(comm), info.get()), where, "H5Pset_fapl_mpio");
  // v1.10 format: checksummed object headers and chunk indexes (readers need HDF5 >= 1.10).
  h5ok(H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110), where, "H5Pset_libver_bounds");
  h5ok(H5Pset_all_coll_metadata_ops(fapl, true), where, "H5Pset_all_coll_metadata_ops");
  h5ok(H5Pset_coll_metadata_write(fapl, true), where, "H5Pset_coll_metadata_write");
  return fapl;
}

void check_dataset(hid_t dset, const CheckpointVariable& v, const std::string& file,
                   const std::string& where) {
  const std::string what = cat("dataset '", v.dataset, "' in ", file);
  H5Id type(h5(H5Dget_type(dset), where, "H5Dget_type"), H5Tclose);
  const bool bf16 = v.dtype == "bfloat16";  // metadata.cpp admits float32 and bfloat16 only
  if (H5Tget_class(type) != (bf16 ? H5T_INTEGER : H5T_FLOAT) || H5Tget_size(type) != (bf16 ? 2 : 4))
    fail(where, cat(what, " (variable '", v.name, "') is not ", v.dtype,
                    bf16 ? " (16-bit patterns)" : ""));
  H5Id space(h5(H5Dget_space(dset), where, "H5Dget_space"), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space);
  if (rank < 0)
    h5ok(-1, where, cat("reading the shape of ", what));
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  if (rank > 0)
    H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  const std::vector<std::int64_t> stored(dims.begin(), dims.end());
  if (stored != sizes_of(v.shape))
    fail(where, cat("variable '", v.name, "': ", what, " has shape ", bracket(stored),
                    " but metadata.yaml says ", v.shape.to_string()));
  std::string names;
  if (!read_string_attribute(dset, "dims", &names, where, what))
    fail(where, cat(what, " has no 'dims' attribute"));
  std::string expected;
  for (const auto& n : v.shape.names())
    expected += (expected.empty() ? "" : ",") + n;
  if (names != expected)
    fail(where, cat("variable '", v.name, "': ", what, " has dims '", names,
                    "' but metadata.yaml says '", expected, "'"));
}

}  // namespace mtk::ckpt
