// Sharded parallel-HDF5 checkpoints: format, commit protocol and integrity are described in
// docs/checkpoint-format.md. HDF5 and yaml-cpp stay in this file.

#include <mtk/checkpoint/checkpoint.hpp>
#include <mtk/version.hpp>
#include <mtk/base/error.hpp>
#include <mtk/files/sha256.hpp>

#include <Kokkos_Core.hpp>
#include <hdf5.h>
#include <mpi.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <fcntl.h>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>


#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "MTK checkpoints hash float32 bytes as little-endian; port the hashing to this host first"
#endif

namespace mtk {

namespace {

namespace fs = std::filesystem;

constexpr const char* kVariablesFile = "variables.h5";
constexpr const char* kMetadataFile = "metadata.yaml";
constexpr const char* kSlicesFile = "slices.sha256";
constexpr const char* kManifestFile = "manifest.sha256";
constexpr const char* kLatestFile = "latest";
constexpr const char* kGroupPrefix = "/variables/";
constexpr const char* kFormatName = "mtk-checkpoint";
constexpr std::size_t kMaxReportedErrors = 40;
constexpr std::int64_t kReadBlockBytes = std::int64_t(64) << 20;

// ----------------------------------------------------------------------------------- test hooks
// MTK_CKPT_TEST_ABORT_AFTER=<phase> makes rank MTK_CKPT_TEST_ABORT_RANK (default 0 of
// MPI_COMM_WORLD) SIGKILL itself when a save reaches <phase>; MTK_CKPT_TEST_DELAY_MS=<ms> sleeps
// after every dataset written, so that an outside kill lands inside a save. Tests only.
int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

void test_hook(const char* phase) {
  const char* after = std::getenv("MTK_CKPT_TEST_ABORT_AFTER");
  if (after == nullptr || std::strcmp(after, phase) != 0)
    return;
  const char* who = std::getenv("MTK_CKPT_TEST_ABORT_RANK");
  if (who != nullptr && std::atoi(who) != world_rank())
    return;
  std::fprintf(stderr, "[mtk checkpoint test hook] rank %d: SIGKILL at phase '%s'\n", world_rank(),
               phase);
  std::fflush(stderr);
  std::raise(SIGKILL);
}

void test_delay() {
  const char* ms = std::getenv("MTK_CKPT_TEST_DELAY_MS");
  if (ms != nullptr)
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(ms)));
}

// MTK_CKPT_TIMING=1: rank 0 prints where a save or restore spent its time (stderr).
std::vector<std::pair<std::string, double>>& phase_times() {
  static std::vector<std::pair<std::string, double>> t;
  return t;
}

void add_time(const std::string& phase, double seconds) {
  for (auto& [p, s] : phase_times())
    if (p == phase) {
      s += seconds;
      return;
    }
  phase_times().emplace_back(phase, seconds);
}

void report_times(const std::string& what, bool root) {
  if (root && std::getenv("MTK_CKPT_TIMING") != nullptr) {
    std::string line;
    for (const auto& [p, s] : phase_times())
      line += cat(" ", p, "=", s);
    std::fprintf(stderr, "[mtk checkpoint timing] %s:%s\n", what.c_str(), line.c_str());
  }
  phase_times().clear();
}

// ----------------------------------------------------------------------------- small utilities
std::string csv(const std::vector<std::int64_t>& v) {
  if (v.empty())
    return "-";
  std::string s;
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

std::string bracket(const std::vector<std::int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::vector<std::int64_t> parse_csv(const std::string& text, const std::string& where,
                                    const std::string& what) {
  std::vector<std::int64_t> out;
  if (text == "-")
    return out;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || errno != 0 || v < 0)
      fail(where, cat(what, ": '", text, "' is not a list of non-negative integers"));
    out.push_back(v);
  }
  return out;
}

std::vector<std::int64_t> sizes_of(const Shape& s) {
  std::vector<std::int64_t> v;
  for (const auto& d : s.dims())
    v.push_back(d.size);
  return v;
}

std::int64_t product(const std::vector<std::int64_t>& v) {
  std::int64_t p = 1;
  for (auto x : v)
    p *= x;
  return p;
}

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos)
    return "";
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::string strip_trailing_slashes(std::string p) {
  while (p.size() > 1 && p.back() == '/')
    p.pop_back();
  return p;
}

void fsync_path(const std::string& path, bool directory, const std::string& where) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (directory ? O_DIRECTORY : 0));
  if (fd < 0)
    fail(where, cat("cannot open '", path, "' to fsync it: ", std::strerror(errno)));
  if (::fsync(fd) != 0) {
    const int e = errno;
    ::close(fd);
    fail(where, cat("fsync('", path, "') failed: ", std::strerror(e)));
  }
  ::close(fd);
}

// Writes `text` to `path` (created or truncated) and fsyncs it.
void write_file_durably(const std::string& path, const std::string& text,
                        const std::string& where) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    fail(where, cat("cannot create '", path, "': ", std::strerror(errno)));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      fail(where, cat("cannot write '", path, "': ", std::strerror(e)));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0)
    fail(where, cat("cannot fsync/close '", path, "': ", std::strerror(errno)));
}

std::string read_file(const std::string& path, const std::string& where) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    fail(where, cat("cannot open '", path, "': ", std::strerror(errno)));
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      fail(where, cat("cannot read '", path, "': ", std::strerror(e)));
    }
    if (n == 0)
      break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

void bcast_string(MPI_Comm comm, std::string& s, int root = 0) {
  long long n = static_cast<long long>(s.size());
  MPI_Bcast(&n, 1, MPI_LONG_LONG, root, comm);
  s.resize(static_cast<size_t>(n));
  // Large strings in pieces: MPI counts are int.
  for (long long off = 0; off < n; off += (1 << 30)) {
    const int len = static_cast<int>(std::min<long long>(n - off, 1 << 30));
    MPI_Bcast(&s[static_cast<size_t>(off)], len, MPI_CHAR, root, comm);
  }
}

// Every rank's `mine`, on rank 0 (empty elsewhere).
std::vector<std::string> gather_strings(MPI_Comm comm, const std::string& mine) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<size_t>(size)), displs(static_cast<size_t>(size));
  MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, comm);
  std::string all;
  if (rank == 0) {
    int total = 0;
    for (int r = 0; r < size; ++r) {
      displs[static_cast<size_t>(r)] = total;
      total += lens[static_cast<size_t>(r)];
    }
    all.resize(static_cast<size_t>(total));
  }
  MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, 0,
              comm);
  std::vector<std::string> out;
  if (rank == 0)
    for (int r = 0; r < size; ++r)
      out.push_back(all.substr(static_cast<size_t>(displs[static_cast<size_t>(r)]),
                               static_cast<size_t>(lens[static_cast<size_t>(r)])));
  return out;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line))
    if (!line.empty())
      out.push_back(line);
  return out;
}

bool parse_step_dir(const std::string& name, std::int64_t* step) {
  if (name.size() <= 5 || name.compare(0, 5, "step-") != 0)
    return false;
  for (size_t i = 5; i < name.size(); ++i)
    if (name[i] < '0' || name[i] > '9')
      return false;
  if (name.size() > 5 + 18)
    return false;
  *step = std::stoll(name.substr(5));
  return true;
}

bool complete_checkpoint(const fs::path& dir) {
  std::error_code ec;
  for (const char* f : {kVariablesFile, kMetadataFile, kSlicesFile, kManifestFile})
    if (!fs::is_regular_file(dir / f, ec))
      return false;
  return true;
}

// Complete step-* directories of `root`, by ascending step.
std::vector<std::pair<std::int64_t, std::string>> scan_checkpoints(const std::string& root) {
  std::vector<std::pair<std::int64_t, std::string>> out;
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    return out;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    std::int64_t step = 0;
    const std::string name = entry.path().filename().string();
    if (entry.is_directory(ec) && parse_step_dir(name, &step) && complete_checkpoint(entry.path()))
      out.emplace_back(step, name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string random_nonce() {
  std::random_device rd;
  const auto t = std::chrono::steady_clock::now().time_since_epoch().count();
  std::uint64_t x =
      (std::uint64_t(rd()) << 32) ^ rd() ^ std::uint64_t(t) ^ (std::uint64_t(::getpid()) << 16);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(x));
  return buf;
}

// --------------------------------------------------------------------------------- HDF5 helpers
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

herr_t collect_h5_error(unsigned n, const H5E_error2_t* e, void* data) {
  auto* s = static_cast<std::string*>(data);
  if (n >= 4)
    return 0;
  if (!s->empty())
    *s += " <- ";
  *s += cat(e->func_name ? e->func_name : "?", ": ", e->desc ? e->desc : "?");
  return 0;
}

std::string h5_errors() {
  std::string s;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, &collect_h5_error, &s);
  H5Eclear2(H5E_DEFAULT);
  return s.empty() ? std::string("no HDF5 error details") : "HDF5: " + s;
}

