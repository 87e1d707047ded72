// Writing a checkpoint directory: variables.h5 by collective parallel HDF5, then the slice
// hashes, metadata and manifest by rank 0 (docs/checkpoint-format.md).

#include <mtk/base/error.hpp>
#include <mtk/checkpoint/impl/format.hpp>
#include <mtk/checkpoint/impl/hashes.hpp>
#include <mtk/checkpoint/impl/hdf5.hpp>
#include <mtk/checkpoint/impl/manifest.hpp>
#include <mtk/checkpoint/impl/metadata.hpp>
#include <mtk/checkpoint/impl/test_hooks.hpp>
#include <mtk/checkpoint/impl/timing.hpp>
#include <mtk/checkpoint/impl/writer.hpp>
#include <mtk/files/files.hpp>
#include <mtk/files/sha256.hpp>
#include <mtk/version.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <thread>

namespace mtk {
namespace ckpt {

namespace fs = std::filesystem;

namespace {

std::vector<CheckpointVariable> describe_variables(Program& program, const std::string& where) {
  std::vector<CheckpointVariable> vars;
  for (const auto& name : program.variable_names()) {
    const TensorLayout& l = program.variable_layout(name);
    CheckpointVariable v;
    v.name = name;
    v.shape = l.shape();
    v.slice_shape = l.slice_shape();
    // Each variable as it is stored: float32, or bfloat16 in 2 bytes (hdf5.hpp, StoredType).
    const DType stored = program.variable_storage_dtype(name);
    v.dtype = dtype_name(stored);
    v.dataset = dataset_path(name, where);
    v.layout = l.to_string();
    v.bytes = v.shape.num_elements() * static_cast<std::int64_t>(dtype_bytes(stored));
    const auto slice = program.variable_slice_float32(name);
    if ((stored != DType::float32 && stored != DType::bfloat16) ||
        static_cast<std::int64_t>(slice.extent(0)) != v.slice_shape.num_elements())
      fail(where, cat("variable '", name, "' ", v.shape.to_string(), " of ", v.dtype,
                      ": its storage holds ", slice.extent(0), " float32 values, its slice ",
                      v.slice_shape.to_string(), " needs ", v.slice_shape.num_elements(),
                      " (only float32 and bfloat16 variables can be saved)"));
    vars.push_back(v);
  }
  return vars;
}

// Chunk = the slice shape, halved along its largest dim while one chunk exceeds HDF5's 4 GiB
// limit (kept under 1 GiB).
std::vector<hsize_t> chunk_dims(const Shape& slice) {
  std::vector<hsize_t> c;
  for (const auto& d : slice.dims())
    c.push_back(static_cast<hsize_t>(d.size));
  auto bytes = [&] {
    hsize_t b = 4;
    for (auto x : c)
      b *= x;
    return b;
  };
  while (bytes() > (hsize_t(1) << 30)) {
    auto it = std::max_element(c.begin(), c.end());
    *it = (*it + 1) / 2;
  }
  return c;
}

// This rank's slice of one variable on the host, and whether this rank writes it (one member of
// each replica group).
struct HostSlice {
  bool writer = false;
  std::vector<std::int64_t> origin;
  Kokkos::View<float*, Kokkos::HostSpace> host;
  std::vector<std::uint16_t> bf16;  // a bfloat16 variable's bit patterns (host: its float32 values)
  // The values as written and hashed, and their size.
  const void* data() const {
    return bf16.empty() ? static_cast<const void*>(host.data()) : bf16.data();
  }
  std::size_t bytes() const {
    return bf16.empty() ? host.extent(0) * sizeof(float) : bf16.size() * sizeof(std::uint16_t);
  }
};

// What HDF5 did on the last write through `dxpl` (collective MPI-IO or not), in words.
std::string actual_io_mode(hid_t dxpl, const std::string& where) {
  H5D_mpio_actual_io_mode_t mode = H5D_MPIO_NO_COLLECTIVE;
  h5ok(H5Pget_mpio_actual_io_mode(dxpl, &mode), where, "H5Pget_mpio_actual_io_mode");
  switch (mode) {
    case H5D_MPIO_NO_COLLECTIVE:
      return "independent";
    case H5D_MPIO_CHUNK_INDEPENDENT:
      return "chunk-independent";
    case H5D_MPIO_CHUNK_COLLECTIVE:
      return "chunk-collective";
    case H5D_MPIO_CHUNK_MIXED:
      return "chunk-mixed";
    case H5D_MPIO_CONTIGUOUS_COLLECTIVE:
      return "contiguous-collective";
  }
  return "unknown";
}

std::vector<HostSlice> host_slices(Program& program, const std::vector<CheckpointVariable>& vars) {
  const Mesh& mesh = program.mesh();
  std::vector<HostSlice> slices(vars.size());
  for (size_t k = 0; k < vars.size(); ++k) {
    const TensorLayout& layout = program.variable_layout(vars[k].name);
    HostSlice& sl = slices[k];
    sl.writer = mesh.rank_in_group(layout.replicated_axes()) == 0;
    const auto origin = layout.slice_origin(mesh.coordinates());
    sl.origin.assign(origin.begin(), origin.end());
    sl.host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(),
                                                  program.variable_slice_float32(vars[k].name));
    if (vars[k].dtype == "bfloat16") {
      // Widened bf16 values: the top 16 bits of each float are the pattern, the rest zero.
      sl.bf16.resize(sl.host.extent(0));
      for (size_t i = 0; i < sl.bf16.size(); ++i) {
        std::uint32_t u = 0;
        std::memcpy(&u, &sl.host(i), sizeof u);
        sl.bf16[i] = static_cast<std::uint16_t>(u >> 16);
      }
    }
  }
  return slices;
}

// Collective: creates the dataset of `v` in `file` and writes this rank's slice when it is the
// writer. `*tc` marks the end of the previous write (timing).
void write_dataset(hid_t file, hid_t lcpl, hid_t dxpl, const CheckpointVariable& v,
                   const HostSlice& sl, bool fletcher32, double* tc, const std::string& where) {
  const std::string what = cat("variable '", v.name, "' ", v.shape.to_string());
  const auto global = hsizes(sizes_of(v.shape));
  const auto local = sizes_of(v.slice_shape);
  const bool scalar = v.shape.rank() == 0;
  const bool empty = v.shape.num_elements() == 0;
  H5Id fspace(h5(scalar ? H5Screate(H5S_SCALAR)
                        : H5Screate_simple(static_cast<int>(global.size()), global.data(), nullptr),
                 where, cat("dataspace of ", what)),
              H5Sclose);
  H5Id dcpl(h5(H5Pcreate(H5P_DATASET_CREATE), where, "H5Pcreate(dataset create)"), H5Pclose);
  if (!scalar && !empty) {
    const auto chunk = chunk_dims(v.slice_shape);
    h5ok(H5Pset_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data()), where,
         cat("H5Pset_chunk for ", what));
    // HDF5's own per-chunk checksum, checked by every HDF5 reader (h5py, h5dump) on each read.
    if (fletcher32)
      h5ok(H5Pset_fletcher32(dcpl), where, cat("H5Pset_fletcher32 for ", what));
  }
  h5ok(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER), where, "H5Pset_fill_time");
  h5ok(H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY), where, "H5Pset_alloc_time");
  const StoredType type = stored_type(v.dtype, where, what);
  H5Id dset(h5(H5Dcreate2(file, v.dataset.c_str(), type.file, fspace, lcpl, dcpl, H5P_DEFAULT),
               where, cat("creating dataset '", v.dataset, "' for ", what)),
            H5Dclose);
  std::string dims;
  for (const auto& d : v.shape.names())
    dims += (dims.empty() ? "" : ",") + d;
  write_string_attribute(dset, "dims", dims, where, what);
  write_string_attribute(dset, "mtk_name", v.name, where, what);
  write_string_attribute(dset, "mtk_layout", v.layout, where, what);

  add_time("h5_create", wall_seconds() - *tc);
  float dummy = 0;
  const void* data = sl.bytes() > 0 ? sl.data() : &dummy;
  // The memory space has the slice's own shape: HDF5 then maps it onto the chunk as one
  // block (a flat 1-D memory space makes it project row by row, ~20x slower).
  const auto mdims = hsizes(local);
  H5Id mspace(h5(scalar ? H5Screate(H5S_SCALAR)
                        : H5Screate_simple(static_cast<int>(mdims.size()), mdims.data(), nullptr),
                 where, "H5Screate"),
              H5Sclose);
  if (sl.writer && !empty) {
    if (!scalar) {
      const auto start = hsizes(sl.origin), count = hsizes(local);
      h5ok(
          H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr),
          where, cat("selecting the slice of ", what));
    }
  } else {
    h5ok(H5Sselect_none(fspace), where, "H5Sselect_none");
    h5ok(H5Sselect_none(mspace), where, "H5Sselect_none");
  }
  const double t0 = wall_seconds();
  h5ok(H5Dwrite(dset, type.memory, mspace, fspace, dxpl, data), where,
       cat("writing the slice of ", what, " at origin ", bracket(sl.origin)));
  add_time("h5_write", wall_seconds() - t0);
}

