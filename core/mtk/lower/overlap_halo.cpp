#include <mtk/base/error.hpp>
#include <mtk/lower/overlap.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

// Overlapped halo exchanges (overlap.hpp): moving start and finish steps.

namespace mtk {

namespace {

// Packs and posts (its bytes are the exchange's, counted by count_comm).
constexpr auto halo_start_step =
    make_op_kind<NoAttrs>("halo_start", {FlopClass::none, true, true}, nullptr);

// A halo op's local copying: the copy along an unsplit dim, and a split exchange's interior
// (assembled or folded with placeholder strips). Its output is fresh storage.
constexpr auto halo_copy_step =
    make_op_kind<NoAttrs>("halo_copy", {FlopClass::elementwise}, nullptr);

}  // namespace

StepKind halo_start_kind() {
  return halo_start_step.def;
}

StepKind halo_copy_kind() {
  return halo_copy_step.def;
}

namespace {

bool meets(const std::vector<int>& a, const std::vector<int>& b) {
  return std::any_of(a.begin(), a.end(),
                     [&](int t) { return std::find(b.begin(), b.end(), t) != b.end(); });
}

// Which tensors' storage each tensor may be, over the whole program: a tensor written by a step
// that allocates its outputs (a matrix product's, a halo start's) is storage of its own; one
// written by any other step may be any of the step's inputs' storage (an alias, a reshape, a
// variable's read share it) or its own. Two tensors whose sets meet may share storage.
class StorageRoots {
 public:
  explicit StorageRoots(const std::vector<Program::Step>& steps) : steps_(steps) {}
  // Whether any of `a` may share storage with any of `b`.
  bool may_share(const std::vector<int>& a, const std::vector<int>& b) const {
    if (!built_)
      build();
    for (int x : a)
      for (int y : b) {
        const std::set<int>& rx = of(x);
        const std::set<int>& ry = of(y);
        if (std::any_of(rx.begin(), rx.end(), [&](int r) { return ry.count(r) > 0; }))
          return true;
      }
    return false;
  }