hid_t h5(hid_t id, const std::string& where, const std::string& what) {
  if (id < 0)
    fail(where, cat(what, " failed (", h5_errors(), ")"));
  return id;
}

void h5ok(herr_t r, const std::string& where, const std::string& what) {
  if (r < 0)
    fail(where, cat(what, " failed (", h5_errors(), ")"));
}

// HDF5 prints its error stack by default; MTK puts it into its own messages instead.
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

// The string attribute `name` of `obj`; false when it is absent.
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

// Variable names become HDF5 link names under /variables: '/' would make groups (and a variable
// "w" next to a slot "w/rms" cannot be both a dataset and a group), so '%' and '/' are
// percent-encoded ("layer_0/w/rms" -> "layer_0%2Fw%2Frms"), as are the names "." and "..".
// The dataset's attribute "mtk_name" holds the name unencoded.
std::string dataset_path(const std::string& name, const std::string& where) {
  if (name.empty())
    fail(where, "a variable has an empty name");
  std::string link;
  for (char c : name) {
    if (c == '%')
      link += "%25";
    else if (c == '/')
      link += "%2F";
    else
      link += c;
  }
  if (link == ".")
    link = "%2E";
  if (link == "..")
    link = "%2E%2E";
  return kGroupPrefix + link;
}

// File access for reading: each rank opens the file on its own (POSIX), so that a damaged file
// makes single ranks fail without leaving others inside a collective HDF5 call.
H5Id read_fapl(const std::string& where) {
  H5Id fapl(h5(H5Pcreate(H5P_FILE_ACCESS), where, "H5Pcreate(file access)"), H5Pclose);
  h5ok(H5Pset_fapl_sec2(fapl), where, "H5Pset_fapl_sec2");
  h5ok(H5Pset_file_locking(fapl, false, true), where, "H5Pset_file_locking");
  return fapl;
}

std::vector<hsize_t> hsizes(const std::vector<std::int64_t>& v) {
  return std::vector<hsize_t>(v.begin(), v.end());
}

// Reads the block [origin, origin + shape) of a float32 dataset into `dst` (row-major).
void read_block(hid_t dset, const std::vector<std::int64_t>& origin,
                const std::vector<std::int64_t>& shape, float* dst, const std::string& where,
                const std::string& what) {
  if (shape.empty()) {
    h5ok(H5Dread(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, dst), where,
         cat("reading ", what));
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
  h5ok(H5Dread(dset, H5T_NATIVE_FLOAT, mspace, fspace, H5P_DEFAULT, dst), where,
       cat("reading ", what));
}

// SHA-256 of the block [origin, origin + shape) of a dataset, read in pieces along dim 0.
std::string hash_dataset_block(hid_t dset, const std::vector<std::int64_t>& origin,
                               const std::vector<std::int64_t>& shape, std::int64_t* bytes,
                               const std::string& where, const std::string& what) {
  Sha256 h;
  if (shape.empty()) {
    float v = 0;
    read_block(dset, origin, shape, &v, where, what);
    h.update(&v, sizeof v);
    *bytes += 4;
    return h.hex_digest();
  }
  const std::int64_t row = product(shape) / std::max<std::int64_t>(shape[0], 1);
  const std::int64_t rows_per_read =
      std::max<std::int64_t>(1, kReadBlockBytes / std::max<std::int64_t>(1, row * 4));
  std::vector<float> buf;
  for (std::int64_t r0 = 0; r0 < shape[0]; r0 += rows_per_read) {
    auto o = origin;
    auto s = shape;
    o[0] += r0;
    s[0] = std::min(rows_per_read, shape[0] - r0);
    buf.resize(static_cast<size_t>(product(s)));
    read_block(dset, o, s, buf.data(), where, what);
    h.update(buf.data(), buf.size() * 4);
    *bytes += static_cast<std::int64_t>(buf.size()) * 4;
  }
  return h.hex_digest();
}

bool contains(const std::vector<std::int64_t>& outer_origin,
              const std::vector<std::int64_t>& outer_shape, const std::vector<std::int64_t>& origin,
              const std::vector<std::int64_t>& shape) {
  for (size_t i = 0; i < origin.size(); ++i)
    if (origin[i] < outer_origin[i] || origin[i] + shape[i] > outer_origin[i] + outer_shape[i])
      return false;
  return true;
}

// SHA-256 of the block (origin, shape) of the row-major region (region_origin, region_shape)
// held in `data`, hashed run by run without a copy.
std::string hash_sub_block(const float* data, const std::vector<std::int64_t>& region_origin,
                           const std::vector<std::int64_t>& region_shape,
                           const std::vector<std::int64_t>& origin,
                           const std::vector<std::int64_t>& shape) {
  Sha256 h;
  const size_t r = shape.size();
  if (r == 0) {
    h.update(data, 4);
    return h.hex_digest();
  }
  if (product(shape) == 0)
    return h.hex_digest();
  if (shape == region_shape) {
    h.update(data, static_cast<size_t>(product(shape)) * 4);
    return h.hex_digest();
  }
  std::vector<std::int64_t> stride(r, 1);
  for (size_t i = r - 1; i > 0; --i)
    stride[i - 1] = stride[i] * region_shape[i];
  std::vector<std::int64_t> idx(r, 0);  // position within the block, last dim fixed at 0
  const std::int64_t runs = product(shape) / shape[r - 1];
  for (std::int64_t k = 0; k < runs; ++k) {
    std::int64_t off = 0;
    for (size_t i = 0; i < r; ++i)
      off += (idx[i] + origin[i] - region_origin[i]) * stride[i];
    h.update(data + off, static_cast<size_t>(shape[r - 1]) * 4);
    for (size_t i = r - 1; i-- > 0;) {  // odometer over dims 0..r-2
      if (++idx[i] < shape[i])
        break;
      idx[i] = 0;
    }
  }
  return h.hex_digest();
}

// Checks slices held in memory against their recorded SHA-256 on a second thread, so that a
// restore hashes one variable while it reads the next. The tasks' memory must stay alive until
// finish(); the thread makes no MPI or HDF5 call.
class HashWorker {
 public:
  struct Task {
    const float* data;
    std::vector<std::int64_t> region_origin, region_shape, origin, shape;
    std::string expected;
    std::string what;  // "variable 'w' [...]: the slice at origin [..] shape [..] in FILE"
  };
  HashWorker() : thread_([this] { run(); }) {}
  ~HashWorker() { finish(); }
  HashWorker(const HashWorker&) = delete;
  HashWorker& operator=(const HashWorker&) = delete;
  void push(Task task) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
  }
  /// Waits for every task; returns the mismatches.
  std::vector<std::string> finish() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable())
      thread_.join();
    return errors_;
  }

 private:
  void run() {
    for (;;) {
      Task t;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [this] { return done_ || !tasks_.empty(); });
        if (tasks_.empty())
          return;
        t = std::move(tasks_.front());
        tasks_.pop_front();
      }
      const std::string sha =
          hash_sub_block(t.data, t.region_origin, t.region_shape, t.origin, t.shape);
      if (sha != t.expected)
        errors_.push_back(
            cat(t.what, " is corrupted (SHA-256 ", sha, ", recorded ", t.expected, ")"));
    }
  }
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Task> tasks_;
  bool done_ = false;
  std::vector<std::string> errors_;
  std::thread thread_;  // last: starts after the members it uses
};

// ------------------------------------------------------------------------------- YAML metadata
bool survives_yaml(const std::string& value, const YAML::EMITTER_MANIP* style) {
  YAML::Emitter e;
  e << YAML::BeginMap << YAML::Key << "v" << YAML::Value;
  if (style != nullptr)
    e << *style;
  e << value << YAML::EndMap;
  if (!e.good())
    return false;
  try {
    const YAML::Node n = YAML::Load(e.c_str());
    return n["v"].IsScalar() && n["v"].as<std::string>() == value;
  } catch (const std::exception&) {
    return false;
  }
}

