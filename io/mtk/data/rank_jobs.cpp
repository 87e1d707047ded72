// SPDX-License-Identifier: Apache-2.0
#include <mtk/data/rank_jobs.hpp>
#include <mtk/parallel/communicator.hpp>

#include <exception>

namespace mtk {

void collective_step(const Communicator& comm, const std::function<void()>& fn) {
  std::string failure;
  try {
    fn();
  } catch (const std::exception& e) {
    failure = e.what();
    if (failure.empty())
      failure = "unknown error";
  }
  comm.idle_barrier();
  comm.agree(failure);
}

void run_rank_jobs(const Communicator& comm, int count, const std::function<std::string(int)>& job,
                   const std::function<void(int, int, const std::string&)>& done) {
  const int rank = comm.rank(), size = comm.size();
  for (int first = 0; first < count; first += size) {
    const int j = first + rank;
    std::string mine;
    collective_step(comm, [&] {
      if (j < count)
        mine = job(j);
    });
    const auto results = comm.gather(mine);
    if (rank != 0)
      continue;
    for (int r = 0; r < size && first + r < count; ++r)
      done(first + r, r, results[static_cast<std::size_t>(r)]);
  }
}

}  // namespace mtk
