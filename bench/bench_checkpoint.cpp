// bench_checkpoint: save, restore and verify throughput of MTK's sharded parallel-HDF5 checkpoints
// on the current rank count, next to the raw sequential write and read speed of the same disk
// measured in the same run (rank 0 write()s a file of the same size and fsyncs it; reads it back
// after dropping it from the page cache). Prints one JSON object per measurement:
//   {"bench":"checkpoint","what":"save","ranks":4,"bytes":...,"seconds":...,"gb_per_s":...,
//    "fraction_of_raw_write":...}
// "save" uses MTK's default MPI-IO mode (independent writes when all ranks share a node),
// "save_collective" forces collective MPI-IO (MTK_CKPT_MPIIO=collective).
// Save times include everything a trainer waits for: hashing, the collective HDF5 write, fsync,
// manifest, rename, `latest`, retention. Restores read cold: the checkpoint's files are dropped
// from the page cache first (posix_fadvise DONTNEED after fsync), as after a job restart.
//
// usage: mpiexec -n N bench_checkpoint [--mib 256] [--reps 3] [--dir DIR] [--replicated]
//   --dir: where to write (default: ./bench_checkpoint_run; its checkpoints/ is removed at the end)
//   --replicated: half the variables replicated on every rank (written once per replica group)

#include <mtk/app/app_main.hpp>
#include <mtk/base/error.hpp>
#include <mtk/checkpoint/checkpoint.hpp>
#include <mtk/lower/lowering.hpp>
#include <mtk/ops/ops.hpp>

#include <mpi.h>

#include "cli.hpp"
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct Options {
  long mib = 256, reps = 3;
  std::string dir = "bench_checkpoint_run";
  bool replicated = false;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Drops a clean file from the page cache (after fsync its pages are clean).
void drop_cache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

void drop_cache_tree(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec))
    if (e.is_regular_file(ec))
      drop_cache(e.path().string());
}

// Sequential write() of `bytes` in 8 MiB pieces, then fsync: seconds.
double raw_write(const std::string& path, std::int64_t bytes) {
  std::vector<char> buf(std::size_t(8) << 20);
  for (std::size_t i = 0; i < buf.size(); ++i)
    buf[i] = static_cast<char>(i * 2654435761u >> 24);
  const double t0 = MPI_Wtime();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    mtk::fail("bench_checkpoint", "cannot create " + path + ": " + std::strerror(errno));
  for (std::int64_t done = 0; done < bytes;) {
    const auto n = static_cast<std::size_t>(std::min<std::int64_t>(bytes - done, buf.size()));
    const ssize_t w = ::write(fd, buf.data(), n);
    if (w <= 0)
      mtk::fail("bench_checkpoint", "write failed: " + std::string(std::strerror(errno)));
    done += w;
  }
  ::fsync(fd);
  ::close(fd);
  return MPI_Wtime() - t0;
}

double raw_read(const std::string& path) {
  std::vector<char> buf(std::size_t(8) << 20);
  const double t0 = MPI_Wtime();
  const int fd = ::open(path.c_str(), O_RDONLY);
  while (::read(fd, buf.data(), buf.size()) > 0) {
  }
  ::close(fd);
  return MPI_Wtime() - t0;
}

void print(const char* what, int ranks, std::int64_t bytes, double seconds, const char* extra_key,
           double extra) {
  nlohmann::ordered_json j;
  j["bench"] = "checkpoint";
  j["what"] = what;
  j["ranks"] = ranks;
  j["bytes"] = bytes;
  j["seconds"] = seconds;
  j["gb_per_s"] = static_cast<double>(bytes) / 1e9 / seconds;
  if (extra_key != nullptr)
    j[extra_key] = extra;
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
}

