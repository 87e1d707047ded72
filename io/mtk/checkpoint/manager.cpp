// CheckpointManager: the checkpoints of one run directory, committed atomically, restored with
// fallback to the previous good one (docs/checkpoint-format.md).

#include <mtk/base/error.hpp>
#include <mtk/checkpoint/checkpoint.hpp>
#include <mtk/checkpoint/impl/format.hpp>
#include <mtk/checkpoint/impl/test_hooks.hpp>
#include <mtk/checkpoint/impl/timing.hpp>
#include <mtk/checkpoint/impl/writer.hpp>
#include <mtk/files/files.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <stdio.h>

namespace mtk {

using namespace ckpt;
namespace fs = std::filesystem;

namespace {

using Logger = std::function<void(const std::string&)>;

void check_same_ranks(const Mesh& a, const Mesh& b, const std::string& where) {
  if (!a.comm().same_ranks(b.comm()))
    fail(where,
         cat("the program's mesh ", b.shape().to_string(),
             " is not on the ranks of the checkpoint manager's mesh ", a.shape().to_string()));
}

// Rank 0, before a save: checkpoints/ exists, leftovers of interrupted saves are gone. Returns
// the temporary directory the save writes.
std::string prepare_root(const std::string& root, const std::string& name, const Logger& log,
                         const std::string& where) {
  make_directories(root, where);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root)) {
    const std::string n = e.path().filename().string();
    if (n.rfind(".tmp-", 0) == 0 || n.rfind(".old-", 0) == 0 || n == "latest.tmp") {
      fs::remove_all(e.path(), ec);
      log(cat("removed '", n, "', left by an interrupted save"));
    } else if (n.rfind(".trash-", 0) == 0) {
      fs::remove_all(e.path(), ec);  // deletion of an old checkpoint that was interrupted
    }
  }
  return root + "/.tmp-" + name + "-" + random_nonce();
}

// Rank 0: renames the written directory `tmp` to root/name, replacing a checkpoint of the same
// step (atomically where the kernel can exchange two names); durable.
void move_into_place(const std::string& root, const std::string& tmp, const std::string& name,
                     std::vector<std::string>* trash, const Logger& log, const std::string& where) {
  const std::string final_path = root + "/" + name;
  std::error_code ec;
  if (fs::exists(final_path, ec)) {
    bool swapped = false;
#ifdef RENAME_EXCHANGE
    swapped =
        ::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, final_path.c_str(), RENAME_EXCHANGE) == 0;
#endif
    if (!swapped) {  // not atomic, but both copies stay on disk until the new one is in place
      const std::string old = root + "/.old-" + name + "-" + random_nonce();
      if (::rename(final_path.c_str(), old.c_str()) != 0)
        fail(where, cat("cannot move '", final_path, "' aside: ", std::strerror(errno)));
      rename_path(tmp, final_path, where);
      fs::remove_all(old, ec);
    } else {
      // tmp now holds the replaced checkpoint.
      const std::string doomed = root + "/.trash-" + name + "-" + random_nonce();
      if (::rename(tmp.c_str(), doomed.c_str()) == 0)
        trash->push_back(doomed);
      else
        fs::remove_all(tmp, ec);
    }
    log(cat("replaced the existing checkpoint ", name));
  } else {
    rename_path(tmp, final_path, where);
  }
  fsync_path(root, true, where);
}

// Rank 0, retention: keeps checkpoint `name` and the newest keep_last_k - 1 older ones; the
// others are renamed out of sight at once and their files go in the background (`trash`).
// Failures are logged, not raised: the checkpoint is committed.
void retire_older(const std::string& root, std::int64_t step, const std::string& name,
                  int keep_last_k, std::vector<std::string>* trash, const Logger& log) {
  try {
    std::vector<std::string> older;
    for (const auto& [s, n] : scan_checkpoints(root)) {
      if (s < step)
        older.push_back(n);
      if (s > step)
        log(cat("checkpoint ", n, " is newer than ", name,
                " (the run went back to an earlier step); restore_latest() will not pick it"));
    }
    std::reverse(older.begin(), older.end());
    for (size_t k = static_cast<size_t>(keep_last_k - 1); k < older.size(); ++k) {
      const std::string doomed = root + "/.trash-" + older[k] + "-" + random_nonce();
      if (::rename((root + "/" + older[k]).c_str(), doomed.c_str()) == 0)
        trash->push_back(doomed);
      else
        log(cat("could not remove old checkpoint ", older[k], ": ", std::strerror(errno)));
    }
  } catch (const std::exception& e) {
    log(cat("retention: ", e.what()));
  }
}

