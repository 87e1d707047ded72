#pragma once
// SPDX-License-Identifier: Apache-2.0
// Work of a preparing tool dealt over the ranks (mtk-lm1b prepare's shards, mtk-wmt prepare's
// training files): job j on rank j % size, in rounds, each rank doing its own; rank 0 hears of
// every job's result in job order, and a failure anywhere stops every rank with the same error.

#include <functional>
#include <string>

namespace mtk {

class Communicator;

/// Runs `fn` (work that may differ between ranks), then agrees on failure: if any rank failed,
/// every rank throws the same error, so none is left waiting. Ranks that finish early sleep
/// instead of polling MPI, leaving the cores to the ranks still working.
void collective_step(const Communicator& comm, const std::function<void()>& fn);

/// Runs jobs 0 .. count-1: job j on rank j % size, in rounds of size jobs. A job returns its
/// result as a string; after each round, rank 0 calls `done(job, rank, result)` for the round's
/// jobs in job order (nothing is called on other ranks). A job that throws stops every rank after
/// its round with the same error (Communicator::agree).
void run_rank_jobs(const Communicator& comm, int count, const std::function<std::string(int)>& job,
                   const std::function<void(int, int, const std::string&)>& done);

}  // namespace mtk