int run(const Options& o) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  mtk::Mesh mesh(mtk::MeshShape::parse("x:" + std::to_string(size)), MPI_COMM_WORLD);
  // Variables of 32 MiB ([rows=2048, cols=4096] float32) split by rows, like the big matrices of
  // a Transformer; --replicated leaves every other one whole on every rank.
  const std::int64_t rows = 2048, cols = 4096;
  const long count = std::max<long>(1, o.mib / 32);
  mtk::Graph g;
  for (long k = 0; k < count; ++k) {
    const bool split = !o.replicated || k % 2 == 0;
    mtk::variable(g, "layer_" + std::to_string(k) + "/w",
                  mtk::Shape{{split ? "rows" : "rows_whole", rows}, {"cols", cols}},
                  mtk::Initializer::uniform(-1, 1, static_cast<std::uint64_t>(k)));
  }
  auto program = mtk::lower(g, mesh, mtk::LayoutRules::parse("rows:x"));
  const std::int64_t bytes = count * rows * cols * 4;

  const std::string dir = o.dir;
  if (rank == 0)
    fs::create_directories(dir);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0)
    std::printf("# bench_checkpoint: %ld variables, %.0f MiB, %d rank(s), dir %s\n", count,
                static_cast<double>(bytes) / (1 << 20), size, fs::absolute(dir).c_str());

  std::vector<double> raw_w, raw_r, save, save_coll, restore, verify, f_save, f_coll, f_restore;
  mtk::CheckpointManager manager(dir, 1, mesh);
  manager.set_logger([](const std::string&) {});
  auto timed_save = [&](long step) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    mtk::CheckpointMetadata meta;
    meta.step = step;
    const std::string path = manager.save(*program, meta);
    MPI_Barrier(MPI_COMM_WORLD);
    return std::make_pair(MPI_Wtime() - t0, path);
  };
  for (long rep = 0; rep < o.reps; ++rep) {
    // Raw disk speed, measured next to every checkpoint run (rank 0 alone, the others wait).
    double w = 0, r = 0;
    if (rank == 0) {
      const std::string raw = dir + "/raw.bin";
      w = raw_write(raw, bytes);
      drop_cache(raw);
      r = raw_read(raw);
      fs::remove(raw);
    }
    MPI_Bcast(&w, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Bcast(&r, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    raw_w.push_back(w);
    raw_r.push_back(r);
    // The default (as MTK_CKPT_MPIIO says: unset, independent on one node), then collective.
    manager.set_options({});
    auto [ts, path] = timed_save(2 * rep);
    save.push_back(ts);
    f_save.push_back(w / ts);
    mtk::CheckpointOptions collective;
    collective.collective = true;
    manager.set_options(collective);
    auto [tc, path_c] = timed_save(2 * rep + 1);
    manager.set_options({});
    save_coll.push_back(tc);
    f_coll.push_back(w / tc);

    if (rank == 0)
      drop_cache_tree(path_c);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    if (!manager.restore_latest(*program))
      mtk::fail("bench_checkpoint", "nothing to restore");
    MPI_Barrier(MPI_COMM_WORLD);
    restore.push_back(MPI_Wtime() - t0);
    f_restore.push_back(r / restore.back());

    if (rank == 0)
      drop_cache_tree(path_c);
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    const auto v = mtk::verify_checkpoint(path_c, MPI_COMM_WORLD);
    verify.push_back(MPI_Wtime() - t0);
    if (!v.ok)
      mtk::fail("bench_checkpoint", "verify failed: " + v.errors.front());
  }
  if (rank == 0) {
    // Medians over the repetitions; each fraction is the median of per-repetition ratios (the
    // raw measurement next to it), which the load of a shared machine disturbs least.
    print("raw_write", 1, bytes, median(raw_w), nullptr, 0);
    print("raw_read", 1, bytes, median(raw_r), nullptr, 0);
    print("save", size, bytes, median(save), "fraction_of_raw_write", median(f_save));
    print("save_collective", size, bytes, median(save_coll), "fraction_of_raw_write",
          median(f_coll));
    print("restore", size, bytes, median(restore), "fraction_of_raw_read", median(f_restore));
    print("verify", size, bytes, median(verify), nullptr, 0);
    std::error_code ec;
    fs::remove_all(dir + "/checkpoints", ec);
    fs::remove(dir, ec);  // only when empty: never delete what the user kept there
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return mtk::app_main(
      argc, argv, {"bench_checkpoint", /*every_rank_reports=*/true},
      [&](const mtk::Communicator& world, const std::vector<std::string>& args) {
        Options o;
        CLI::App app{
            "Save, restore and verify throughput of MTK's checkpoints next to the raw "
            "write and read speed of the same disk; one JSON object per measurement.",
            "bench_checkpoint"};
        mtk::cli::configure(app);
        app.add_option("--mib", o.mib, "MiB of variables, in variables of 32 MiB (default 256)")
            ->check(mtk::cli::integer_in(1, 1 << 24));
        app.add_option("--reps", o.reps, "Repetitions; medians are printed (default 3)")
            ->check(mtk::cli::integer_in(1, 1000));
        app.add_option("--dir", o.dir, "Where to write (its checkpoints/ is removed at the end)")
            ->type_name("DIR");
        app.add_flag("--replicated", o.replicated,
                     "Half the variables replicated on every rank (written once per group)");
        if (const int status = mtk::cli::parse(app, args, world.rank() == 0); status >= 0)
          return status;
        return run(o);
      });
}
