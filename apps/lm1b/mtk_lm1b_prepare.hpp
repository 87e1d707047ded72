#pragma once
// `mtk-lm1b prepare`: SentencePiece vocabulary and binary token shards from an LM1B-layout corpus.

#include <string>
#include <vector>

namespace mtk::lm1b {

/// Runs `prepare` with the arguments after the subcommand; returns the exit status.
int prepare_main(const std::vector<std::string>& args);

}  // namespace mtk::lm1b
