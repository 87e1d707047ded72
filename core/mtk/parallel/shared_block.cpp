// Shared memory among the ranks of one node — see shared_block.hpp.
#include <mtk/parallel/shared_block.hpp>

#include <cerrno>
#include <fcntl.h>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

namespace mtk::detail {
namespace {

std::string shm_name(long long pid, long long owner, int block) {
  return "/mtk-node-" + std::to_string(pid) + "-" + std::to_string(owner) + "-" +
         std::to_string(block);
}

// This rank's shared file of `bytes`, mapped; nullptr (and errno) on failure.
char* make_own(const std::string& name, std::size_t bytes) {
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0 && errno == EEXIST) {  // left by a process that died with this pid
    shm_unlink(name.c_str());
    fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  }
  if (fd < 0)
    return nullptr;
  void* p = MAP_FAILED;
  if (posix_fallocate(fd, 0, static_cast<off_t>(bytes)) == 0)
    p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    shm_unlink(name.c_str());
    return nullptr;
  }
  return static_cast<char*>(p);
}

char* map_other(const std::string& name, std::size_t bytes) {
  const int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0)
    return nullptr;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  return p == MAP_FAILED ? nullptr : static_cast<char*>(p);
}

}  // namespace

void SharedBlock::unmap() {
  for (char*& p : at)
    if (p != nullptr) {
      munmap(p, bytes);
      p = nullptr;
    }
}

bool all_ranks(MPI_Comm comm, bool ok) {
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm);
  return all == 1;
}

MPI_Comm node_comm_of(MPI_Comm comm) {
  int size = 1, node_size = 0;
  MPI_Comm_size(comm, &size);
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  MPI_Comm_size(node, &node_size);
  // Every rank alike: one node (each rank's node holds all of them).
  if (!all_ranks(comm, node_size == size)) {
    MPI_Comm_free(&node);
    return MPI_COMM_NULL;
  }
  return node;
}

SharedNames::SharedNames(MPI_Comm comm) : comm_(comm) {
  static std::atomic<long long> owners{0};
  MPI_Comm_rank(comm, &rank_);
  MPI_Comm_size(comm, &size_);
  const long long mine[2] = {static_cast<long long>(getpid()), owners++};
  ids_.resize(2 * static_cast<size_t>(size_));
  MPI_Allgather(mine, 2, MPI_LONG_LONG, ids_.data(), 2, MPI_LONG_LONG, comm);
}

bool SharedNames::make(SharedBlock& b, std::size_t bytes) {
  const int index = made_++;
  b.bytes = bytes;
  b.at.assign(static_cast<size_t>(size_), nullptr);
  const auto name = [&](int q) {
    return shm_name(ids_[2 * static_cast<size_t>(q)], ids_[2 * static_cast<size_t>(q) + 1], index);
  };
  b.at[static_cast<size_t>(rank_)] = make_own(name(rank_), bytes);
  bool ok = all_ranks(comm_, b.at[static_cast<size_t>(rank_)] != nullptr);
  if (ok) {
    for (int q = 0; q < size_; ++q)
      if (q != rank_)
        ok = (b.at[static_cast<size_t>(q)] = map_other(name(q), bytes)) != nullptr && ok;
    ok = all_ranks(comm_, ok);  // also: every rank mapped every file before any name goes
  }
  if (b.at[static_cast<size_t>(rank_)] != nullptr)
    shm_unlink(name(rank_).c_str());  // the mappings keep the memory; nothing is left to clean up
  if (!ok)
    b.unmap();
  return ok;
}

}  // namespace mtk::detail