// Emits `value` in the most readable style that reads back exactly.
void emit_string(YAML::Emitter& out, const std::string& key, const std::string& value,
                 const std::string& where) {
  static const YAML::EMITTER_MANIP literal = YAML::Literal, quoted = YAML::DoubleQuoted;
  std::vector<const YAML::EMITTER_MANIP*> styles;
  if (value.find('\n') != std::string::npos)
    styles.push_back(&literal);
  styles.push_back(nullptr);
  styles.push_back(&quoted);
  for (const auto* style : styles) {
    if (!survives_yaml(value, style))
      continue;
    out << YAML::Key << key << YAML::Value;
    if (style != nullptr)
      out << *style;
    out << value;
    return;
  }
  fail(where, cat("metadata field '", key,
                  "' does not survive YAML (is it valid UTF-8 without NUL?); encode it as hex or "
                  "base64 before saving"));
}

struct StoredCheckpoint {
  CheckpointMetadata meta;
  std::vector<CheckpointVariable> vars;
};

std::string emit_metadata(const CheckpointMetadata& m, const std::vector<CheckpointVariable>& vars,
                          const std::string& where) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "format" << YAML::Value << kFormatName;
  out << YAML::Key << "format_version" << YAML::Value << kCheckpointFormatVersion;
  emit_string(out, "mtk_version", m.mtk_version, where);
  emit_string(out, "created_utc", m.created_utc, where);
  out << YAML::Key << "step" << YAML::Value << static_cast<long long>(m.step);
  out << YAML::Key << "program_step" << YAML::Value << static_cast<long long>(m.program_step);
  out << YAML::Key << "num_ranks" << YAML::Value << m.num_ranks;
  emit_string(out, "mesh", m.mesh, where);
  emit_string(out, "layout", m.layout, where);
  emit_string(out, "data_position", m.data_position, where);
  emit_string(out, "rng_state", m.rng_state, where);
  out << YAML::Key << "variables_file" << YAML::Value << kVariablesFile;
  out << YAML::Key << "variables" << YAML::Value << YAML::BeginSeq;
  for (const auto& v : vars) {
    out << YAML::BeginMap;
    emit_string(out, "name", v.name, where);
    emit_string(out, "dataset", v.dataset, where);
    out << YAML::Key << "dtype" << YAML::Value << v.dtype;
    out << YAML::Key << "dims" << YAML::Value << YAML::Flow << v.shape.names();
    std::vector<long long> sizes, slice;
    for (const auto& d : v.shape.dims())
      sizes.push_back(d.size);
    for (const auto& d : v.slice_shape.dims())
      slice.push_back(d.size);
    out << YAML::Key << "shape" << YAML::Value << YAML::Flow << sizes;
    out << YAML::Key << "slice_shape" << YAML::Value << YAML::Flow << slice;
    emit_string(out, "layout", v.layout, where);
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  emit_string(out, "config", m.config_yaml, where);
  out << YAML::EndMap;
  if (!out.good())
    fail(where, cat("cannot write metadata YAML: ", out.GetLastError()));
  return std::string(out.c_str()) + "\n";
}

template <class T>
T yaml_get(const YAML::Node& node, const char* key, const std::string& origin,
           const std::string& where) {
  const YAML::Node v = node[key];
  if (!v.IsDefined() || v.IsNull())
    fail(where, cat(origin, ": key '", key, "' is missing"));
  try {
    return v.as<T>();
  } catch (const YAML::Exception& e) {
    fail(where, cat(origin, ": key '", key, "' has the wrong type (", e.what(), ")"));
  }
}

std::string yaml_string(const YAML::Node& node, const char* key, const std::string& origin,
                        const std::string& where) {
  const YAML::Node v = node[key];
  if (!v.IsDefined())
    fail(where, cat(origin, ": key '", key, "' is missing"));
  if (v.IsNull())
    return "";
  return yaml_get<std::string>(node, key, origin, where);
}

StoredCheckpoint parse_metadata(const std::string& text, const std::string& origin,
                                const std::string& where) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    fail(where, cat(origin, ": not valid YAML (", e.what(), ")"));
  }
  if (!root.IsMap())
    fail(where, cat(origin, ": not a YAML map"));
  if (yaml_string(root, "format", origin, where) != kFormatName)
    fail(where, cat(origin, ": 'format' is not '", kFormatName, "'"));
  const int version = yaml_get<int>(root, "format_version", origin, where);
  if (version < 1 || version > kCheckpointFormatVersion)
    fail(where, cat(origin, ": format_version ", version, " is not supported (this MTK reads 1 to ",
                    kCheckpointFormatVersion, "; the checkpoint was written by MTK ",
                    yaml_string(root, "mtk_version", origin, where), ")"));
  StoredCheckpoint st;
  auto& m = st.meta;
  m.format_version = std::to_string(version);
  m.mtk_version = yaml_string(root, "mtk_version", origin, where);
  m.created_utc = yaml_string(root, "created_utc", origin, where);
  m.step = yaml_get<long long>(root, "step", origin, where);
  m.program_step = yaml_get<long long>(root, "program_step", origin, where);
  m.num_ranks = yaml_get<int>(root, "num_ranks", origin, where);
  m.mesh = yaml_string(root, "mesh", origin, where);
  m.layout = yaml_string(root, "layout", origin, where);
  m.data_position = yaml_string(root, "data_position", origin, where);
  m.rng_state = yaml_string(root, "rng_state", origin, where);
  m.config_yaml = yaml_string(root, "config", origin, where);
  const YAML::Node vars = root["variables"];
  if (!vars.IsSequence())
    fail(where, cat(origin, ": 'variables' is not a list"));
  std::set<std::string> seen;
  for (size_t k = 0; k < vars.size(); ++k) {
    const YAML::Node v = vars[k];
    const std::string what = cat(origin, ": variables[", k, "]");
    CheckpointVariable cv;
    cv.name = yaml_string(v, "name", what, where);
    cv.dataset = yaml_string(v, "dataset", what, where);
    cv.dtype = yaml_string(v, "dtype", what, where);
    cv.layout = yaml_string(v, "layout", what, where);
    const auto dims = yaml_get<std::vector<std::string>>(v, "dims", what, where);
    const auto shape = yaml_get<std::vector<long long>>(v, "shape", what, where);
    const auto slice = yaml_get<std::vector<long long>>(v, "slice_shape", what, where);
    if (dims.size() != shape.size() || dims.size() != slice.size())
      fail(where, cat(what, " ('", cv.name, "'): dims, shape and slice_shape differ in length"));
    std::vector<Dimension> d, s;
    for (size_t i = 0; i < dims.size(); ++i) {
      if (shape[i] < 0 || slice[i] < 0 || slice[i] > shape[i] || (slice[i] == 0 && shape[i] != 0) ||
          (slice[i] > 0 && shape[i] % slice[i] != 0))
        fail(where, cat(what, " ('", cv.name, "'): slice_shape does not divide shape"));
      d.push_back({dims[i], shape[i]});
      s.push_back({dims[i], slice[i]});
    }
    cv.shape = Shape(d);
    cv.slice_shape = Shape(s);
    cv.bytes = cv.shape.num_elements() * 4;
    if (cv.dtype != "float32")
      fail(where, cat(what, " ('", cv.name, "'): dtype '", cv.dtype, "' is not supported"));
    if (!seen.insert(cv.name).second)
      fail(where, cat(origin, ": variable '", cv.name, "' is listed twice"));
    st.vars.push_back(cv);
  }
  return st;
}

// ------------------------------------------------------------------------------ slice hashes
struct SliceRecord {
  std::string name;
  std::vector<std::int64_t> origin, shape;
  std::string sha;
};

std::string slice_line(const SliceRecord& r) {
  return cat("slice ", r.sha, " ", csv(r.origin), " ", csv(r.shape), " ", r.name, "\n");
}

struct SliceTable {
  std::int64_t file_bytes = -1;
  std::vector<SliceRecord> slices;
};

