// Factorizations of a processor count into mesh dims (layout_search.hpp, impl/factorizations.hpp).
#include <mtk/base/error.hpp>
#include <mtk/cost/impl/factorizations.hpp>
#include <mtk/cost/layout_search.hpp>

#include <algorithm>

namespace mtk::cost {
namespace {

void factor_rec(std::int64_t n, int left, std::int64_t min_factor, bool ordered,
                std::vector<std::int64_t>& cur, std::vector<std::vector<std::int64_t>>& out) {
  if (n == 1) {
    if (!cur.empty())
      out.push_back(cur);
    return;
  }
  if (left == 0)
    return;
  for (std::int64_t f = ordered ? 2 : min_factor; f <= n; ++f) {
    if (n % f != 0)
      continue;
    cur.push_back(f);
    factor_rec(n / f, left - 1, f, ordered, cur, out);
    cur.pop_back();
  }
}

}  // namespace

namespace impl {

std::vector<std::vector<std::int64_t>> unordered_factorizations(std::int64_t n, int max_dims) {
  std::vector<std::vector<std::int64_t>> out;
  if (n == 1)
    return {{1}};  // one processor: the mesh `all:1`, nothing split
  std::vector<std::int64_t> cur;
  factor_rec(n, max_dims, 2, false, cur, out);
  for (auto& f : out)
    std::sort(f.rbegin(), f.rend());
  return out;
}

}  // namespace impl

std::vector<std::vector<std::int64_t>> mesh_factorizations(std::int64_t n, int max_dims) {
  if (n < 1)
    fail("mtk::cost::mesh_factorizations", cat("processor count ", n, " must be >= 1"));
  if (n == 1)
    return {{1}};
  std::vector<std::vector<std::int64_t>> out;
  std::vector<std::int64_t> cur;
  factor_rec(n, max_dims, 2, true, cur, out);
  return out;
}

}  // namespace mtk::cost
