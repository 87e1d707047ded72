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
constexpr auto gather_start_step =
    make_op_kind<NoAttrs>("allgather_start", {FlopClass::none, true}, nullptr);
constexpr auto gather_wait_step =
    make_op_kind<NoAttrs>("allgather_wait", {FlopClass::none, true}, nullptr);

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

StepKind reduction_wait_kind() {
  return wait_step.def;
}

StepKind gather_wait_kind() {
  return gather_wait_step.def;
}

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
  bool in_place = true;  // the collective runs on the tensor's own storage
  if (bucket.gather_out >= 0) {
    const GatherSpec& g = bucket.gather;
    data = g.storage->view<float>();
    const auto part = b[static_cast<size_t>(g.part)].view<float>();
    if (part.data() != data.data() + g.off)  // else the update wrote it in place
      Kokkos::deep_copy(Kokkos::subview(data, std::make_pair(g.off, g.off + g.count)), part);
    f.gather = start_allgather_in_place<float>(mesh_, g.axis, data);
  } else if (bucket.scatter_out >= 0) {
    data = b[static_cast<size_t>(bucket.tensors.front())].view<float>();
    f.scatter = start_reduce_scatter(mesh_, bucket.axes.front(), bucket.scatter_local,
                                     bucket.scatter_dim, data);
  } else {
    if (bucket.tensors.size() == 1) {
      data = b[static_cast<size_t>(bucket.tensors.front())].view<float>();
    } else {
      in_place = false;
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
  }
  if (in_place) {
    f.in_place = data.data();
    ++in_place_;
  }
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
  if (bucket.gather_out >= 0) {
    f.gather.finish();
    b[static_cast<size_t>(bucket.gather_out)] =
        Program::Buffer(bucket.gather.storage->view<float>());
  } else if (bucket.scatter_out >= 0) {
    b[static_cast<size_t>(bucket.scatter_out)] = Program::Buffer(f.scatter.finish());
  } else {
    f.op.finish();
  }
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
    const ReductionBucket& b = buckets_[static_cast<size_t>(k)];
    f.complete = b.gather_out >= 0    ? f.gather.progress()
                 : b.scatter_out >= 0 ? f.scatter.progress()
                                      : f.op.progress();
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
    const ReductionBucket& b = buckets_[static_cast<size_t>(k)];
    if (b.gather_out >= 0)
      f.gather.finish();
    else if (b.scatter_out >= 0)
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
    return {gather ? gather_wait_step.def : wait_step.def,
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
