#pragma once
// `mtk-lm1b prepare`: SentencePiece vocabulary and binary token shards from an LM1B-layout corpus.
//
//   mtk-lm1b prepare --data CORPUS --out DIR [--vocab-size 32000] [--model-type unigram]
//                    [--sample-lines 1000000] [--max-line-bytes 4096] [--training-shards N]
//                    [--threads 1] [--seed 1] [--strict] [--force]
//
// Rank 0 trains the vocabulary on a sample of the training text; then the shards (held-out 00000
// first, then the training shards) are dealt round-robin over all ranks, each rank encoding its
// own; with several ranks DIR must be on a file system every rank sees. A re-run reuses the
// vocabulary and every token shard that is complete and current. All ranks agree on failure and
// return the same status. DIR's layout: mtk::Lm1bPrepared (io/mtk_lm1b_corpus.hpp); docs/lm1b.md.

#include <string>
#include <vector>

namespace mtk::lm1b {

/// Runs `prepare` with the arguments after the subcommand on MPI_COMM_WORLD; returns the exit
/// status (the same on every rank). Rank 0 prints progress and the summary to stdout and errors
/// to stderr.
int prepare_main(const std::vector<std::string>& args);

}  // namespace mtk::lm1b
