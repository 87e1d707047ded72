#include <mtk/base/buffer_pool.hpp>
#include <mtk/base/error.hpp>
#include <mtk/base/exec_space.hpp>
#include <mtk/runtime/reductions_in_flight.hpp>

#include <algorithm>
#include <utility>

namespace mtk {

namespace {

// The steps that wait for an overlapped reduction or allgather: communication only, costed with
// the collective they replace.
constexpr auto wait_step =
    make_op_kind<NoAttrs>("allreduce_wait", {FlopClass::none, true}, nullptr);
constexpr auto gather_wait_step =
    make_op_kind<NoAttrs>("allgather_wait", {FlopClass::none, true}, nullptr);

}  // namespace

StepKind reduction_wait_kind() {
  return wait_step.def;
}

StepKind gather_wait_kind() {
  return gather_wait_step.def;
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

}  // namespace mtk