SliceTable parse_slices(const std::string& text, const std::string& origin,
                        const std::string& where) {
  SliceTable t;
  int line_no = 0;
  for (const auto& line : split_lines(text)) {
    ++line_no;
    if (line[0] == '#')
      continue;
    std::istringstream ss(line);
    std::string kind;
    ss >> kind;
    if (kind == "file") {
      std::string bytes, name;
      ss >> bytes >> name;
      const auto v = parse_csv(bytes, where, cat(origin, ":", line_no));
      if (v.size() != 1 || name != kVariablesFile)
        fail(where, cat(origin, ":", line_no, ": malformed 'file' line"));
      t.file_bytes = v[0];
    } else if (kind == "slice") {
      SliceRecord r;
      std::string o, s;
      ss >> r.sha >> o >> s;
      std::getline(ss, r.name);
      if (!r.name.empty() && r.name[0] == ' ')
        r.name.erase(0, 1);
      r.origin = parse_csv(o, where, cat(origin, ":", line_no, " origin"));
      r.shape = parse_csv(s, where, cat(origin, ":", line_no, " shape"));
      if (r.sha.size() != 64 || r.name.empty() || r.origin.size() != r.shape.size())
        fail(where, cat(origin, ":", line_no, ": malformed 'slice' line"));
      t.slices.push_back(r);
    } else {
      fail(where, cat(origin, ":", line_no, ": unknown line kind '", kind, "'"));
    }
  }
  if (t.file_bytes < 0)
    fail(where, cat(origin, ": no 'file' line"));
  return t;
}

// The recorded slices of `var` must tile its dataset exactly (same shape, aligned, distinct,
// complete); otherwise some bytes would go unchecked.
void check_tiling(const CheckpointVariable& var, const std::vector<const SliceRecord*>& recs,
                  std::vector<std::string>* errors) {
  const auto shape = sizes_of(var.shape), slice = sizes_of(var.slice_shape);
  const std::string what = cat("variable '", var.name, "' ", var.shape.to_string());
  if (recs.empty()) {
    errors->push_back(cat(what, ": no slice hashes recorded in ", kSlicesFile));
    return;
  }
  std::int64_t expected = 1;
  for (size_t i = 0; i < shape.size(); ++i)
    expected *= slice[i] > 0 ? shape[i] / slice[i] : 1;
  std::set<std::vector<std::int64_t>> origins;
  for (const auto* r : recs) {
    bool ok = r->shape == slice && r->origin.size() == shape.size();
    for (size_t i = 0; ok && i < shape.size(); ++i)
      ok = (slice[i] == 0 || r->origin[i] % slice[i] == 0) && r->origin[i] + slice[i] <= shape[i];
    if (!ok) {
      errors->push_back(cat(what, ": recorded slice origin ", bracket(r->origin), " shape ",
                            bracket(r->shape), " does not fit the saved slice shape ",
                            var.slice_shape.to_string()));
      return;
    }
    if (!origins.insert(r->origin).second) {
      errors->push_back(cat(what, ": slice origin ", bracket(r->origin), " is recorded twice"));
      return;
    }
  }
  if (static_cast<std::int64_t>(origins.size()) != expected)
    errors->push_back(
        cat(what, ": ", origins.size(), " slices recorded, ", expected, " needed to cover it"));
}

std::map<std::string, std::vector<size_t>> records_by_name(const SliceTable& t) {
  std::map<std::string, std::vector<size_t>> m;
  for (size_t k = 0; k < t.slices.size(); ++k)
    m[t.slices[k].name].push_back(k);
  return m;
}

// ------------------------------------------------------------------------- manifest and files
std::string manifest_text(const std::string& metadata_text, const std::string& slices_text) {
  return cat(sha256_hex(metadata_text.data(), metadata_text.size()), "  ", kMetadataFile, "\n",
             sha256_hex(slices_text.data(), slices_text.size()), "  ", kSlicesFile, "\n");
}

// Reads metadata.yaml and slices.sha256 and checks them against manifest.sha256. Appends each
// mismatch to `errors` (the texts are returned even when they mismatch).
void read_small_files(const std::string& dir, std::string* metadata_text, std::string* slices_text,
                      std::vector<std::string>* errors, const std::string& where) {
  if (!fs::is_directory(dir))
    fail(where, cat("'", dir, "' is not a directory"));
  const std::string manifest = read_file(dir + "/" + kManifestFile, where);
  *metadata_text = read_file(dir + "/" + kMetadataFile, where);
  *slices_text = read_file(dir + "/" + kSlicesFile, where);
  std::map<std::string, std::string> listed;
  for (const auto& line : split_lines(manifest)) {
    const auto sep = line.find("  ");
    if (line.size() < 67 || sep != 64) {
      errors->push_back(cat(dir, "/", kManifestFile, ": malformed line '", line, "'"));
      continue;
    }
    listed[line.substr(66)] = line.substr(0, 64);
  }
  const std::pair<const char*, const std::string*> files[] = {{kMetadataFile, metadata_text},
                                                              {kSlicesFile, slices_text}};
  for (const auto& [name, text] : files) {
    auto it = listed.find(name);
    if (it == listed.end()) {
      errors->push_back(cat(dir, "/", kManifestFile, " does not list ", name));
      continue;
    }
    const std::string actual = sha256_hex(text->data(), text->size());
    if (actual != it->second)
      errors->push_back(
          cat(dir, "/", name, " is corrupted: SHA-256 ", actual, ", manifest says ", it->second));
  }
}