// Collective: creates variables.h5 and writes every variable, each slice by its replica group's
// first member. Returns the SHA-256 records of the slices this rank wrote.
// Fletcher32 (checkpoint.fletcher32) is off by default: parallel HDF5 1.10 allocates chunks at
// creation and passes each through the filter then (every chunk is written twice), and filtered
// writes must be collective: saves took 2-6x as long (docs/checkpoint-format.md#performance).
std::vector<SliceRecord> write_variables(Program& program,
                                         const std::vector<CheckpointVariable>& vars,
                                         const std::string& path, const CheckpointOptions& options,
                                         const std::string& where) {
  const std::vector<HostSlice> slices = host_slices(program, vars);
  std::vector<SliceRecord> mine;
  std::vector<size_t> mine_of;  // index in `slices` of each record of `mine`
  for (size_t k = 0; k < vars.size(); ++k)
    if (slices[k].writer) {
      mine.push_back({vars[k].name, slices[k].origin, sizes_of(vars[k].slice_shape), ""});
      mine_of.push_back(k);
    }
  // A second thread hashes the slices from memory while this one writes and waits for the
  // disk; it makes no MPI or HDF5 call.
  std::thread hasher([&mine, &mine_of, &slices] {
    for (size_t r = 0; r < mine.size(); ++r) {
      const HostSlice& sl = slices[mine_of[r]];
      mine[r].sha = sha256_hex(sl.data(), sl.bytes());
    }
  });
  struct Join {
    std::thread& t;
    ~Join() {
      if (t.joinable())
        t.join();
    }
  } join{hasher};

  double tc = wall_seconds();
  bool collective = true;
  H5Id fapl = write_fapl(program.mesh().comm(), &collective, where);
  if (options.collective)  // the caller's choice over MTK_CKPT_MPIIO's
    collective = *options.collective;
  const bool fletcher32 = options.fletcher32;
  H5Id file(h5(H5Fcreate(path.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, fapl), where,
               cat("creating '", path, "'")),
            H5Fclose);
  H5Id lcpl(h5(H5Pcreate(H5P_LINK_CREATE), where, "H5Pcreate(link create)"), H5Pclose);
  h5ok(H5Pset_create_intermediate_group(lcpl, 1), where, "H5Pset_create_intermediate_group");
  h5ok(H5Pset_char_encoding(lcpl, H5T_CSET_UTF8), where, "H5Pset_char_encoding");
  // Parallel HDF5 writes filtered datasets only with collective transfers.
  if (fletcher32)
    collective = true;
  H5Id dxpl(h5(H5Pcreate(H5P_DATASET_XFER), where, "H5Pcreate(transfer)"), H5Pclose);
  h5ok(H5Pset_dxpl_mpio(dxpl, collective ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT), where,
       "H5Pset_dxpl_mpio");
  h5ok(H5Pset_dxpl_mpio_chunk_opt(dxpl, H5FD_MPIO_CHUNK_ONE_IO), where,
       "H5Pset_dxpl_mpio_chunk_opt");
  for (size_t k = 0; k < vars.size(); ++k) {
    write_dataset(file, lcpl, dxpl, vars[k], slices[k], fletcher32, &tc, where);
    if (k == 0)
      test_hook("first_dataset");
    test_delay();
    tc = wall_seconds();
  }
  add_note("mpiio", cat(collective ? "collective" : "independent",
                        "(hdf5:", actual_io_mode(dxpl, where), ")"));
  // A flush syncs the file on every rank (the mpio driver syncs on a flush that is not a
  // close), then the close.
  double t0 = wall_seconds();
  h5ok(H5Fflush(file, H5F_SCOPE_GLOBAL), where, cat("flushing '", path, "'"));
  dxpl.reset();
  lcpl.reset();
  h5ok(H5Fclose(file.release()), where, cat("closing '", path, "'"));
  add_time("h5_flush_close", wall_seconds() - t0);
  t0 = wall_seconds();
  hasher.join();
  add_time("hash_wait", wall_seconds() - t0);
  return mine;
}

}  // namespace

