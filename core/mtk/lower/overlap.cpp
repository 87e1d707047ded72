#include <mtk/base/error.hpp>
#include <mtk/lower/overlap.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace mtk {

namespace {

// The steps of an overlapped reduction: communication only, costed with the allreduce it replaces.
constexpr auto start_step =
    make_op_kind<NoAttrs>("allreduce_start", {FlopClass::none, true}, nullptr);
constexpr auto wait_step =
    make_op_kind<NoAttrs>("allreduce_wait", {FlopClass::none, true}, nullptr);
// Packs and posts (its bytes are the exchange's, counted by count_comm).
constexpr auto halo_start_step =
    make_op_kind<NoAttrs>("halo_start", {FlopClass::none, true}, nullptr);

// An allreduce step of a pending sum that can move: reduce tensor `t` over `axes`, last touched
// by step `ready` before step `at`.
struct Candidate {
  int at = 0, ready = -1, t = 0;
  std::vector<int> axes;
  std::int64_t count = 0;
  int out = -1;  // a reduce-scatter's output
  ScatterSpec spec;
};

std::int64_t group_size(const MeshShape& shape, const std::vector<int>& axes) {
  std::int64_t n = 1;
  for (int a : axes)
    n *= shape[a].size;
  return n;
}

std::vector<Candidate> candidates(const std::vector<Program::Step>& steps, const MeshShape& shape,
                                  const std::function<std::int64_t(int)>& elements_of,
                                  const ScatterSpecs& scatters) {
  std::map<int, int> last_touch;  // tensor -> last step reading or writing it, so far
  std::vector<Candidate> out;
  for (int s = 0; s < static_cast<int>(steps.size()); ++s) {
    const auto& st = steps[static_cast<size_t>(s)];
    if (!st.sum_axes.empty() && st.reads.size() == 1 && group_size(shape, st.sum_axes) > 1) {
      const int t = st.reads.front();
      const auto it = last_touch.find(t);
      const auto scatter =
          st.writes.size() == 1 ? scatters.find(st.writes.front()) : scatters.end();
      // Worth moving when other steps run between the tensor's last touch and its reduction.
      if (it != last_touch.end() && it->second < s - 1 &&
          (st.writes == st.reads || scatter != scatters.end()))
        out.push_back({s, it->second, t, st.sum_axes, elements_of(t),
                       scatter == scatters.end() ? -1 : scatter->first,
                       scatter == scatters.end() ? ScatterSpec() : scatter->second});
    }
    for (int t : st.reads)
      last_touch[t] = s;
    for (int t : st.writes)
      last_touch[t] = s;
  }
  // A reduce-scatter works in its input's storage: only where nothing reads that afterwards.
  out.erase(
      std::remove_if(out.begin(), out.end(),
                     [&](const Candidate& c) { return c.out >= 0 && last_touch[c.t] != c.at; }),
      out.end());
  std::sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) {
    return std::tie(a.ready, a.at) < std::tie(b.ready, b.at);
  });
  return out;
}

ReductionBucket bucket_of(const Candidate& c) {
  return {{c.t},   {c.count},    c.axes,
          c.ready, c.at,         c.count * static_cast<std::int64_t>(sizeof(float)),
          c.out,   c.spec.local, c.out >= 0 ? c.spec.dim : -1};
}

}  // namespace

StepKind reduction_wait_kind() {
  return wait_step.def;
}

StepKind halo_start_kind() {
  return halo_start_step.def;
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
      const bool fresh = !st.gemms.empty() || st.kind == halo_start_step.def;
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
// Returns how many exchanges had no step at all between before.
int sink_products(std::vector<Program::Step>& steps, const StorageRoots& roots) {
  constexpr int kTries = 16, kReach = 256;  // products looked at, steps back, per exchange
  int gained = 0;
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
    const auto [s, f] = ws[e];
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
      gained += f == s + 1;
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
  return gained;
}

}  // namespace

int overlap_halos(std::vector<Program::Step>& steps) {
  int overlapped = 0;
  const int n = static_cast<int>(steps.size());
  const StorageRoots roots(steps);  // the moves change no step's reads or writes
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
    // Down, until the output's first reader.
    while (f + 1 < n &&
           independent(steps[static_cast<size_t>(f)], steps[static_cast<size_t>(f + 1)], roots)) {
      std::swap(steps[static_cast<size_t>(f)], steps[static_cast<size_t>(f + 1)]);
      ++f;
    }
    if (f > start + 1)
      ++overlapped;
  }
  return overlapped + sink_products(steps, roots);
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
        for (const auto& [each, calls] : steps[static_cast<size_t>(k)].gemms) {
          auto& [flops, c] = e.gemm_between[Counters::gemm_size_key(each)];
          flops += each * static_cast<double>(calls);
          c += calls;
        }
      out.push_back(std::move(e));
    }
  }
  return out;
}