// Checks a dataset against its metadata entry: float32, dims attribute, global shape.
void check_dataset(hid_t dset, const CheckpointVariable& v, const std::string& file,
                   const std::string& where) {
  const std::string what = cat("dataset '", v.dataset, "' in ", file);
  H5Id type(h5(H5Dget_type(dset), where, "H5Dget_type"), H5Tclose);
  if (H5Tget_class(type) != H5T_FLOAT || H5Tget_size(type) != 4)
    fail(where, cat(what, " (variable '", v.name, "') is not float32"));
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

// ---------------------------------------------------------------------------------- writing
std::vector<CheckpointVariable> describe_variables(Program& program, const std::string& where) {
  std::vector<CheckpointVariable> vars;
  for (const auto& name : program.variable_names()) {
    const TensorLayout& l = program.variable_layout(name);
    CheckpointVariable v;
    v.name = name;
    v.shape = l.shape();
    v.slice_shape = l.slice_shape();
    v.dtype = "float32";
    v.dataset = dataset_path(name, where);
    v.layout = l.to_string();
    v.bytes = v.shape.num_elements() * 4;
    const auto slice = program.variable_slice(name);
    if (static_cast<std::int64_t>(slice.extent(0)) != v.slice_shape.num_elements())
      fail(where, cat("variable '", name, "' ", v.shape.to_string(), ": its float32 storage holds ",
                      slice.extent(0), " values, its slice ", v.slice_shape.to_string(), " needs ",
                      v.slice_shape.num_elements(), " (only float32 variables can be saved)"));
    vars.push_back(v);
  }
  return vars;
}

// How the slices are written. Each slice is one contiguous chunk written by one rank. When the
// ranks span several nodes the data is written with collective MPI-IO and ROMIO's defaults (and
// the file system's driver) decide on aggregation. When every rank shares one node (one file
// system client) aggregation only adds copies and synchronisation: collective buffering and data
// sieving are disabled and each rank writes its chunk with independent MPI-IO (measured 3-6x
// faster on 2 and 4 ranks of one node; docs/checkpoint-format.md). Dataset creation and all
// other metadata stay collective. Overrides: MTK_CKPT_MPIIO=collective|independent,
// MTK_CKPT_MPIIO_HINTS="key=value,key=value" (e.g. romio_cb_write=enable,cb_nodes=8).
class MpiInfo {
 public:
  explicit MpiInfo(MPI_Comm comm) {
    MPI_Info_create(&info_);
    MPI_Comm node;
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int node_size = 0, size = 0;
    MPI_Comm_size(node, &node_size);
    MPI_Comm_size(comm, &size);
    MPI_Comm_free(&node);
    int one_node = node_size == size ? 1 : 0, all = 0;
    MPI_Allreduce(&one_node, &all, 1, MPI_INT, MPI_MIN, comm);
    collective_ = all == 0;
    if (const char* mode = std::getenv("MTK_CKPT_MPIIO")) {
      if (std::strcmp(mode, "collective") == 0)
        collective_ = true;
      else if (std::strcmp(mode, "independent") == 0)
        collective_ = false;
    }
    if (all) {
      MPI_Info_set(info_, "romio_cb_write", "disable");
      MPI_Info_set(info_, "romio_ds_write", "disable");
    }
    if (const char* env = std::getenv("MTK_CKPT_MPIIO_HINTS")) {
      std::stringstream ss(env);
      std::string kv;
      while (std::getline(ss, kv, ',')) {
        const auto eq = kv.find('=');
        if (eq != std::string::npos && eq > 0)
          MPI_Info_set(info_, kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str());
      }
    }
  }
  ~MpiInfo() { MPI_Info_free(&info_); }
  MpiInfo(const MpiInfo&) = delete;
  MpiInfo& operator=(const MpiInfo&) = delete;
  MPI_Info get() const { return info_; }
  bool collective() const { return collective_; }

 private:
  MPI_Info info_ = MPI_INFO_NULL;
  bool collective_ = true;
};

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

// Collective: creates variables.h5 and writes every variable, each slice by its replica group's
// first member. Returns the SHA-256 records of the slices this rank wrote.
std::vector<SliceRecord> write_variables(Program& program,
                                         const std::vector<CheckpointVariable>& vars,
                                         const std::string& path, const std::string& where) {
  const Mesh& mesh = program.mesh();
  // This rank's slices on the host, and which of them it writes (one member of each replica
  // group). A second thread hashes them from memory while this one writes and waits for the
  // disk; it makes no MPI or HDF5 call.
  struct Slice {
    bool writer = false;
    std::vector<std::int64_t> origin;
    Kokkos::View<float*, Kokkos::HostSpace> host;
  };
  std::vector<Slice> slices(vars.size());
  std::vector<SliceRecord> mine;
  std::vector<size_t> mine_of;  // index in `slices` of each record of `mine`
  for (size_t k = 0; k < vars.size(); ++k) {
    const TensorLayout& layout = program.variable_layout(vars[k].name);
    Slice& sl = slices[k];
    sl.writer = mesh.rank_in_group(layout.replicated_axes()) == 0;
    const auto origin = layout.slice_origin(mesh.coordinates());
    sl.origin.assign(origin.begin(), origin.end());
    sl.host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(),
                                                  program.variable_slice(vars[k].name));
    if (sl.writer) {
      mine.push_back({vars[k].name, sl.origin, sizes_of(vars[k].slice_shape), ""});
      mine_of.push_back(k);
    }
  }
  std::thread hasher([&mine, &mine_of, &slices] {
    for (size_t r = 0; r < mine.size(); ++r) {
      const auto& host = slices[mine_of[r]].host;
      mine[r].sha = sha256_hex(host.data(), host.extent(0) * sizeof(float));
    }
  });
  struct Join {
    std::thread& t;
    ~Join() {
      if (t.joinable())
        t.join();
    }
  } join{hasher};

  double tc = MPI_Wtime();
  H5Id fapl(h5(H5Pcreate(H5P_FILE_ACCESS), where, "H5Pcreate(file access)"), H5Pclose);
  MpiInfo info(mesh.comm());
  h5ok(H5Pset_fapl_mpio(fapl, mesh.comm(), info.get()), where, "H5Pset_fapl_mpio");
  // v1.10 format: checksummed object headers and chunk indexes (readers need HDF5 >= 1.10).
  h5ok(H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110), where, "H5Pset_libver_bounds");
  h5ok(H5Pset_all_coll_metadata_ops(fapl, true), where, "H5Pset_all_coll_metadata_ops");
  h5ok(H5Pset_coll_metadata_write(fapl, true), where, "H5Pset_coll_metadata_write");
  H5Id file(h5(H5Fcreate(path.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, fapl), where,
               cat("creating '", path, "'")),
            H5Fclose);
  H5Id lcpl(h5(H5Pcreate(H5P_LINK_CREATE), where, "H5Pcreate(link create)"), H5Pclose);
  h5ok(H5Pset_create_intermediate_group(lcpl, 1), where, "H5Pset_create_intermediate_group");
  h5ok(H5Pset_char_encoding(lcpl, H5T_CSET_UTF8), where, "H5Pset_char_encoding");
  H5Id dxpl(h5(H5Pcreate(H5P_DATASET_XFER), where, "H5Pcreate(transfer)"), H5Pclose);
  h5ok(H5Pset_dxpl_mpio(dxpl, info.collective() ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT),
       where, "H5Pset_dxpl_mpio");
  h5ok(H5Pset_dxpl_mpio_chunk_opt(dxpl, H5FD_MPIO_CHUNK_ONE_IO), where,
       "H5Pset_dxpl_mpio_chunk_opt");

  for (size_t k = 0; k < vars.size(); ++k) {
    const CheckpointVariable& v = vars[k];
    const Slice& sl = slices[k];
    const std::string what = cat("variable '", v.name, "' ", v.shape.to_string());
    const auto global = hsizes(sizes_of(v.shape));
    const auto local = sizes_of(v.slice_shape);
    const bool scalar = v.shape.rank() == 0;
    const bool empty = v.shape.num_elements() == 0;
    H5Id fspace(
        h5(scalar ? H5Screate(H5S_SCALAR)
                  : H5Screate_simple(static_cast<int>(global.size()), global.data(), nullptr),
           where, cat("dataspace of ", what)),
        H5Sclose);
    H5Id dcpl(h5(H5Pcreate(H5P_DATASET_CREATE), where, "H5Pcreate(dataset create)"), H5Pclose);
    if (!scalar && !empty) {
      const auto chunk = chunk_dims(v.slice_shape);
      h5ok(H5Pset_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data()), where,
           cat("H5Pset_chunk for ", what));
    }
    h5ok(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER), where, "H5Pset_fill_time");
    h5ok(H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY), where, "H5Pset_alloc_time");
    H5Id dset(
        h5(H5Dcreate2(file, v.dataset.c_str(), H5T_IEEE_F32LE, fspace, lcpl, dcpl, H5P_DEFAULT),
           where, cat("creating dataset '", v.dataset, "' for ", what)),
        H5Dclose);
    std::string dims;
    for (const auto& d : v.shape.names())
      dims += (dims.empty() ? "" : ",") + d;
    write_string_attribute(dset, "dims", dims, where, what);
    write_string_attribute(dset, "mtk_name", v.name, where, what);
    write_string_attribute(dset, "mtk_layout", v.layout, where, what);

    add_time("h5_create", MPI_Wtime() - tc);
    float dummy = 0;
    const float* data = sl.host.extent(0) > 0 ? sl.host.data() : &dummy;
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
        h5ok(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start.data(), nullptr, count.data(),
                                 nullptr),
             where, cat("selecting the slice of ", what));
      }
    } else {
      h5ok(H5Sselect_none(fspace), where, "H5Sselect_none");
      h5ok(H5Sselect_none(mspace), where, "H5Sselect_none");
    }
    const double t0 = MPI_Wtime();
    h5ok(H5Dwrite(dset, H5T_NATIVE_FLOAT, mspace, fspace, dxpl, data), where,
         cat("writing the slice of ", what, " at origin ", bracket(sl.origin)));
    add_time("h5_write", MPI_Wtime() - t0);
    if (k == 0)
      test_hook("first_dataset");
    test_delay();
    tc = MPI_Wtime();
  }
  // MPI_File_sync on every rank (the mpio driver syncs on a flush that is not a close), then
  // the close.
  double t0 = MPI_Wtime();
  h5ok(H5Fflush(file, H5F_SCOPE_GLOBAL), where, cat("flushing '", path, "'"));
  dxpl.reset();
  lcpl.reset();
  h5ok(H5Fclose(file.release()), where, cat("closing '", path, "'"));
  add_time("h5_flush_close", MPI_Wtime() - t0);
  t0 = MPI_Wtime();
  hasher.join();
  add_time("hash_wait", MPI_Wtime() - t0);
  return mine;
}