 private:
  void build() const {  // when first asked: most programs have no in-place step to move over
    built_ = true;
    for (const Program::Step& st : steps_) {
      const bool fresh =
          !st.gemms.empty() || st.kind == halo_start_step.def || st.kind == halo_copy_step.def;
      std::set<int> from;
      if (!fresh)
        for (int t : st.reads)
          from.insert(of(t).begin(), of(t).end());
      for (int t : st.writes) {
        std::set<int>& r = roots_[t];
        r.insert(t);
        r.insert(from.begin(), from.end());
      }
    }
  }
  const std::set<int>& of(int t) const {
    const auto it = roots_.find(t);
    if (it != roots_.end())
      return it->second;
    auto& r = roots_[t];  // never written by a step: a feed's or a variable's own storage
    r.insert(t);
    return r;
  }
  const std::vector<Program::Step>& steps_;
  mutable bool built_ = false;
  mutable std::map<int, std::set<int>> roots_;
};

// Whether `m` may trade places with its neighbour `t`: no data flows between them by name, and
// where `t` updates a buffer in place (a blocking allreduce of a pending sum, an assignment), none
// of `m`'s buffers may share that buffer's storage (under another name: an alias step, a reshape).
bool independent(const Program::Step& m, const Program::Step& t, const StorageRoots& roots) {
  if (meets(m.writes, t.reads) || meets(m.writes, t.writes) || meets(m.reads, t.writes))
    return false;
  if (!meets(t.reads, t.writes))
    return true;
  std::vector<int> touched = m.reads;
  touched.insert(touched.end(), m.writes.begin(), m.writes.end());
  return !roots.may_share(touched, t.writes);
}

using StepRefs = std::vector<Program::Step*>;  // an order of a program's steps

// Each exchange's (start, finish) indices, in start order.
std::vector<std::pair<int, int>> windows(const StepRefs& steps) {
  std::vector<std::pair<int, int>> out;
  const int n = static_cast<int>(steps.size());
  for (int s = 0; s < n; ++s) {
    if (steps[static_cast<size_t>(s)]->kind != halo_start_step.def)
      continue;
    const int token = steps[static_cast<size_t>(s)]->writes.front();
    int f = s + 1;
    while (f < n && !meets(steps[static_cast<size_t>(f)]->reads, {token}))
      ++f;
    if (f == n)
      fail("mtk::overlap_halos",
           cat("halo start '", steps[static_cast<size_t>(s)]->what, "' has no finish step"));
    out.emplace_back(s, f);
  }
  return out;
}

// Per exchange, whether a step with gemm calls lies between its start and its finish.
std::vector<bool> has_products(const StepRefs& steps) {
  std::vector<bool> out;
  for (const auto& [s, f] : windows(steps)) {
    bool any = false;
    for (int k = s + 1; k < f && !any; ++k)
      any = !steps[static_cast<size_t>(k)]->gemms.empty();
    out.push_back(any);
  }
  return out;
}

// The order that moves product `k` (before start `s`) to just after `s`, with the steps between
// that depend on it (or that it must stay before): empty if `s` or an exchange's step would move,
// or more than kMaxMoved steps would (bounded work per exchange).
constexpr int kMaxMoved = 64;

std::vector<int> sunk_order(const StepRefs& steps, int k, int s, const std::vector<bool>& is_halo,
                            const StorageRoots& roots) {
  auto conflict = [&](int a, int b) {
    const Program::Step &x = *steps[static_cast<size_t>(a)], &y = *steps[static_cast<size_t>(b)];
    return !independent(x, y, roots) || !independent(y, x, roots);
  };
  std::vector<int> moved{k}, kept;
  for (int j = k + 1; j <= s; ++j) {
    const bool dep = std::any_of(moved.begin(), moved.end(), [&](int m) { return conflict(m, j); });
    if (dep &&
        (j == s || is_halo[static_cast<size_t>(j)] || static_cast<int>(moved.size()) == kMaxMoved))
      return {};
    (dep ? moved : kept).push_back(j);
  }
  std::vector<int> order;
  for (int j = 0; j < k; ++j)
    order.push_back(j);
  order.insert(order.end(), kept.begin(), kept.end());  // ends with s
  order.insert(order.end(), moved.begin(), moved.end());
  for (int j = s + 1; j < static_cast<int>(steps.size()); ++j)
    order.push_back(j);
  return order;
}

// An exchange with no product between its start and its finish (the second and third split
// dims' exchanges, whose inputs and outputs chain to the layer's other steps) takes one from
// before its start, with the steps between that depend on it, if no exchange loses its last
// product: a filter gradient's einsum and allreduce, which the input gradient does not wait for.
void sink_products(std::vector<Program::Step>& steps, const StorageRoots& roots) {
  constexpr int kTries = 16, kReach = 256;  // products looked at, steps back, per exchange
  StepRefs cur;
  for (auto& st : steps)
    cur.push_back(&st);
  std::vector<bool> had = has_products(cur);
  for (size_t e = 0; e < had.size(); ++e) {
    if (had[e])
      continue;
    const auto ws = windows(cur);
    std::vector<bool> is_halo(cur.size(), false);
    for (const auto& [a, b] : ws)
      is_halo[static_cast<size_t>(a)] = is_halo[static_cast<size_t>(b)] = true;
    const int s = ws[e].first;
    int tries = 0;
    for (int k = s - 1; k >= std::max(0, s - kReach) && tries < kTries; --k) {
      if (cur[static_cast<size_t>(k)]->gemms.empty() || is_halo[static_cast<size_t>(k)])
        continue;
      ++tries;
      const std::vector<int> order = sunk_order(cur, k, s, is_halo, roots);
      if (order.empty())
        continue;
      StepRefs next;
      for (int j : order)
        next.push_back(cur[static_cast<size_t>(j)]);
      const std::vector<bool> now = has_products(next);
      bool keeps = now[e];
      for (size_t w = 0; w < had.size(); ++w)
        keeps = keeps && (!had[w] || now[w]);
      if (!keeps)
        continue;
      cur = std::move(next);
      had = now;
      break;
    }
  }
  std::vector<Program::Step> out;
  out.reserve(steps.size());
  for (Program::Step* st : cur)
    out.push_back(std::move(*st));
  steps = std::move(out);
}

// Moves finish `f` down with the steps that need its output and make no product (a reshape of
// the widened block, the elementwise steps on it), past every step that needs none of them, until
// a product or another exchange's step needs what moves: the window then ends at the first
// product reading the halo, not at a reshape of it.
// `tokens`: every start's token (a finish reads its start's).
void sink_finish(std::vector<Program::Step>& steps, int f, const StorageRoots& roots,
                 const std::vector<int>& tokens) {
  auto conflict = [&](const Program::Step& a, const Program::Step& b) {
    return !independent(a, b, roots) || !independent(b, a, roots);
  };
  auto exchange_step = [&](const Program::Step& st) {
    return st.kind == halo_start_step.def || st.kind == halo_copy_step.def ||
           meets(st.reads, tokens);
  };
  const int n = static_cast<int>(steps.size());
  int begin = f, end = f + 1;  // what moves: [begin, end), the finish first
  while (end < n) {
    const Program::Step& t = steps[static_cast<size_t>(end)];
    bool needs = false;
    for (int m = begin; m < end && !needs; ++m)
      needs = conflict(steps[static_cast<size_t>(m)], t);
    if (!needs) {  // t goes before what moves
      std::rotate(steps.begin() + begin, steps.begin() + end, steps.begin() + end + 1);
      ++begin;
      ++end;
      continue;
    }
    if (!t.gemms.empty() || exchange_step(t) || end - begin == kMaxMoved)
      break;
    ++end;  // t moves along
  }
}

}  // namespace

int overlap_halos(std::vector<Program::Step>& steps) {
  const int n = static_cast<int>(steps.size());
  const StorageRoots roots(steps);  // the moves change no step's reads or writes
  std::vector<int> tokens;
  for (const Program::Step& st : steps)
    if (st.kind == halo_start_step.def && !st.writes.empty())
      tokens.push_back(st.writes.front());
  for (int s = 0; s < n; ++s) {
    if (steps[static_cast<size_t>(s)].kind != halo_start_step.def)
      continue;
    const int token = steps[static_cast<size_t>(s)].writes.front();
    int f = s + 1;
    while (f < n && !meets(steps[static_cast<size_t>(f)].reads, {token}))
      ++f;
    if (f == n)
      fail("mtk::overlap_halos",
           cat("halo start '", steps[static_cast<size_t>(s)].what, "' has no finish step"));
    int start = s;  // up, as far as its input allows
    while (start > 0 && steps[static_cast<size_t>(start - 1)].kind != halo_start_step.def &&
           independent(steps[static_cast<size_t>(start)], steps[static_cast<size_t>(start - 1)],
                       roots)) {
      std::swap(steps[static_cast<size_t>(start)], steps[static_cast<size_t>(start - 1)]);
      --start;
    }
    sink_finish(steps, f, roots, tokens);
  }
  sink_products(steps, roots);
  // Overlapped, in the final order: a step between that is not an exchange's interior copy.
  StepRefs refs;
  for (auto& st : steps)
    refs.push_back(&st);
  int overlapped = 0;
  for (const auto& [s, f] : windows(refs))
    for (int k = s + 1; k < f; ++k)
      if (steps[static_cast<size_t>(k)].kind != halo_copy_step.def) {
        ++overlapped;
        break;
      }
  return overlapped;
}

std::vector<Counters::Exchange> record_halo_exchanges(const std::vector<Program::Step>& steps) {
  std::vector<Counters::Exchange> out;
  const int n = static_cast<int>(steps.size());
  for (int s = 0; s < n; ++s) {
    const Program::Step& start = steps[static_cast<size_t>(s)];
    if (start.kind != halo_start_step.def || start.writes.empty())
      continue;
    const int token = start.writes.front();
    int f = s + 1;
    while (f < n && !meets(steps[static_cast<size_t>(f)].reads, {token}))
      ++f;
    if (f == n)
      fail("mtk::record_halo_exchanges", cat("halo start '", start.what, "' has no finish step"));
    for (const auto& [group, bytes] : start.comm) {
      if (group.first != Collective::halo)
        continue;
      Counters::Exchange e{group, bytes, s, f, {}};
      for (int k = s + 1; k < f; ++k)
        for (const GemmCalls& g : steps[static_cast<size_t>(k)].gemms) {
          auto& [flops, c] = e.gemm_between[g.cls];
          flops += g.flops_each * static_cast<double>(g.calls);
          c += g.calls;
        }
      out.push_back(std::move(e));
    }
  }
  return out;
}

}  // namespace mtk
