#include <mtk/base/allocation.hpp>
#include <mtk/base/error.hpp>

#include <atomic>
#include <cstdio>

namespace mtk {
namespace {

struct MemoryContext {
  std::atomic<int> rank{-1};
  std::atomic<std::int64_t> peak{-1}, budget{-1};
};

MemoryContext& context() {
  static MemoryContext c;
  return c;
}

std::string bytes_text(std::int64_t b) {
  char text[64];
  if (b >= (std::int64_t{1} << 30))
    std::snprintf(text, sizeof text, "%.1f GiB", static_cast<double>(b) / (1 << 30));
  else
    std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(b) / (1 << 20));
  return cat(b, " bytes (", text, ")");
}

}  // namespace

void set_memory_context(int rank, std::int64_t predicted_peak_bytes, std::int64_t budget_bytes) {
  context().rank = rank;
  context().peak = predicted_peak_bytes;
  context().budget = budget_bytes;
}

void allocation_failed(const std::string& label, std::int64_t bytes, const std::string& cause) {
  const MemoryContext& c = context();
  std::string check = "no memory check ran before it";
  if (c.peak >= 0)
    check = cat("the start-up memory check predicted a peak of ", bytes_text(c.peak), " per rank",
                c.budget >= 0 ? cat(" against ", bytes_text(c.budget), " available") : "");
  throw AllocationError(
      cat("mtk::allocate: cannot allocate ", bytes_text(bytes), " for '", label, "'",
          c.rank >= 0 ? cat(" on rank ", c.rank.load()) : std::string(), "; ", check,
          ". Use a smaller model.batch or model, or more ranks with a layout that splits it. (",
          cause, ")"));
}

}  // namespace mtk
