// Restoring a checkpoint onto any mesh and layout: each rank reads its own hyperslab of every
// variable and checks the saved slices against their hashes (docs/checkpoint-format.md).

#include <mtk/base/error.hpp>
#include <mtk/base/exec_space.hpp>
#include <mtk/checkpoint/impl/format.hpp>
#include <mtk/checkpoint/impl/hashes.hpp>
#include <mtk/checkpoint/impl/hdf5.hpp>
#include <mtk/checkpoint/impl/manifest.hpp>
#include <mtk/checkpoint/impl/metadata.hpp>
#include <mtk/checkpoint/impl/timing.hpp>
#include <mtk/checkpoint/init_from.hpp>
#include <mtk/files/files.hpp>
#include <mtk/kernels/bfloat16.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstdio>
#include <map>
#include <vector>

namespace mtk {
namespace ckpt {
namespace {

// What a restore reads: the stored checkpoint, its slices, and the stored entry of each of the
// program's variables, in the program's order (pointers into st.vars: not copied).
struct RestorePlan {
  StoredCheckpoint st;
  SliceTable table;
  std::map<std::string, std::vector<size_t>> by_name;
  std::vector<const CheckpointVariable*> vars;
};

// The stored entry of each of `names` (program variables) in `stored`, in order; every variable
// missing or of another shape is named in one error, with both shapes.
std::vector<const CheckpointVariable*> match_variables(
    const Program& program, const std::vector<std::string>& names,
    const std::map<std::string, const CheckpointVariable*>& stored, const std::string& path,
    const std::string& where) {
  std::vector<const CheckpointVariable*> out;
  std::vector<std::string> problems;
  bool missing = false;
  for (const auto& name : names) {
    const Shape& expected = program.variable_layout(name).shape();
    auto it = stored.find(name);
    if (it == stored.end()) {
      problems.push_back(
          cat("variable '", name, "' ", expected.to_string(), " is not in checkpoint ", path));
      missing = true;
    } else if (it->second->shape != expected) {
      problems.push_back(cat("variable '", name, "': checkpoint ", path, " stores shape ",
                             it->second->shape.to_string(), ", the program expects ",
                             expected.to_string()));
    } else {
      out.push_back(it->second);
    }
  }
  if (problems.empty())
    return out;
  std::string text = problems.size() == 1
                         ? problems.front()
                         : cat(problems.size(), " variables do not match: ", problems.front());
  for (size_t k = 1; k < problems.size(); ++k)
    text += "; " + problems[k];
  if (missing) {
    std::string held;
    for (const auto& kv : stored)
      held += (held.empty() ? "" : ", ") + kv.first;
    text += cat(" (it holds: ", held, ")");
  }
  fail(where, text);
}

// Collective. Rank 0 reads the small files and checks them against the manifest; every rank then
// parses the same texts and matches them with the program's variables `names`.
void plan_restore(Program& program, const std::string& path, const std::vector<std::string>& names,
                  const std::string& where, RestorePlan* plan) {
  const Mesh& mesh = program.mesh();
  const Communicator& comm = mesh.comm();
  std::string metadata_text, slices_text;
  agree_on_failure(comm, [&] {
    if (mesh.rank() != 0)
      return;
    std::vector<std::string> errors;
    read_small_files(path, &metadata_text, &slices_text, &errors, where);
    if (!errors.empty())
      fail(where, errors.front());
  });
  metadata_text = comm.broadcast(std::move(metadata_text));
  slices_text = comm.broadcast(std::move(slices_text));

  agree_on_failure(comm, [&] {
    plan->st = parse_metadata(metadata_text, path + "/" + kMetadataFile, where);
    plan->table = parse_slices(slices_text, path + "/" + kSlicesFile, where);
    plan->by_name = records_by_name(plan->table);
    // Same rule as verify: a variables.h5 of another size than recorded is refused.
    if (mesh.rank() == 0) {
      const std::string size_problem = file_size_problem(path + "/" + kVariablesFile, plan->table);
      if (!size_problem.empty())
        fail(where, cat("checkpoint ", path, ": ", size_problem));
    }
    std::map<std::string, const CheckpointVariable*> stored;
    for (const auto& v : plan->st.vars)
      stored[v.name] = &v;
    plan->vars = match_variables(program, names, stored, path, where);
    std::vector<std::string> errors;
    for (const CheckpointVariable* v : plan->vars) {
      std::vector<const SliceRecord*> recs;
      for (size_t k : plan->by_name[v->name])
        recs.push_back(&plan->table.slices[k]);
      check_tiling(*v, recs, &errors);
      if (!errors.empty())
        fail(where, cat("checkpoint ", path, ": ", errors.front()));
    }
  });
}

// Checks the recorded slices of `v` that fall to this rank: one that holds all of a slice when
// some do (hashed from memory on the worker thread), else one chosen round-robin (read again
// from the file). `host` holds this rank's block (origin, local).
void check_slices(const Program& program, const RestorePlan& plan, const CheckpointVariable& v,
                  hid_t dset, const void* host, std::size_t value_bytes,
                  const std::vector<std::int64_t>& origin, const std::vector<std::int64_t>& local,
                  const std::string& h5path, HashWorker& worker, std::vector<std::string>* errors,
                  const std::string& where) {
  const Mesh& mesh = program.mesh();
  const TensorLayout& layout = program.variable_layout(v.name);
  const std::string what = cat("variable '", v.name, "' ", v.shape.to_string());
  std::vector<std::vector<std::int64_t>> origins(static_cast<size_t>(mesh.size()));
  for (int p = 0; p < mesh.size(); ++p) {
    const auto o = layout.slice_origin(mesh.shape().coordinates_of(p));
    origins[static_cast<size_t>(p)].assign(o.begin(), o.end());
  }
  const auto found = plan.by_name.find(v.name);
  if (found == plan.by_name.end())
    return;
  for (size_t idx : found->second) {
    const SliceRecord& r = plan.table.slices[idx];
    std::vector<int> holders;
    for (int p = 0; p < mesh.size(); ++p)
      if (contains(origins[static_cast<size_t>(p)], local, r.origin, r.shape))
        holders.push_back(p);
    const int checker =
        holders.empty() ? static_cast<int>(idx % mesh.size()) : holders[idx % holders.size()];
    if (checker != mesh.rank())
      continue;
    const std::string slice = cat(what, ": the slice at origin ", bracket(r.origin), " shape ",
                                  bracket(r.shape), " in ", h5path);
    if (!holders.empty()) {
      worker.push({host, origin, local, r.origin, r.shape, r.sha, slice, value_bytes});
      continue;
    }
    std::int64_t bytes = 0;
    const std::string sha = hash_dataset_block(dset, r.origin, r.shape, &bytes, where, what);
    if (sha != r.sha)
      errors->push_back(cat(slice, " is corrupted (SHA-256 ", sha, ", recorded ", r.sha, ")"));
  }
}

// Every rank reads its own hyperslab of every variable (independently: a damaged file fails
// single ranks without hanging the others) into `views` and checks the saved slices assigned
// to it. Returns this rank's failure ("" when none).
std::string read_variables(Program& program, const std::string& path, const RestorePlan& plan,
                           std::vector<Kokkos::View<float*>>* views, const std::string& where) {
  const Mesh& mesh = program.mesh();
  double t0 = wall_seconds();
  std::vector<Kokkos::View<float*>::HostMirror> hosts(plan.vars.size());
  std::vector<std::vector<std::uint16_t>> bf16(plan.vars.size());  // as stored, for the hashes
  std::vector<std::string> errors;
  std::string local_failure;
  {
    HashWorker worker;
    try {
      const std::string h5path = path + "/" + kVariablesFile;
      H5Id fapl = read_fapl(where);
      H5Id file(
          h5(H5Fopen(h5path.c_str(), H5F_ACC_RDONLY, fapl), where, cat("opening '", h5path, "'")),
          H5Fclose);
      for (size_t k = 0; k < plan.vars.size(); ++k) {
        const CheckpointVariable& v = *plan.vars[k];
        const TensorLayout& layout = program.variable_layout(v.name);
        const std::string what = cat("variable '", v.name, "' ", v.shape.to_string());
        H5Id dset(h5(H5Dopen2(file, v.dataset.c_str(), H5P_DEFAULT), where,
                     cat("opening dataset '", v.dataset, "' of ", what, " in ", h5path)),
                  H5Dclose);
        check_dataset(dset, v, h5path, where);
        const auto origin64 = layout.slice_origin(mesh.coordinates());
        const std::vector<std::int64_t> origin(origin64.begin(), origin64.end());
        const auto local = sizes_of(layout.slice_shape());
        (*views)[k] = uninitialized_view<float>("mtk::checkpoint::" + v.name,
                                                layout.slice_shape().num_elements());
        hosts[k] = Kokkos::create_mirror_view((*views)[k]);
        const StoredType type = stored_type(v.dtype, where, what);
        const std::string block =
            cat("the slice at ", bracket(origin), " of ", what, " in ", h5path);
        const void* stored = hosts[k].data();
        if (type.bytes == 2) {  // bfloat16 patterns, widened exactly
          bf16[k].resize(hosts[k].extent(0));
          read_block(dset, origin, local, bf16[k].data(), type.memory, where, block);
          for (size_t i = 0; i < bf16[k].size(); ++i)
            hosts[k](i) = kernels::from_bfloat16_bits(bf16[k][i]);
          stored = bf16[k].data();
        } else {
          read_block(dset, origin, local, hosts[k].data(), where, block);
        }
        check_slices(program, plan, v, dset, stored, type.bytes, origin, local, h5path, worker,
                     &errors, where);
        Kokkos::deep_copy((*views)[k], hosts[k]);
      }
    } catch (const std::exception& e) {
      local_failure = e.what();
    }
    add_time("read", wall_seconds() - t0);
    t0 = wall_seconds();
    const auto mismatches = worker.finish();
    add_time("hash_wait", wall_seconds() - t0);
    errors.insert(errors.end(), mismatches.begin(), mismatches.end());
  }
  if (local_failure.empty() && !errors.empty())
    local_failure = cat(where, ": ", errors.front(),
                        errors.size() > 1 ? cat(" (and ", errors.size() - 1, " more)") : "");
  return local_failure;
}

// Restores the variables `names` of `program` from `path`; with `set_step`, Program::step() too.
void restore_named(Program& program, const std::string& path_in,
                   const std::vector<std::string>& names, bool set_step,
                   CheckpointMetadata* metadata, const std::string& where) {
  const std::string path = strip_trailing_slashes(path_in);
  quiet_hdf5();
  const Mesh& mesh = program.mesh();
  Kokkos::Profiling::pushRegion("mtk::restore_checkpoint");

  const double t0 = wall_seconds();
  RestorePlan plan;
  plan_restore(program, path, names, where, &plan);
  add_time("metadata", wall_seconds() - t0);
  std::vector<Kokkos::View<float*>> views(plan.vars.size());
  agree(mesh.comm(), read_variables(program, path, plan, &views, where));

  // Everything read and verified on every rank: commit into the program. Across dtypes:
  // bfloat16 into float32 widens exactly, float32 into bfloat16 rounds to nearest even (said once).
  int rounded = 0;
  for (size_t k = 0; k < plan.vars.size(); ++k) {
    const std::string& name = plan.vars[k]->name;
    if (plan.vars[k]->dtype == "float32" && program.variable_storage_dtype(name) == DType::bfloat16)
      ++rounded;
    program.set_variable_slice(name, views[k]);
  }
  if (rounded > 0 && mesh.rank() == 0) {
    std::printf("%s: %d float32 variables of %s rounded to their bfloat16 storage (nearest even)\n",
                where.c_str(), rounded, path.c_str());
    std::fflush(stdout);
  }
  const auto& meta = plan.st.meta;
  if (set_step)
    program.set_step(meta.program_step >= 0 ? meta.program_step : meta.step);
  if (metadata != nullptr)
    *metadata = meta;
  report_times(cat("restore ", path), mesh.rank() == 0);
  Kokkos::Profiling::popRegion();
}

}  // namespace
}  // namespace ckpt

void restore_checkpoint(Program& program, const std::string& path, CheckpointMetadata* metadata) {
  ckpt::restore_named(program, path, program.variable_names(), true, metadata,
                      "mtk::restore_checkpoint");
}

void restore_variables(Program& program, const std::string& path,
                       const std::vector<std::string>& names, CheckpointMetadata* metadata) {
  ckpt::restore_named(program, path, names, false, metadata, "mtk::restore_variables");
}

}  // namespace mtk
