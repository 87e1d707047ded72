// Verifying a checkpoint directory on any number of ranks: manifest, metadata against the
// datasets, tiling of the recorded slices, and every slice's SHA-256.

#include <mtk/base/error.hpp>
#include <mtk/checkpoint/impl/format.hpp>
#include <mtk/checkpoint/impl/hashes.hpp>
#include <mtk/checkpoint/impl/hdf5.hpp>
#include <mtk/checkpoint/impl/manifest.hpp>
#include <mtk/checkpoint/impl/metadata.hpp>
#include <mtk/files/files.hpp>

#include <set>

namespace mtk {
namespace ckpt {
namespace {

struct VerifyCounts {
  std::int64_t bytes = 0, slices = 0;
};

// Rank 0: the file size recorded in slices.sha256, the tiling of every variable, and no slices of
// unknown variables.
void check_tables(const std::string& h5path, const StoredCheckpoint& st, const SliceTable& table,
                  std::vector<std::string>* errors) {
  const auto by_name = records_by_name(table);
  const std::string size_problem = file_size_problem(h5path, table);
  if (!size_problem.empty())
    errors->push_back(size_problem);
  std::set<std::string> known;
  for (const auto& v : st.vars) {
    known.insert(v.name);
    std::vector<const SliceRecord*> recs;
    auto it = by_name.find(v.name);
    if (it != by_name.end())
      for (size_t k : it->second)
        recs.push_back(&table.slices[k]);
    check_tiling(v, recs, errors);
  }
  for (const auto& [name, idx] : by_name)
    if (!known.count(name))
      errors->push_back(
          cat(kSlicesFile, " records slices of '", name, "', which metadata.yaml does not list"));
}

// Hashes the slices of `v` with index idx % size == rank and compares them with the record.
void check_variable_slices(hid_t dset, const CheckpointVariable& v, const SliceTable& table,
                           const std::vector<size_t>& records, int rank, int size,
                           const std::string& h5path, VerifyCounts* counts,
                           std::vector<std::string>* errors, const std::string& where) {
  for (size_t idx : records) {
    if (static_cast<int>(idx % size) != rank)
      continue;
    const SliceRecord& r = table.slices[idx];
    const std::string what = cat("variable '", v.name, "' ", v.shape.to_string());
    try {
      const std::string sha = hash_dataset_block(dset, r.origin, r.shape, &counts->bytes, where,
                                                 cat("slice ", bracket(r.origin), " of ", what));
      ++counts->slices;
      if (sha != r.sha)
        errors->push_back(cat(what, ": the slice at origin ", bracket(r.origin), " shape ",
                              bracket(r.shape), " in ", h5path, " is corrupted (SHA-256 ", sha,
                              ", recorded ", r.sha, ")"));
    } catch (const std::exception& e) {
      errors->push_back(e.what());
    }
  }
}

// Every rank: checks dataset k against its metadata when k % size == rank, and hashes its share
// of the slices.
void check_datasets(const std::string& dir, const StoredCheckpoint& st, const SliceTable& table,
                    int rank, int size, VerifyCounts* counts, std::vector<std::string>* errors,
                    const std::string& where) {
  const std::string h5path = dir + "/" + kVariablesFile;
  const auto by_name = records_by_name(table);
  if (rank == 0)
    check_tables(h5path, st, table, errors);
  H5Id fapl = read_fapl(where);
  H5Id file(h5(H5Fopen(h5path.c_str(), H5F_ACC_RDONLY, fapl), where, cat("opening '", h5path, "'")),
            H5Fclose);
  for (size_t k = 0; k < st.vars.size(); ++k) {
    const auto& v = st.vars[k];
    auto it = by_name.find(v.name);
    const bool mine_to_check = rank == static_cast<int>(k % static_cast<size_t>(size));
    bool any_slice = false;
    if (it != by_name.end())
      for (size_t idx : it->second)
        any_slice |= static_cast<int>(idx % size) == rank;
    if (!mine_to_check && !any_slice)
      continue;
    H5Id dset(h5(H5Dopen2(file, v.dataset.c_str(), H5P_DEFAULT), where,
                 cat("opening dataset '", v.dataset, "' of variable '", v.name, "' in ", h5path)),
              H5Dclose);
    try {
      if (mine_to_check)
        check_dataset(dset, v, h5path, where);
    } catch (const std::exception& e) {
      errors->push_back(e.what());
      continue;
    }
    if (it != by_name.end())
      check_variable_slices(dset, v, table, it->second, rank, size, h5path, counts, errors, where);
  }
}

}  // namespace
}  // namespace ckpt

CheckpointVerification verify_checkpoint(const std::string& dir_in, const Communicator& comm) {
  using namespace ckpt;
  const std::string where = "mtk::verify_checkpoint";
  const std::string dir = strip_trailing_slashes(dir_in);
  quiet_hdf5();
  const int rank = comm.rank(), size = comm.size();
  CheckpointVerification result;
  result.path = dir;
  std::vector<std::string> errors;
  std::string metadata_text, slices_text;
  bool fatal = false;
  if (rank == 0) {
    try {
      read_small_files(dir, &metadata_text, &slices_text, &errors, where);
    } catch (const std::exception& e) {
      errors.push_back(e.what());
      fatal = true;
    }
  }
  fatal = comm.broadcast(fatal);
  StoredCheckpoint st;
  SliceTable table;
  if (!fatal) {
    metadata_text = comm.broadcast(std::move(metadata_text));
    slices_text = comm.broadcast(std::move(slices_text));
    try {  // the same texts on every rank: the same outcome
      st = parse_metadata(metadata_text, dir + "/" + kMetadataFile, where);
      table = parse_slices(slices_text, dir + "/" + kSlicesFile, where);
    } catch (const std::exception& e) {
      if (rank == 0)
        errors.push_back(e.what());
      fatal = true;
    }
  }
  VerifyCounts counts;
  if (!fatal) {
    try {
      check_datasets(dir, st, table, rank, size, &counts, &errors, where);
    } catch (const std::exception& e) {
      errors.push_back(e.what());
    }
  }
  // Every rank's findings, in rank order, on every rank: every rank returns the same result.
  std::string mine;
  for (const auto& e : errors)
    mine += e + "\n";
  std::string report;
  for (const auto& s : comm.allgather(mine))
    report += s;
  const auto sums = comm.sum(std::vector<std::int64_t>{counts.bytes, counts.slices});
  const auto lines = split_lines(report);
  for (size_t i = 0; i < lines.size() && i < kMaxReportedErrors; ++i)
    result.errors.push_back(lines[i]);
  if (lines.size() > kMaxReportedErrors)
    result.errors.push_back(cat("... and ", lines.size() - kMaxReportedErrors, " more problems"));
  result.ok = lines.empty();
  result.variables = static_cast<std::int64_t>(st.vars.size());
  result.bytes_hashed = sums[0];
  result.slices = sums[1];
  return result;
}

}  // namespace mtk