// Printable form of what `latest` holds, for messages (it may hold any bytes).
std::string printable(const std::string& text) {
  std::string out;
  for (const char c : text.substr(0, 80))
    out += c >= 32 && c < 127 ? c : '?';
  return text.size() > 80 ? out + "..." : out;
}

// What `latest` says, for restore_latest(): the name it holds, or why it names nothing.
struct LatestPointer {
  std::string name;     // trimmed contents
  std::string problem;  // "" when it could be read
};

LatestPointer read_latest(const std::string& latest_file) {
  std::error_code ec;
  if (!fs::exists(latest_file, ec))
    return {"", cat("there is no '", latest_file, "'")};
  if (!fs::is_regular_file(latest_file, ec))
    return {"", cat("'", latest_file, "' is not a regular file")};
  try {
    return {trim(read_whole_file(latest_file, "mtk::CheckpointManager")), ""};
  } catch (const Error& e) {
    return {"", e.what()};
  }
}

// Rank 0: the checkpoints restore_latest() tries, in order, and whether `latest` was passed over.
// When `latest` names a complete checkpoint: that one, then the older complete ones, newest first
// (a newer complete one was never committed). Otherwise (no `latest`, or one that is empty,
// unreadable, garbage, or names a missing or incomplete checkpoint): every complete checkpoint,
// newest step first.
std::pair<bool, std::vector<std::string>> restore_candidates(const std::string& root,
                                                             const Logger& log) {
  const auto all = scan_checkpoints(root);
  const std::string latest_file = root + "/" + kLatestFile;
  const LatestPointer latest = read_latest(latest_file);
  std::int64_t latest_step = -1;
  for (const auto& [step, n] : all)
    if (latest.problem.empty() && n == latest.name)
      latest_step = step;
  std::vector<std::string> order;
  if (latest_step >= 0)
    order.push_back(latest.name);
  for (auto it = all.rbegin(); it != all.rend(); ++it)
    if (latest_step < 0 || it->first < latest_step)
      order.push_back(it->second);
  const bool fallback = latest_step < 0;
  if (fallback && !order.empty())
    log(cat(latest.problem.empty() ? cat("'", latest_file, "' names '", printable(latest.name),
                                         "', which is missing or incomplete")
                                   : latest.problem,
            "; trying the complete checkpoints by step, newest first: ", order[0],
            order.size() > 1 ? cat(", then ", order.size() - 1, " older one(s)") : ""));
  return {fallback, order};
}

}  // namespace

CheckpointManager::CheckpointManager(std::string run_dir, int keep_last_k, const Mesh& mesh,
                                     const CheckpointOptions& options)
    : run_dir_(strip_trailing_slashes(std::move(run_dir))),
      root_(run_dir_ + "/checkpoints"),
      keep_last_k_(keep_last_k),
      options_(options),
      mesh_(mesh) {
  if (keep_last_k < 1)
    fail("mtk::CheckpointManager", cat("keep_last_k must be >= 1, got ", keep_last_k));
}

void CheckpointManager::log(const std::string& message) const {
  if (mesh_.rank() != 0)
    return;
  if (log_) {
    log_(message);
  } else {
    std::fprintf(stderr, "[mtk checkpoint] %s\n", message.c_str());
    std::fflush(stderr);
  }
}