std::vector<ReductionBucket> plan_reductions(const std::vector<Program::Step>& steps,
                                             const MeshShape& shape,
                                             const std::function<std::int64_t(int)>& elements_of,
                                             std::int64_t bucket_bytes,
                                             const ScatterSpecs& scatters) {
  std::vector<ReductionBucket> done;
  std::map<std::vector<int>, ReductionBucket> open;  // per group of mesh axes: the bucket filling
  for (const Candidate& c : candidates(steps, shape, elements_of, scatters)) {
    const std::int64_t bytes = c.count * static_cast<std::int64_t>(sizeof(float));
    if (bytes >= bucket_bytes || c.out >= 0) {  // large, scattered (or no bucketing): alone
      done.push_back(bucket_of(c));
      continue;
    }
    auto it = open.find(c.axes);
    // Candidates come by readiness: one joins while the bucket stays under the threshold and is
    // still ready before its first reader.
    if (it != open.end() && it->second.bytes + bytes <= bucket_bytes &&
        c.ready < it->second.wait_before) {
      ReductionBucket& b = it->second;
      b.tensors.push_back(c.t);
      b.counts.push_back(c.count);
      b.start_after = c.ready;
      b.wait_before = std::min(b.wait_before, c.at);
      b.bytes += bytes;
      continue;
    }
    if (it != open.end())
      done.push_back(std::move(it->second));
    open[c.axes] = bucket_of(c);
  }
  for (auto& [axes, b] : open)
    done.push_back(std::move(b));
  std::sort(done.begin(), done.end(), [](const ReductionBucket& a, const ReductionBucket& b) {
    return std::tie(a.start_after, a.wait_before, a.tensors) <
           std::tie(b.start_after, b.wait_before, b.tensors);
  });
  return done;
}

ReductionsInFlight::ReductionsInFlight(const Mesh& mesh, std::vector<ReductionBucket> buckets)
    : mesh_(mesh),
      buckets_(std::move(buckets)),
      flights_(buckets_.size()),
      packed_(buckets_.size()) {}

void ReductionsInFlight::start(int k, Program::Buffers& b) {
  const ReductionBucket& bucket = buckets_[static_cast<size_t>(k)];
  Flight& f = flights_[static_cast<size_t>(k)];
  if (f.started)
    fail("mtk::Program::run", cat("overlapped allreduce ", k, " started twice"));
  Kokkos::View<float*> data;
  if (bucket.scatter_out >= 0) {
    data = b[static_cast<size_t>(bucket.tensors.front())].view<float>();
    f.scatter = start_reduce_scatter(mesh_, bucket.axes.front(), bucket.scatter_local,
                                     bucket.scatter_dim, data);
    f.in_place = data.data();
    ++in_place_;
    f.started = true;
    f.complete = false;
    in_flight_.push_back(k);
    return;
  }
  if (bucket.tensors.size() == 1) {
    data = b[static_cast<size_t>(bucket.tensors.front())].view<float>();
    f.in_place = data.data();
    ++in_place_;
  } else {
    Kokkos::View<float*>& packed = packed_[static_cast<size_t>(k)];
    if (packed.extent(0) == 0) {
      const BufferPoolScope unpooled(nullptr);  // kept by this bucket for the program's life
      packed = uninitialized_view<float>("mtk::allreduce_bucket", bucket.bytes / 4);
    }
    std::int64_t off = 0;
    for (size_t m = 0; m < bucket.tensors.size(); ++m) {
      const auto n = bucket.counts[m];
      Kokkos::deep_copy(Kokkos::subview(packed, std::make_pair(off, off + n)),
                        b[static_cast<size_t>(bucket.tensors[m])].view<float>());
      off += n;
    }
    data = packed;
  }
  f.op = start_allreduce(mesh_, bucket.axes, data);
  f.started = true;
  f.complete = false;
  in_flight_.push_back(k);
}

void ReductionsInFlight::wait(int k, Program::Buffers& b) {
  const ReductionBucket& bucket = buckets_[static_cast<size_t>(k)];
  Flight& f = flights_[static_cast<size_t>(k)];
  if (!f.started && f.waited_early) {  // by before_step()
    f.waited_early = false;
    return;
  }
  if (!f.started)
    fail("mtk::Program::run", cat("overlapped allreduce ", k, " waited for but not started"));
  if (bucket.scatter_out >= 0)
    b[static_cast<size_t>(bucket.scatter_out)] = Program::Buffer(f.scatter.finish());
  else
    f.op.finish();
  f.started = false;
  in_flight_.erase(std::find(in_flight_.begin(), in_flight_.end(), k));
  if (f.in_place) {
    f.in_place = nullptr;
    --in_place_;
    return;
  }
  const Kokkos::View<float*>& packed = packed_[static_cast<size_t>(k)];
  std::int64_t off = 0;
  for (size_t m = 0; m < bucket.tensors.size(); ++m) {
    const auto n = bucket.counts[m];
    Kokkos::deep_copy(b[static_cast<size_t>(bucket.tensors[m])].view<float>(),
                      Kokkos::subview(packed, std::make_pair(off, off + n)));
    off += n;
  }
}