void write_directory(Program& program, const std::string& dir, const CheckpointMetadata& meta_in,
                     const CheckpointOptions& options, const std::string& where) {
  quiet_hdf5();
  const Mesh& mesh = program.mesh();
  const Communicator& comm = mesh.comm();
  const bool root = mesh.rank() == 0;
  CheckpointMetadata meta = meta_in;
  if (meta.step < 0)
    meta.step = program.step();
  meta.program_step = program.step();
  if (meta.mesh.empty())
    meta.mesh = mesh.shape().to_string();
  meta.mtk_version = mtk::version();
  meta.format_version = std::to_string(kCheckpointFormatVersion);
  meta.num_ranks = mesh.size();
  meta.created_utc = now_utc();

  std::vector<CheckpointVariable> vars;
  std::string metadata_text;
  double t0 = wall_seconds();
  agree_on_failure(comm, [&] {
    vars = describe_variables(program, where);
    if (root) {
      metadata_text = emit_metadata(meta, vars, where);
      // The text must read back to exactly what was given (YAML quoting, multi-line strings).
      const StoredCheckpoint back = parse_metadata(metadata_text, "metadata being written", where);
      const auto& b = back.meta;
      if (b.config_yaml != meta.config_yaml || b.data_position != meta.data_position ||
          b.rng_state != meta.rng_state || b.mesh != meta.mesh || b.layout != meta.layout ||
          b.step != meta.step || back.vars.size() != vars.size())
        fail(where, "the metadata does not read back from YAML unchanged");
    }
    if (root) {
      std::error_code ec;
      if (fs::exists(dir, ec))
        fail(where, cat("'", dir, "' already exists"));
      if (!fs::create_directory(dir, ec))
        fail(where, cat("cannot create '", dir, "': ", ec.message()));
    }
  });
  test_hook("created_dir");
  add_time("prepare", wall_seconds() - t0);
  const std::string h5path = dir + "/" + kVariablesFile;
  const std::vector<SliceRecord> mine = agree_on_failure(
      comm, [&] { return write_variables(program, vars, h5path, options, where); });
  test_hook("wrote_data");
  t0 = wall_seconds();

  std::string lines;
  for (const auto& r : mine)
    lines += slice_line(r);
  const std::vector<std::string> all = comm.gather(lines);
  agree_on_failure(comm, [&] {
    if (!root)
      return;
    SliceTable table;
    std::string joined;
    for (const auto& s : all)
      joined += s;
    table = parse_slices("file 0 variables.h5\n" + joined, "gathered slice hashes", where);
    std::map<std::string, size_t> order;
    for (size_t k = 0; k < vars.size(); ++k)
      order[vars[k].name] = k;
    std::sort(table.slices.begin(), table.slices.end(),
              [&](const SliceRecord& a, const SliceRecord& b) {
                const size_t ia = order.at(a.name), ib = order.at(b.name);
                return ia != ib ? ia < ib : a.origin < b.origin;
              });
    fsync_path(h5path, false, where);
    const auto bytes = static_cast<std::int64_t>(fs::file_size(h5path));
    std::string slices_text = cat(
        "# MTK checkpoint slice hashes (docs/checkpoint-format.md): SHA-256 of each saved "
        "slice's\n# float32 little-endian values (bfloat16: 16-bit patterns) in row-major order; "
        "origin and shape per dim, '-' for a scalar.\n# slice <sha256> <origin> <shape> "
        "<variable>\nfile ",
        bytes, " ", kVariablesFile, "\n");
    for (const auto& r : table.slices)
      slices_text += slice_line(r);
    write_file_durably(dir + "/" + kSlicesFile, slices_text, where);
    write_file_durably(dir + "/" + kMetadataFile, metadata_text, where);
    write_file_durably(dir + "/" + kManifestFile, manifest_text(metadata_text, slices_text), where);
    fsync_path(dir, true, where);
  });
  add_time("manifest", wall_seconds() - t0);
  test_hook("wrote_manifest");
}

}  // namespace ckpt

std::string checkpoint_dir_name(std::int64_t step) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "step-%09lld", static_cast<long long>(step));
  return buf;
}

void write_checkpoint_directory(Program& program, const std::string& dir,
                                const CheckpointMetadata& metadata,
                                const CheckpointOptions& options) {
  ckpt::write_directory(program, strip_trailing_slashes(dir), metadata, options,
                        "mtk::write_checkpoint_directory");
}

}  // namespace mtk