void write_directory(Program& program, const std::string& dir, const CheckpointMetadata& meta_in,
                     const std::string& where) {
  quiet_hdf5();
  const Mesh& mesh = program.mesh();
  const MPI_Comm comm = mesh.comm();
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
  double t0 = MPI_Wtime();
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
  add_time("prepare", MPI_Wtime() - t0);
  const std::string h5path = dir + "/" + kVariablesFile;
  const std::vector<SliceRecord> mine =
      agree_on_failure(comm, [&] { return write_variables(program, vars, h5path, where); });
  test_hook("wrote_data");
  t0 = MPI_Wtime();

  std::string lines;
  for (const auto& r : mine)
    lines += slice_line(r);
  const std::vector<std::string> all = gather_strings(comm, lines);
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
    std::string slices_text =
        cat("# MTK checkpoint slice hashes (docs/checkpoint-format.md): SHA-256 of each saved "
            "slice's\n# float32 little-endian values in row-major order; origin and shape per "
            "dim, '-' for a scalar.\n# slice <sha256> <origin> <shape> <variable>\nfile ",
            bytes, " ", kVariablesFile, "\n");
    for (const auto& r : table.slices)
      slices_text += slice_line(r);
    write_file_durably(dir + "/" + kSlicesFile, slices_text, where);
    write_file_durably(dir + "/" + kMetadataFile, metadata_text, where);
    write_file_durably(dir + "/" + kManifestFile, manifest_text(metadata_text, slices_text), where);
    fsync_path(dir, true, where);
  });
  add_time("manifest", MPI_Wtime() - t0);
  test_hook("wrote_manifest");
}

void check_same_ranks(const Mesh& a, const Mesh& b, const std::string& where) {
  int result = MPI_UNEQUAL;
  MPI_Comm_compare(a.comm(), b.comm(), &result);
  if (result == MPI_UNEQUAL)
    fail(where,
         cat("the program's mesh ", b.shape().to_string(),
             " is not on the ranks of the checkpoint manager's mesh ", a.shape().to_string()));
}

}  // namespace

// ================================================================================== public API

std::string checkpoint_dir_name(std::int64_t step) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "step-%09lld", static_cast<long long>(step));
  return buf;
}

void write_checkpoint_directory(Program& program, const std::string& dir,
                                const CheckpointMetadata& metadata) {
  write_directory(program, strip_trailing_slashes(dir), metadata,
                  "mtk::write_checkpoint_directory");
}

void restore_checkpoint(Program& program, const std::string& path_in,
                        CheckpointMetadata* metadata) {
  const std::string where = "mtk::restore_checkpoint";
  const std::string path = strip_trailing_slashes(path_in);
  quiet_hdf5();
  const Mesh& mesh = program.mesh();
  const MPI_Comm comm = mesh.comm();
  Kokkos::Profiling::pushRegion("mtk::restore_checkpoint");

  double t0 = MPI_Wtime();
  // 1. Rank 0 reads the small files and checks them against the manifest.
  std::string metadata_text, slices_text;
  agree_on_failure(comm, [&] {
    if (mesh.rank() != 0)
      return;
    std::vector<std::string> errors;
    read_small_files(path, &metadata_text, &slices_text, &errors, where);
    if (!errors.empty())
      fail(where, errors.front());
  });
  bcast_string(comm, metadata_text);
  bcast_string(comm, slices_text);

  // 2. Every rank parses the same texts and matches them with the program's variables.
  StoredCheckpoint st;
  SliceTable table;
  std::vector<const CheckpointVariable*> plan;
  std::map<std::string, std::vector<size_t>> by_name;
  agree_on_failure(comm, [&] {
    st = parse_metadata(metadata_text, path + "/" + kMetadataFile, where);
    table = parse_slices(slices_text, path + "/" + kSlicesFile, where);
    by_name = records_by_name(table);
    std::map<std::string, const CheckpointVariable*> stored;
    std::string held;
    for (const auto& v : st.vars) {
      stored[v.name] = &v;
      held += (held.empty() ? "" : ", ") + v.name;
    }
    std::vector<std::string> errors;
    for (const auto& name : program.variable_names()) {
      const TensorLayout& l = program.variable_layout(name);
      auto it = stored.find(name);
      if (it == stored.end())
        fail(where, cat("variable '", name, "' ", l.shape().to_string(), " is not in checkpoint ",
                        path, " (it holds: ", held, ")"));
      if (it->second->shape != l.shape())
        fail(where,
             cat("variable '", name, "': checkpoint ", path, " stores shape ",
                 it->second->shape.to_string(), ", the program expects ", l.shape().to_string()));
      std::vector<const SliceRecord*> recs;
      for (size_t k : by_name[name])
        recs.push_back(&table.slices[k]);
      check_tiling(*it->second, recs, &errors);
      if (!errors.empty())
        fail(where, cat("checkpoint ", path, ": ", errors.front()));
      plan.push_back(it->second);
    }
  });

  // 3. Every rank reads its own hyperslab of every variable (independently: a damaged file
  // fails single ranks without hanging the others) and checks the saved slices assigned to it.
  add_time("metadata", MPI_Wtime() - t0);
  t0 = MPI_Wtime();
  std::vector<Kokkos::View<float*>> views(plan.size());
  std::vector<Kokkos::View<float*>::HostMirror> hosts(plan.size());
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
      const MeshShape& ms = mesh.shape();
      for (size_t k = 0; k < plan.size(); ++k) {
        const CheckpointVariable& v = *plan[k];
        const TensorLayout& layout = program.variable_layout(v.name);
        const std::string what = cat("variable '", v.name, "' ", v.shape.to_string());
        H5Id dset(h5(H5Dopen2(file, v.dataset.c_str(), H5P_DEFAULT), where,
                     cat("opening dataset '", v.dataset, "' of ", what, " in ", h5path)),
                  H5Dclose);
        check_dataset(dset, v, h5path, where);
        const auto origin64 = layout.slice_origin(mesh.coordinates());
        const std::vector<std::int64_t> origin(origin64.begin(), origin64.end());
        const auto local = sizes_of(layout.slice_shape());
        views[k] = Kokkos::View<float*>(
            Kokkos::view_alloc(Kokkos::WithoutInitializing, "mtk::checkpoint::" + v.name),
            static_cast<size_t>(layout.slice_shape().num_elements()));
        hosts[k] = Kokkos::create_mirror_view(views[k]);
        const float* host = hosts[k].data();
        read_block(dset, origin, local, hosts[k].data(), where,
                   cat("the slice at ", bracket(origin), " of ", what, " in ", h5path));
        // Each recorded slice is checked by one rank: one that holds all of it when some do
        // (hashed from memory on the worker thread), else one chosen round-robin (read again
        // from the file).
        std::vector<std::vector<std::int64_t>> origins(static_cast<size_t>(mesh.size()));
        for (int p = 0; p < mesh.size(); ++p) {
          const auto o = layout.slice_origin(ms.coordinates_of(p));
          origins[static_cast<size_t>(p)].assign(o.begin(), o.end());
        }
        for (size_t idx : by_name[v.name]) {
          const SliceRecord& r = table.slices[idx];
          std::vector<int> holders;
          for (int p = 0; p < mesh.size(); ++p)
            if (contains(origins[static_cast<size_t>(p)], local, r.origin, r.shape))
              holders.push_back(p);
          const int checker =
              holders.empty() ? static_cast<int>(idx % mesh.size()) : holders[idx % holders.size()];
          if (checker != mesh.rank())
            continue;
          const std::string slice = cat(what, ": the slice at origin ", bracket(r.origin),
                                        " shape ", bracket(r.shape), " in ", h5path);
          if (!holders.empty()) {
            worker.push({host, origin, local, r.origin, r.shape, r.sha, slice});
            continue;
          }
          std::int64_t bytes = 0;
          const std::string sha = hash_dataset_block(dset, r.origin, r.shape, &bytes, where, what);
          if (sha != r.sha)
            errors.push_back(cat(slice, " is corrupted (SHA-256 ", sha, ", recorded ", r.sha, ")"));
        }
        Kokkos::deep_copy(views[k], hosts[k]);
      }
    } catch (const std::exception& e) {
      local_failure = e.what();
    }
    add_time("read", MPI_Wtime() - t0);
    t0 = MPI_Wtime();
    const auto mismatches = worker.finish();
    add_time("hash_wait", MPI_Wtime() - t0);
    errors.insert(errors.end(), mismatches.begin(), mismatches.end());
  }
  hosts.clear();
  if (local_failure.empty() && !errors.empty())
    local_failure = cat(where, ": ", errors.front(),
                        errors.size() > 1 ? cat(" (and ", errors.size() - 1, " more)") : "");
  agree(comm, local_failure);

  // 4. Everything read and verified on every rank: commit into the program.
  for (size_t k = 0; k < plan.size(); ++k)
    program.set_variable_slice(plan[k]->name, views[k]);
  program.set_step(st.meta.program_step >= 0 ? st.meta.program_step : st.meta.step);
  if (metadata != nullptr)
    *metadata = st.meta;
  report_times(cat("restore ", path), mesh.rank() == 0);
  Kokkos::Profiling::popRegion();
}

