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
constexpr auto gather_start_step =
    make_op_kind<NoAttrs>("allgather_start", {FlopClass::none, true}, nullptr);

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
  return {{c.t},
          {c.count},
          c.axes,
          c.ready,
          c.at,
          c.count * static_cast<std::int64_t>(sizeof(float)),
          c.out,
          c.spec.local,
          c.out >= 0 ? c.spec.dim : -1,
          -1,
          {}};
}

bool has(const std::vector<int>& v, int t) {
  return std::find(v.begin(), v.end(), t) != v.end();
}

// The in-place allgather steps worth overlapping: each starts where it is and is waited for
// before the next step touching its variable, new shard or output, else at the end (steps.size()).
std::vector<ReductionBucket> gather_buckets(const std::vector<Program::Step>& steps,
                                            const MeshShape& shape, const GatherSpecs& gathers) {
  std::vector<ReductionBucket> out;
  const int n = static_cast<int>(steps.size());
  for (int s = 0; s < n; ++s) {
    const auto& writes = steps[static_cast<size_t>(s)].writes;
    const auto it = writes.size() == 1 ? gathers.find(writes.front()) : gathers.end();
    if (it == gathers.end() || shape[it->second.axis].size == 1)
      continue;
    const GatherSpec& g = it->second;
    int w = s + 1;
    for (; w < n; ++w) {
      const auto& st = steps[static_cast<size_t>(w)];
      bool touches = false;
      for (int t : {g.variable, g.part, it->first})
        touches = touches || has(st.reads, t) || has(st.writes, t);
      if (touches)
        break;
    }
    if (w == s + 1)
      continue;  // nothing to run meanwhile
    ReductionBucket b;
    b.tensors = {g.variable};
    b.counts = {g.count * shape[g.axis].size};
    b.axes = {g.axis};
    b.start_after = s;  // in place of the blocking step
    b.wait_before = w;
    b.bytes = g.count * static_cast<std::int64_t>(sizeof(float));
    b.gather_out = it->first;
    b.gather = g;
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace

std::vector<ReductionBucket> plan_reductions(const std::vector<Program::Step>& steps,
                                             const MeshShape& shape,
                                             const std::function<std::int64_t(int)>& elements_of,
                                             std::int64_t bucket_bytes,
                                             const ScatterSpecs& scatters,
                                             const GatherSpecs& gathers) {
  std::vector<ReductionBucket> done = gather_buckets(steps, shape, gathers);
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

std::shared_ptr<ReductionsInFlight> overlap_reductions(
    std::vector<Program::Step>& steps, const Mesh& mesh, const MeshShape& shape,
    const std::function<std::int64_t(int)>& elements_of, std::int64_t bucket_bytes, bool dry,
    const ScatterSpecs& scatters, const GatherSpecs& gathers) {
  auto plan = plan_reductions(steps, shape, elements_of, bucket_bytes, scatters, gathers);
  if (plan.empty())
    return nullptr;
  auto state = std::make_shared<ReductionsInFlight>(mesh, plan);
  const int n = static_cast<int>(steps.size());
  // Waits by the step they come before; an allgather's may come after the last (index n).
  std::vector<std::vector<int>> starts(static_cast<size_t>(n)), waits(static_cast<size_t>(n) + 1);
  std::vector<bool> replaced(static_cast<size_t>(n), false);
  for (int k = 0; k < static_cast<int>(plan.size()); ++k) {
    const ReductionBucket& b = plan[static_cast<size_t>(k)];
    starts[static_cast<size_t>(b.start_after)].push_back(k);
    waits[static_cast<size_t>(b.wait_before)].push_back(k);
    if (b.gather_out >= 0)
      replaced[static_cast<size_t>(b.start_after)] = true;
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
    return cat(b.gather_out >= 0    ? "allgather"
               : b.scatter_out >= 0 ? "reduce_scatter(sum)"
                                    : "allreduce(sum)",
               what, " ", k, " (", b.tensors.size(),
               b.tensors.size() == 1 ? " tensor, " : " tensors, ", b.bytes, " bytes) over ", axes);
  };
  // An allgather's wait reads nothing by name (the variable's storage is kept) and writes its
  // output; its start reads the new shard and the variable.
  auto wait_of = [&](int k) -> Program::Step {
    const ReductionBucket& b = plan[static_cast<size_t>(k)];
    const bool gather = b.gather_out >= 0;
    const int out = gather ? b.gather_out : b.scatter_out;
    return {gather ? gather_wait_kind() : reduction_wait_kind(),
            label(" wait", k),
            Program::Category::collective,
            true,
            gather ? std::vector<int>{} : b.tensors,
            out >= 0 ? std::vector<int>{out} : b.tensors,
            [state, k](Program::Buffers& bs, const ExecSpace&) { state->wait(k, bs); },
            {},
            {},
            {},
            {},
            {},
            {}};
  };
  auto start_of = [&](int k) -> Program::Step {
    const ReductionBucket& b = plan[static_cast<size_t>(k)];
    const bool gather = b.gather_out >= 0;
    return {gather ? gather_start_step.def : start_step.def,
            label(" start", k),
            Program::Category::collective,
            true,
            gather ? std::vector<int>{b.gather.part, b.gather.variable} : b.tensors,
            {},
            [state, k](Program::Buffers& bs, const ExecSpace&) { state->start(k, bs); },
            {},
            {},
            {},
            {},
            {},
            {}};
  };
  std::vector<Program::Step> out;
  out.reserve(steps.size() + 2 * plan.size());
  for (int s = 0; s <= n; ++s) {
    for (int k : waits[static_cast<size_t>(s)])
      out.push_back(wait_of(k));
    if (s == n)
      break;
    if (!replaced[static_cast<size_t>(s)])
      out.push_back(std::move(steps[static_cast<size_t>(s)]));
    for (int k : starts[static_cast<size_t>(s)])
      out.push_back(start_of(k));
  }
  steps = std::move(out);
  return state;
}

}  // namespace mtk
