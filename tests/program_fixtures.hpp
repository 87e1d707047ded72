#pragma once
// Hand-built program steps, for the tests of the passes over a program's steps (recomputation,
// overlap, the cost model's records).

#include <mtk/runtime/program.hpp>

#include <utility>
#include <vector>

namespace mtk::test {

/// A compute step of `kind` that reads and writes the given buffers and runs nothing.
inline Program::Step synthetic_step(StepKind kind, std::vector<int> reads,
                                    std::vector<int> writes) {
  return {kind,
          "step",
          Program::Category::compute,
          false,
          std::move(reads),
          std::move(writes),
          nullptr,
          {},
          {},
          {},
          {},
          {},
          {}};
}

}  // namespace mtk::test