CheckpointVerification verify_checkpoint(const std::string& dir_in, MPI_Comm comm) {
  const std::string where = "mtk::verify_checkpoint";
  const std::string dir = strip_trailing_slashes(dir_in);
  quiet_hdf5();
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  CheckpointVerification result;
  result.path = dir;
  std::vector<std::string> errors;
  std::string metadata_text, slices_text;
  int fatal = 0;
  if (rank == 0) {
    try {
      read_small_files(dir, &metadata_text, &slices_text, &errors, where);
    } catch (const std::exception& e) {
      errors.push_back(e.what());
      fatal = 1;
    }
  }
  MPI_Bcast(&fatal, 1, MPI_INT, 0, comm);
  StoredCheckpoint st;
  SliceTable table;
  if (!fatal) {
    bcast_string(comm, metadata_text);
    bcast_string(comm, slices_text);
    try {  // the same texts on every rank: the same outcome
      st = parse_metadata(metadata_text, dir + "/" + kMetadataFile, where);
      table = parse_slices(slices_text, dir + "/" + kSlicesFile, where);
    } catch (const std::exception& e) {
      if (rank == 0)
        errors.push_back(e.what());
      fatal = 1;
    }
  }
  std::int64_t bytes = 0, slices = 0;
  if (!fatal) {
    const std::string h5path = dir + "/" + kVariablesFile;
    try {
      const auto by_name = records_by_name(table);
      if (rank == 0) {
        std::error_code ec;
        const auto actual = static_cast<std::int64_t>(fs::file_size(h5path, ec));
        if (ec)
          fail(where, cat("cannot stat '", h5path, "': ", ec.message()));
        if (actual != table.file_bytes)
          errors.push_back(cat(h5path, " has ", actual, " bytes; ", kSlicesFile, " recorded ",
                               table.file_bytes));
        std::set<std::string> known;
        for (const auto& v : st.vars) {
          known.insert(v.name);
          std::vector<const SliceRecord*> recs;
          auto it = by_name.find(v.name);
          if (it != by_name.end())
            for (size_t k : it->second)
              recs.push_back(&table.slices[k]);
          check_tiling(v, recs, &errors);
        }
        for (const auto& [name, idx] : by_name)
          if (!known.count(name))
            errors.push_back(cat(kSlicesFile, " records slices of '", name,
                                 "', which metadata.yaml does not list"));
      }
      H5Id fapl = read_fapl(where);
      H5Id file(
          h5(H5Fopen(h5path.c_str(), H5F_ACC_RDONLY, fapl), where, cat("opening '", h5path, "'")),
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
        H5Id dset(
            h5(H5Dopen2(file, v.dataset.c_str(), H5P_DEFAULT), where,
               cat("opening dataset '", v.dataset, "' of variable '", v.name, "' in ", h5path)),
            H5Dclose);
        try {
          if (mine_to_check)
            check_dataset(dset, v, h5path, where);
        } catch (const std::exception& e) {
          errors.push_back(e.what());
          continue;
        }
        if (it == by_name.end())
          continue;
        for (size_t idx : it->second) {
          if (static_cast<int>(idx % size) != rank)
            continue;
          const SliceRecord& r = table.slices[idx];
          const std::string what = cat("variable '", v.name, "' ", v.shape.to_string());
          try {
            const std::string sha =
                hash_dataset_block(dset, r.origin, r.shape, &bytes, where,
                                   cat("slice ", bracket(r.origin), " of ", what));
            ++slices;
            if (sha != r.sha)
              errors.push_back(cat(what, ": the slice at origin ", bracket(r.origin), " shape ",
                                   bracket(r.shape), " in ", h5path, " is corrupted (SHA-256 ", sha,
                                   ", recorded ", r.sha, ")"));
          } catch (const std::exception& e) {
            errors.push_back(e.what());
          }
        }
      }
    } catch (const std::exception& e) {
      errors.push_back(e.what());
    }
  }
  // Rank 0 collects every rank's findings; every rank returns the same result.
  std::string mine;
  for (const auto& e : errors)
    mine += e + "\n";
  const auto all = gather_strings(comm, mine);
  std::string report;
  for (const auto& s : all)
    report += s;
  bcast_string(comm, report);
  long long counts[2] = {static_cast<long long>(bytes), static_cast<long long>(slices)}, sums[2];
  MPI_Allreduce(counts, sums, 2, MPI_LONG_LONG, MPI_SUM, comm);
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

CheckpointInfo checkpoint_info(const std::string& dir_in) {
  const std::string where = "mtk::checkpoint_info";
  const std::string dir = strip_trailing_slashes(dir_in);
  CheckpointInfo info;
  info.path = dir;
  const std::string text = read_file(dir + "/" + kMetadataFile, where);
  StoredCheckpoint st = parse_metadata(text, dir + "/" + kMetadataFile, where);
  info.metadata = st.meta;
  info.variables = st.vars;
  for (const auto& v : st.vars)
    info.variable_bytes += v.bytes;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file(ec))
      info.file_bytes += static_cast<std::int64_t>(e.file_size(ec));
  return info;
}

std::string format_checkpoint_info(const CheckpointInfo& info) {
  const auto& m = info.metadata;
  auto mib = [](std::int64_t b) {
    char buf[32];
    if (b < (1 << 20))
      std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(b) / 1024);
    else if (b < (std::int64_t(1) << 30))
      std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1 << 20));
    else
      std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(b) / (1 << 30));
    return std::string(buf);
  };
  auto one_line = [](std::string s, size_t max) {
    for (char& c : s)
      if (c == '\n')
        c = ' ';
    if (s.size() > max)
      s = s.substr(0, max) + "...";
    return s.empty() ? std::string("(none)") : s;
  };
  std::ostringstream os;
  os << "checkpoint     " << info.path << "\n";
  os << "step           " << m.step << " (program step " << m.program_step << ")\n";
  os << "created        " << m.created_utc << " by MTK " << m.mtk_version << ", format "
     << kFormatName << " v" << m.format_version << "\n";
  os << "saved on       " << m.num_ranks << " rank(s), mesh " << m.mesh << "\n";
  os << "layout         " << one_line(m.layout, 200) << "\n";
  os << "data position  " << one_line(m.data_position, 200) << "\n";
  os << "rng state      " << one_line(m.rng_state, 64) << "\n";
  const auto config_lines = std::count(m.config_yaml.begin(), m.config_yaml.end(), '\n');
  os << "config         "
     << (m.config_yaml.empty() ? std::string("(none)")
                               : cat(config_lines, " lines in metadata.yaml"))
     << "\n";
  os << "variables      " << info.variables.size() << ", " << mib(info.variable_bytes)
     << " of float32; files " << mib(info.file_bytes) << "\n";
  size_t wn = 4, ws = 5;
  std::vector<std::string> shapes;
  for (const auto& v : info.variables) {
    wn = std::max(wn, v.name.size());
    shapes.push_back(v.shape.to_string());
    ws = std::max(ws, shapes.back().size());
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "  %%-%zus  %%-%zus  %%12s  %%s\n", wn, ws);
  char line[4096];
  std::snprintf(line, sizeof line, buf, "name", "shape", "bytes", "layout saved with");
  os << line;
  for (size_t k = 0; k < info.variables.size(); ++k) {
    const auto& v = info.variables[k];
    std::snprintf(line, sizeof line, buf, v.name.c_str(), shapes[k].c_str(),
                  std::to_string(v.bytes).c_str(), v.layout.c_str());
    os << line;
  }
  return os.str();
}