void ReductionsInFlight::progress() {
  for (int k : in_flight_) {
    Flight& f = flights_[static_cast<size_t>(k)];
    if (f.complete)
      continue;
    // One MPI_Test moves every collective in flight.
    f.complete =
        buckets_[static_cast<size_t>(k)].scatter_out >= 0 ? f.scatter.progress() : f.op.progress();
    if (!f.complete)
      return;
  }
}

bool ReductionsInFlight::before_step(const Program::Step& step, Program::Buffers& b) {
  if (in_place_ == 0)
    return false;
  bool waited = false;
  auto check = [&](int t) {
    const Program::Buffer& buf = b[static_cast<size_t>(t)];
    if (buf.empty())
      return;
    const void* p = buf.data();
    for (size_t i = 0; i < in_flight_.size(); ++i) {
      const int k = in_flight_[i];
      const Flight& f = flights_[static_cast<size_t>(k)];
      if (f.in_place == p && buckets_[static_cast<size_t>(k)].tensors.front() != t) {
        wait(k, b);  // in place: nothing to unpack
        flights_[static_cast<size_t>(k)].waited_early = true;
        waited = true;
        return;
      }
    }
  };
  for (int t : step.reads)
    check(t);
  for (int t : step.writes)
    check(t);
  return waited;
}

void ReductionsInFlight::drain() {
  for (int k : in_flight_) {
    Flight& f = flights_[static_cast<size_t>(k)];
    if (buckets_[static_cast<size_t>(k)].scatter_out >= 0)
      f.scatter.finish();
    else
      f.op.finish();
    f.started = false;
    f.waited_early = false;
    f.in_place = nullptr;
  }
  for (Flight& f : flights_)
    f.waited_early = false;
  in_flight_.clear();
  in_place_ = 0;
}

std::shared_ptr<ReductionsInFlight> overlap_reductions(
    std::vector<Program::Step>& steps, const Mesh& mesh, const MeshShape& shape,
    const std::function<std::int64_t(int)>& elements_of, std::int64_t bucket_bytes, bool dry,
    const ScatterSpecs& scatters) {
  auto plan = plan_reductions(steps, shape, elements_of, bucket_bytes, scatters);
  if (plan.empty())
    return nullptr;
  auto state = std::make_shared<ReductionsInFlight>(mesh, plan);
  const int n = static_cast<int>(steps.size());
  std::vector<std::vector<int>> starts(static_cast<size_t>(n)), waits(static_cast<size_t>(n));
  std::vector<bool> replaced(static_cast<size_t>(n), false);
  for (int k = 0; k < static_cast<int>(plan.size()); ++k) {
    const ReductionBucket& b = plan[static_cast<size_t>(k)];
    starts[static_cast<size_t>(b.start_after)].push_back(k);
    waits[static_cast<size_t>(b.wait_before)].push_back(k);
    if (!dry)
      mesh.axes_comm(b.axes);  // created now, in the same order on every rank
  }
  // Every candidate joins a bucket; by step, since a recomputed tensor is reduced twice
  // (mtk/lower/recompute.hpp).
  for (const Candidate& c : candidates(steps, shape, elements_of, scatters))
    replaced[static_cast<size_t>(c.at)] = true;
  auto label = [&](const char* what, int k) {
    const ReductionBucket& b = plan[static_cast<size_t>(k)];
    std::string axes;
    for (int a : b.axes)
      axes += (axes.empty() ? "" : ",") + shape[a].name;
    return cat(b.scatter_out >= 0 ? "reduce_scatter" : "allreduce", what, " ", k, " (",
               b.tensors.size(), b.tensors.size() == 1 ? " tensor, " : " tensors, ", b.bytes,
               " bytes) over ", axes);
  };
  std::vector<Program::Step> out;
  out.reserve(steps.size() + 2 * plan.size());
  for (int s = 0; s < n; ++s) {
    for (int k : waits[static_cast<size_t>(s)]) {
      const auto& ts = plan[static_cast<size_t>(k)].tensors;
      const int scatter_out = plan[static_cast<size_t>(k)].scatter_out;
      out.push_back({wait_step.def,
                     label("(sum) wait", k),
                     Program::Category::collective,
                     true,
                     ts,
                     scatter_out >= 0 ? std::vector<int>{scatter_out} : ts,
                     [state, k](Program::Buffers& b, const ExecSpace&) { state->wait(k, b); },
                     {},
                     {},
                     {},
                     {},
                     {}});
    }
    if (!replaced[static_cast<size_t>(s)])
      out.push_back(std::move(steps[static_cast<size_t>(s)]));
    for (int k : starts[static_cast<size_t>(s)])
      out.push_back({start_step.def,
                     label("(sum) start", k),
                     Program::Category::collective,
                     true,
                     plan[static_cast<size_t>(k)].tensors,
                     {},
                     [state, k](Program::Buffers& b, const ExecSpace&) { state->start(k, b); },
                     {},
                     {},
                     {},
                     {},
                     {}});
  }
  steps = std::move(out);
  return state;
}

}  // namespace mtk
