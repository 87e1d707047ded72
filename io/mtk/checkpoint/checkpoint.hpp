#pragma once
// Sharded parallel-HDF5 checkpoints (docs/checkpoint-format.md).
//
//   run_dir/checkpoints/latest                 name of the last committed checkpoint
//   run_dir/checkpoints/step-000001000/
//     variables.h5      one dataset per variable (optimizer slots included) at its full global
//                       shape, written slice by slice with collective MPI-IO; any mesh reads it
//     metadata.yaml     step, resolved config, mesh, layout, data position, RNG state, versions,
//                       and every variable's dims
//     slices.sha256     SHA-256 of every saved slice (dataset, origin, shape)
//     manifest.sha256   SHA-256 of metadata.yaml and slices.sha256 (`sha256sum -c` reads it)
//
// A save writes into checkpoints/.tmp-step-...-<nonce>/, fsyncs, agrees across ranks, then rank 0
// renames it into place and replaces `latest` atomically: a crash at any moment leaves the
// previous checkpoint intact. Save, restore and verify are collective; every rank throws the same
// mtk::Error when any rank fails. No HDF5 or yaml-cpp type appears here.

#include <mtk/base/shape.hpp>
#include <mtk/parallel/communicator.hpp>
#include <mtk/parallel/mesh.hpp>
#include <mtk/runtime/program.hpp>

#include <cstdint>
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <vector>

namespace mtk {

/// Version of the on-disk layout described in docs/checkpoint-format.md.
inline constexpr int kCheckpointFormatVersion = 1;

/// How checkpoints are written (the run config's checkpoint.* keys that change the files).
struct CheckpointOptions {
  /// checkpoint.fletcher32: chunked datasets also carry HDF5's Fletcher32 checksum (saves take
  /// 2-6x as long with HDF5 1.10; writes become collective). Readers need nothing: HDF5 checks it.
  bool fletcher32 = false;
  /// Collective (true) or independent (false) MPI-IO data writes; unset: as MTK_CKPT_MPIIO says
  /// (auto: independent when every rank shares one node). Fletcher32 writes are always collective.
  std::optional<bool> collective;
};

/// What a checkpoint records besides the variables. The caller fills what it knows; save() fills
/// the rest. Strings are stored as YAML strings (any bytes but NUL; binary state is best hex- or
/// base64-encoded by the caller).
struct CheckpointMetadata {
  std::int64_t step = -1;          ///< training step (names the directory); -1: Program::step()
  std::int64_t program_step = -1;  ///< Program::step() at save time; restore sets it back
  std::string config_yaml;         ///< the resolved configuration, verbatim
  std::string mesh;                ///< mesh the run used; "" -> the program's mesh
  std::string layout;              ///< layout rules text ("batch:batch;d_ff:model")
  std::string data_position;       ///< opaque: where the data reader resumes
  std::string rng_state;           ///< opaque: host RNG state of the trainer
  std::string vocab_fingerprint;   ///< the vocabulary trained with (hex); "" unknown (older files)
  std::string mtk_version;         ///< filled by save()
  std::string format_version;      ///< filled by save()
  int num_ranks = 0;               ///< filled by save()
  std::string created_utc;         ///< filled by save(): "2024-05-01T12:00:00Z"
  /// Where the run's weights came from (`train --init-from`): YAML (WeightsOrigin, init_from.hpp);
  /// "" for a run that started from its initializers. Written only when set.
  std::string init_from;
};

/// One stored variable as metadata.yaml describes it.
struct CheckpointVariable {
  std::string name;
  Shape shape;             ///< global shape, dims named
  std::string dtype;       ///< "float32"
  std::string dataset;     ///< HDF5 path in variables.h5 ("/variables/<name>")
  std::string layout;      ///< layout it was saved with: "[d_model=512, d_ff=2048@model]"
  Shape slice_shape;       ///< slice shape (== HDF5 chunk shape) it was saved with
  std::int64_t bytes = 0;  ///< global size in bytes
};

/// Everything `mtk-ckpt info` shows.
struct CheckpointInfo {
  std::string path;  ///< the checkpoint directory
  CheckpointMetadata metadata;
  std::vector<CheckpointVariable> variables;
  std::int64_t variable_bytes = 0;  ///< sum of the variables' global sizes
  std::int64_t file_bytes = 0;      ///< size of the files on disk
};

/// Outcome of verify_checkpoint(): `ok`, or the problems found (each naming file, dataset,
/// slice and expected/actual values).
struct CheckpointVerification {
  std::string path;
  bool ok = false;
  std::vector<std::string> errors;
  std::int64_t variables = 0;
  std::int64_t slices = 0;
  std::int64_t bytes_hashed = 0;
};

/// Saves and restores the checkpoints of one run directory. Every call is collective over the
/// mesh's communicator (the programs given must live on a mesh of the same ranks). One job at a
/// time may save into a run directory.
class CheckpointManager {
 public:
  /// `keep_last_k` >= 1: older checkpoints are deleted after each successful save (renamed out of
  /// the way at once, their files removed in the background until the next save or the
  /// manager's destruction).
  CheckpointManager(std::string run_dir, int keep_last_k, const Mesh& mesh,
                    const CheckpointOptions& options = {});