std::string resolve_checkpoint_path(const std::string& path_in) {
  const std::string where = "mtk::resolve_checkpoint_path";
  const std::string path = strip_trailing_slashes(path_in);
  std::error_code ec;
  if (fs::is_regular_file(path + "/" + kMetadataFile, ec))
    return path;
  for (const std::string& root : {path, path + "/checkpoints"}) {
    if (!fs::is_regular_file(root + "/" + kLatestFile, ec))
      continue;
    const std::string name = trim(read_file(root + "/" + kLatestFile, where));
    std::int64_t step = 0;
    if (!parse_step_dir(name, &step))
      fail(where, cat("'", root, "/", kLatestFile, "' does not name a checkpoint ('", name, "')"));
    return root + "/" + name;
  }
  fail(where, cat("'", path,
                  "' is neither a checkpoint directory (no metadata.yaml) nor a run or "
                  "checkpoints directory with a 'latest' file"));
}

// ========================================================================= CheckpointManager

CheckpointManager::CheckpointManager(std::string run_dir, int keep_last_k, const Mesh& mesh)
    : run_dir_(strip_trailing_slashes(std::move(run_dir))),
      root_(run_dir_ + "/checkpoints"),
      keep_last_k_(keep_last_k),
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
  const MPI_Comm comm = program.mesh().comm();
  const bool root = program.mesh().rank() == 0;
  CheckpointMetadata meta = metadata;
  if (meta.step < 0)
    meta.step = program.step();
  const std::string name = checkpoint_dir_name(meta.step);
  const double t_start = MPI_Wtime();
  if (cleanup_.valid())
    cleanup_.get();  // the previous save's deletions
  const std::string final_path = root_ + "/" + name;
  std::string tmp;
  // Rank 0 prepares: checkpoints/ exists, leftovers of interrupted saves are gone.
  agree_on_failure(comm, [&] {
    if (!root)
      return;
    std::error_code ec;
    fs::create_directories(root_, ec);
    if (ec)
      fail(where, cat("cannot create '", root_, "': ", ec.message()));
    for (const auto& e : fs::directory_iterator(root_)) {
      const std::string n = e.path().filename().string();
      if (n.rfind(".tmp-", 0) == 0 || n.rfind(".old-", 0) == 0 || n == "latest.tmp") {
        fs::remove_all(e.path(), ec);
        log(cat("removed '", n, "', left by an interrupted save"));
      } else if (n.rfind(".trash-", 0) == 0) {
        fs::remove_all(e.path(), ec);  // deletion of an old checkpoint that was interrupted
      }
    }
    tmp = root_ + "/.tmp-" + name + "-" + random_nonce();
  });
  bcast_string(comm, tmp);
  add_time("cleanup", MPI_Wtime() - t_start);
  try {
    write_directory(program, tmp, meta, where);
  } catch (const Error&) {
    // Every rank failed together (agreed); the partial directory goes now rather than at the
    // next save.
    std::error_code ec;
    if (root)
      fs::remove_all(tmp, ec);
    throw;
  }
  const double t_commit = MPI_Wtime();
  std::vector<std::string> trash;  // rank 0: directories to delete in the background
  // Commit (rank 0): rename into place, then point `latest` at it; each step durable.
  agree_on_failure(comm, [&] {
    if (!root)
      return;
    test_hook("before_rename");
    std::error_code ec;
    if (fs::exists(final_path, ec)) {
      bool swapped = false;
#ifdef RENAME_EXCHANGE
      swapped =
          ::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, final_path.c_str(), RENAME_EXCHANGE) == 0;
#endif
      if (!swapped) {  // not atomic, but both copies stay on disk until the new one is in place
        const std::string old = root_ + "/.old-" + name + "-" + random_nonce();
        if (::rename(final_path.c_str(), old.c_str()) != 0)
          fail(where, cat("cannot move '", final_path, "' aside: ", std::strerror(errno)));
        if (::rename(tmp.c_str(), final_path.c_str()) != 0)
          fail(where,
               cat("cannot rename '", tmp, "' to '", final_path, "': ", std::strerror(errno)));
        fs::remove_all(old, ec);
      } else {
        // tmp now holds the replaced checkpoint.
        const std::string doomed = root_ + "/.trash-" + name + "-" + random_nonce();
        if (::rename(tmp.c_str(), doomed.c_str()) == 0)
          trash.push_back(doomed);
        else
          fs::remove_all(tmp, ec);
      }
      log(cat("replaced the existing checkpoint ", name));
    } else if (::rename(tmp.c_str(), final_path.c_str()) != 0) {
      fail(where, cat("cannot rename '", tmp, "' to '", final_path, "': ", std::strerror(errno)));
    }
    fsync_path(root_, true, where);
    test_hook("renamed");
    const std::string latest_tmp = root_ + "/latest.tmp", latest = root_ + "/" + kLatestFile;
    write_file_durably(latest_tmp, name + "\n", where);
    if (::rename(latest_tmp.c_str(), latest.c_str()) != 0)
      fail(where,
           cat("cannot rename '", latest_tmp, "' to '", latest, "': ", std::strerror(errno)));
    fsync_path(root_, true, where);
    test_hook("updated_latest");
    // Retention: keep this one and the newest keep_last_k - 1 older ones. Failures here are
    // logged, not raised: the checkpoint is committed.
    try {
      std::vector<std::string> older;
      for (const auto& [step, n] : scan_checkpoints(root_)) {
        if (step < meta.step)
          older.push_back(n);
        if (step > meta.step)
          log(cat("checkpoint ", n, " is newer than ", name,
                  " (the run went back to an earlier step); restore_latest() will not pick it"));
      }
      std::reverse(older.begin(), older.end());
      for (size_t k = static_cast<size_t>(keep_last_k_ - 1); k < older.size(); ++k) {
        // Out of sight at once (atomic rename); the files go in the background.
        const std::string doomed = root_ + "/.trash-" + older[k] + "-" + random_nonce();
        if (::rename((root_ + "/" + older[k]).c_str(), doomed.c_str()) == 0)
          trash.push_back(doomed);
        else
          log(cat("could not remove old checkpoint ", older[k], ": ", std::strerror(errno)));
      }
    } catch (const std::exception& e) {
      log(cat("retention: ", e.what()));
    }
  });
  if (!trash.empty())
    cleanup_ = std::async(std::launch::async, [trash] {
      std::error_code ec;
      for (const auto& t : trash)
        fs::remove_all(t, ec);
    });
  add_time("commit", MPI_Wtime() - t_commit);
  report_times(cat("save ", name), program.mesh().rank() == 0);
  Kokkos::Profiling::popRegion();
  return final_path;
}

bool CheckpointManager::restore_latest(Program& program, CheckpointMetadata* metadata,
                                       std::string* path) {
  const std::string where = "mtk::CheckpointManager::restore_latest";
  check_same_ranks(mesh_, program.mesh(), where);
  const MPI_Comm comm = program.mesh().comm();
  std::string text;
  agree_on_failure(comm, [&] {
    if (program.mesh().rank() != 0)
      return;
    const auto all = scan_checkpoints(root_);
    std::vector<std::string> order;
    std::int64_t latest_step = -1;
    std::string latest_name;
    std::error_code ec;
    if (fs::is_regular_file(root_ + "/" + kLatestFile, ec)) {
      latest_name = trim(read_file(root_ + "/" + kLatestFile, where));
      for (const auto& [step, n] : all)
        if (n == latest_name)
          latest_step = step;
      if (latest_step < 0)
        log(cat("'", root_, "/latest' names '", latest_name,
                "', which is missing or incomplete; trying the newest complete checkpoint"));
    }
    for (auto it = all.rbegin(); it != all.rend(); ++it)
      if (latest_step < 0 || it->first < latest_step)
        order.push_back(it->second);
    if (latest_step >= 0)
      order.insert(order.begin(), latest_name);
    for (const auto& n : order)
      text += root_ + "/" + n + "\n";
  });
  bcast_string(comm, text);
  const auto candidates = split_lines(text);
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
  bcast_string(mesh_.comm(), text);
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
    const std::string name = trim(read_file(root_ + "/" + kLatestFile, "mtk::CheckpointManager"));
    std::int64_t step = 0;
    if (parse_step_dir(name, &step) && complete_checkpoint(root_ + "/" + name))
      text = root_ + "/" + name;
  });
  bcast_string(mesh_.comm(), text);
  return text;
}

}  // namespace mtk