std::string CheckpointManager::save(Program& program, const CheckpointMetadata& metadata) {
  const std::string where = "mtk::CheckpointManager::save";
  Kokkos::Profiling::pushRegion("mtk::CheckpointManager::save");
  check_same_ranks(mesh_, program.mesh(), where);
  const Communicator& comm = program.mesh().comm();
  const bool root = program.mesh().rank() == 0;
  const Logger logger = [this](const std::string& m) { log(m); };
  CheckpointMetadata meta = metadata;
  if (meta.step < 0)
    meta.step = program.step();
  const std::string name = checkpoint_dir_name(meta.step);
  const double t_start = wall_seconds();
  if (cleanup_.valid())
    cleanup_.get();  // the previous save's deletions
  const std::string final_path = root_ + "/" + name;
  std::string tmp;
  agree_on_failure(comm, [&] {
    if (root)
      tmp = prepare_root(root_, name, logger, where);
  });
  tmp = comm.broadcast(std::move(tmp));
  add_time("cleanup", wall_seconds() - t_start);
  try {
    write_directory(program, tmp, meta, options_, where);
  } catch (const Error&) {
    // Every rank failed together (agreed); the partial directory goes now rather than at the
    // next save.
    std::error_code ec;
    if (root)
      fs::remove_all(tmp, ec);
    throw;
  }
  const double t_commit = wall_seconds();
  std::vector<std::string> trash;  // rank 0: directories to delete in the background
  // Commit (rank 0): rename into place, then point `latest` at it; each step durable.
  agree_on_failure(comm, [&] {
    if (!root)
      return;
    test_hook("before_rename");
    move_into_place(root_, tmp, name, &trash, logger, where);
    test_hook("renamed");
    write_file_atomically(root_ + "/" + kLatestFile, name + "\n", where, root_ + "/latest.tmp");
    test_hook("updated_latest");
    retire_older(root_, meta.step, name, keep_last_k_, &trash, logger);
  });
  if (!trash.empty())
    cleanup_ = std::async(std::launch::async, [trash] {
      std::error_code ec;
      for (const auto& t : trash)
        fs::remove_all(t, ec);
    });
  add_time("commit", wall_seconds() - t_commit);
  report_times(cat("save ", name), program.mesh().rank() == 0);
  Kokkos::Profiling::popRegion();
  return final_path;
}

bool CheckpointManager::restore_latest(Program& program, CheckpointMetadata* metadata,
                                       std::string* path) {
  const std::string where = "mtk::CheckpointManager::restore_latest";
  check_same_ranks(mesh_, program.mesh(), where);
  const Communicator& comm = program.mesh().comm();
  const Logger logger = [this](const std::string& m) { log(m); };
  std::string text;  // first line: "fallback" or "latest"; then the candidates' paths
  agree_on_failure(comm, [&] {
    if (program.mesh().rank() != 0)
      return;
    const auto [fallback, names] = restore_candidates(root_, logger);
    text = fallback ? "fallback\n" : "latest\n";
    for (const auto& n : names)
      text += root_ + "/" + n + "\n";
  });
  auto candidates = split_lines(comm.broadcast(std::move(text)));
  const bool fallback = candidates.front() == "fallback";
  candidates.erase(candidates.begin());
  if (candidates.empty())
    return false;
  std::vector<std::string> refused;
  for (size_t k = 0; k < candidates.size(); ++k) {
    try {
      restore_checkpoint(program, candidates[k], metadata);
      if (path != nullptr)
        *path = candidates[k];
      if (!refused.empty())
        log(cat("restored the previous good checkpoint ", candidates[k], " after refusing ",
                refused.size(), " newer one(s)"));
      else if (fallback)
        log(cat("restored ", candidates[k], ", the newest complete checkpoint"));
      return true;
    } catch (const Error& e) {
      log(cat("refusing checkpoint ", candidates[k], ": ", e.what(),
              k + 1 < candidates.size() ? "; falling back to the previous one" : ""));
      refused.push_back(cat(candidates[k], ": ", e.what()));
    }
  }
  std::string reasons;
  for (const auto& r : refused)
    reasons += "\n  " + r;
  fail(where, cat("no checkpoint in ", root_, " can be restored:", reasons));
}

void CheckpointManager::restore(Program& program, const std::string& path,
                                CheckpointMetadata* metadata) {
  check_same_ranks(mesh_, program.mesh(), "mtk::CheckpointManager::restore");
  std::string dir;
  agree_on_failure(program.mesh().comm(), [&] { dir = resolve_checkpoint_path(path); });
  restore_checkpoint(program, dir, metadata);
}

std::vector<std::string> CheckpointManager::list() const {
  std::string text;
  agree_on_failure(mesh_.comm(), [&] {
    if (mesh_.rank() == 0)
      for (const auto& [step, n] : scan_checkpoints(root_))
        text += root_ + "/" + n + "\n";
  });
  text = mesh_.comm().broadcast(std::move(text));
  return split_lines(text);
}

std::string CheckpointManager::latest() const {
  std::string text;
  agree_on_failure(mesh_.comm(), [&] {
    if (mesh_.rank() != 0)
      return;
    std::error_code ec;
    if (!fs::is_regular_file(root_ + "/" + kLatestFile, ec))
      return;
    const std::string name =
        trim(read_whole_file(root_ + "/" + kLatestFile, "mtk::CheckpointManager"));
    std::int64_t step = 0;
    if (parse_step_dir(name, &step) && complete_checkpoint(root_ + "/" + name))
      text = root_ + "/" + name;
  });
  text = mesh_.comm().broadcast(std::move(text));
  return text;
}

}  // namespace mtk