  /// Writes every variable of `program` (slots included) and `metadata` to
  /// checkpoints/step-<step>/ and commits it atomically; returns its path. A checkpoint of the
  /// same step is replaced. Stale temporary directories of crashed saves are removed.
  std::string save(Program& program, const CheckpointMetadata& metadata);

  /// Restores the newest good checkpoint: the one `latest` names, else (corrupt, unreadable,
  /// incompatible) the previous ones by step, each refusal logged on rank 0 with its reason.
  /// Returns false (program untouched) when there is no checkpoint; throws when checkpoints
  /// exist but none can be restored. Every candidate is verified (slice hashes) while it is read.
  /// `path`, when given, receives the directory actually restored.
  bool restore_latest(Program& program, CheckpointMetadata* metadata = nullptr,
                      std::string* path = nullptr);

  /// Restores the checkpoint directory `path` (see restore_checkpoint()).
  void restore(Program& program, const std::string& path, CheckpointMetadata* metadata = nullptr);

  /// Committed-looking checkpoint directories (complete file set), oldest step first. Collective.
  std::vector<std::string> list() const;
  /// The checkpoint `latest` names, or "" when there is none. Collective.
  std::string latest() const;

  const std::string& run_dir() const { return run_dir_; }
  /// run_dir/checkpoints
  const std::string& checkpoint_root() const { return root_; }

  /// How the next saves write (CheckpointOptions).
  void set_options(const CheckpointOptions& options) { options_ = options; }

  /// Where rank 0's notes go (skipped checkpoints, removals). Default: stderr with an
  /// "[mtk checkpoint]" prefix.
  void set_logger(std::function<void(const std::string&)> log) { log_ = std::move(log); }

 private:
  void log(const std::string& message) const;
  std::string run_dir_, root_;
  int keep_last_k_;
  CheckpointOptions options_;
  Mesh mesh_;
  std::function<void(const std::string&)> log_;
  std::future<void> cleanup_;  // rank 0: deletion of old checkpoints, overlapping training
};

/// Writes `program`'s variables into a new checkpoint directory `dir` (which must not exist)
/// without the commit protocol (no rename, no `latest`). Collective. CheckpointManager::save is
/// the usual entry; this one serves tools and tests.
void write_checkpoint_directory(Program& program, const std::string& dir,
                                const CheckpointMetadata& metadata,
                                const CheckpointOptions& options = {});

/// Restores every variable of `program` from checkpoint directory `path`, whatever mesh and
/// layout it was saved with: each rank reads its own hyperslab. Shapes must match (an error names
/// the variable, the stored shape and the expected shape); every saved slice's SHA-256 is checked
/// against slices.sha256 and metadata.yaml against manifest.sha256. The program is changed only
/// when everything was read and verified on every rank. Sets Program::set_step(program_step).
/// Collective over the program's mesh.
void restore_checkpoint(Program& program, const std::string& path,
                        CheckpointMetadata* metadata = nullptr);

/// Checks a checkpoint directory: manifest hashes, metadata against the HDF5 datasets (dims,
/// shapes, dtype), slices tile each dataset, every slice's SHA-256. Collective over `comm`: the
/// slices are divided among its ranks; every rank returns the same result.
CheckpointVerification verify_checkpoint(const std::string& dir, const Communicator& comm);
/// The same over an MPI communicator.
inline CheckpointVerification verify_checkpoint(const std::string& dir, MPI_Comm comm) {
  return verify_checkpoint(dir, borrow(comm));
}

/// Reads metadata.yaml of a checkpoint directory (local, no communication).
CheckpointInfo checkpoint_info(const std::string& dir);
/// Human-readable listing of checkpoint_info() for `mtk-ckpt info`.
std::string format_checkpoint_info(const CheckpointInfo& info);

/// `mtk-ckpt list`: one line per checkpoint directory of `paths` (step, creation time, size on
/// disk; the one equal to `latest` marked). A checkpoint whose small files are unreadable,
/// disagree with manifest.sha256 or do not parse is listed as "CORRUPT: <reason>" and the
/// listing goes on; `*corrupt`, when given, receives how many were. Local, no communication;
/// reads only the small files (`verify` checks the data).
std::string format_checkpoint_list(const std::vector<std::string>& paths, const std::string& latest,
                                   int* corrupt = nullptr);

/// Accepts a checkpoint directory, a checkpoints/ directory or a run directory and returns the
/// checkpoint directory meant (for the latter two: the one `latest` names). Local.
std::string resolve_checkpoint_path(const std::string& path);

/// Name of the directory of `step`: "step-000001000".
std::string checkpoint_dir_name(std::int64_t step);

}  // namespace mtk
