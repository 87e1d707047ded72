// halo_exchange and its adjoint halo_reduce: builders, gradients and lowering to a neighbour
// exchange on the mesh's Cartesian communicator (parallel/halo.hpp) around local kernels
// (kernels/halo.hpp).
#include <mtk/base/error.hpp>
#include <mtk/graph/gradient_context.hpp>
#include <mtk/kernels/halo.hpp>
#include <mtk/lower/lowering_context.hpp>
#include <mtk/lower/overlap.hpp>
#include <mtk/ops/halo_exchange.hpp>
#include <mtk/ops/impl/builder_checks.hpp>
#include <mtk/parallel/halo.hpp>
#include <mtk/parallel/node_halo.hpp>

#include <deque>
#include <memory>

namespace mtk {
namespace {

using namespace ops_impl;
using FView = kernels::View<float>;

struct HaloAttrs {
  std::string blocks, block;
  std::int64_t left = 0, right = 0;
  HaloBoundary boundary = HaloBoundary::zero;
  double fill = 0.0;
};

// Where a rank's halo step runs: its local shape, the two dims, the mesh axis splitting the
// blocks (-1: none, or a mesh dim of size 1: a local copy).
struct HaloPlan {
  Mesh mesh;
  Shape local, local_out;  // x's and (split) the result's local shapes
  int blocks = 0, block = 0, axis = -1;
  HaloAttrs a;
  bool periodic() const { return a.boundary == HaloBoundary::periodic; }
};

FView filled(const ExecSpace& space, std::int64_t n, float value) {
  FView v = uninitialized_view<float>("mtk::halo_exchange::received", n);
  Kokkos::deep_copy(space, v, value);
  return v;
}

// Sends `to_left`/`to_right` to the neighbours along the plan's axis; returns what arrived from
// the left and the right (`fill` where no neighbour). Unsplit: a periodic domain is its own
// neighbour.
std::pair<FView, FView> swap_strips(const ExecSpace& space, const HaloPlan& p, const FView& to_left,
                                    const FView& to_right, float fill) {
  FView from_left = filled(space, static_cast<std::int64_t>(to_right.extent(0)), fill);
  FView from_right = filled(space, static_cast<std::int64_t>(to_left.extent(0)), fill);
  if (p.axis >= 0) {
    HaloExchange<float> h(p.mesh, p.axis, p.periodic(), to_left, to_right, from_left, from_right);
    h.finish();
  } else if (p.periodic()) {
    from_left = to_right;
    from_right = to_left;
  }
  return {from_left, from_right};
}

FView halo_forward(const ExecSpace& space, const HaloPlan& p, const FView& x) {
  const std::int64_t nb = p.local[p.blocks].size, n = p.local[p.block].size;
  const auto& a = p.a;
  // My last block's tail is the right neighbour's left halo; my first block's head the left one's.
  FView to_right =
      kernels::halo_strip(space, p.local, x, p.blocks, p.block, nb - 1, n - a.left, a.left);
  FView to_left = kernels::halo_strip(space, p.local, x, p.blocks, p.block, 0, 0, a.right);
  auto [from_left, from_right] =
      swap_strips(space, p, to_left, to_right, static_cast<float>(a.fill));
  return kernels::halo_assemble(space, p.local, x, p.blocks, p.block, from_left, from_right, a.left,
                                a.right);
}

FView halo_adjoint(const ExecSpace& space, const HaloPlan& p, const FView& dy) {
  const std::int64_t nb = p.local[p.blocks].size, m = p.local[p.block].size;
  const auto& a = p.a;
  // My first block's left halo belongs to the left neighbour, my last block's right halo to the
  // right one.
  FView to_left = kernels::halo_strip(space, p.local, dy, p.blocks, p.block, 0, 0, a.left);
  FView to_right =
      kernels::halo_strip(space, p.local, dy, p.blocks, p.block, nb - 1, m - a.right, a.right);
  auto [from_left, from_right] = swap_strips(space, p, to_left, to_right, 0.0f);
  return kernels::halo_fold(space, p.local, dy, p.blocks, p.block, from_left, from_right, a.left,
                            a.right);
}

// The local work of a split exchange (kind halo_copy_kind()), between its start and its finish:
// forward, y assembled from x with the fill in the remote strips' places; adjoint, the fold with
// zero strips. The finish then writes only the positions the strips reach.
void add_local_step(Lowering& l, const HaloPlan& p, bool adjoint, int xin, int mid) {
  const HaloAttrs a = p.a;
  const std::int64_t strip =
      p.local.num_elements() / p.local[p.blocks].size / p.local[p.block].size;
  const std::int64_t first = strip * (adjoint ? a.right : a.left);
  const std::int64_t second = strip * (adjoint ? a.left : a.right);
  const float fill = adjoint ? 0.0f : static_cast<float>(a.fill);
  l.add_step_of(
      halo_copy_kind(), cat(l.label(), adjoint ? " fold" : " assemble"), {xin}, {mid},
      [=](Buffers& b, const ExecSpace& space) {
        const FView x = view_of<float>(b, xin);
        const FView from_left = filled(space, first, fill),
                    from_right = filled(space, second, fill);
        b[static_cast<size_t>(mid)] = Program::Buffer(
            adjoint ? kernels::halo_fold(space, p.local, x, p.blocks, p.block, from_left,
                                         from_right, a.left, a.right)
                    : kernels::halo_assemble(space, p.local, x, p.blocks, p.block, from_left,
                                             from_right, a.left, a.right));
      },
      static_cast<double>(l.local(mid).num_elements()), Program::Category::compute);
}

// One lowered halo op split over a mesh dim: its exchange in flight from its start step to its
// finish step (a recomputed segment's copies run later: the token orders each start after the
// last finish). Where the axis's ranks share a node (HaloSite) the strips are packed straight into
// this rank's shared slot and read where the neighbours packed theirs; else through MPI with the
// token's halves as receive buffers.
struct SplitExchange {
  explicit SplitExchange(HaloPlan plan) : p(std::move(plan)) {}
  HaloPlan p;
  bool adjoint = false;
  std::int64_t first = 0, second = 0;  // the token's halves: from the left, from the right
  float fill = 0.0f;
  std::shared_ptr<HalosInFlight> registry;
  std::deque<std::unique_ptr<HaloExchange<float>>> in_flight;  // through MPI
  bool shared_in_flight = false;                               // through the site's channel
  HaloSite site;
  FView zeros_left, zeros_right;  // the adjoint's strips from a missing neighbour (made once)
  bool zeros_made = false;

  std::pair<FView, FView> halves(const FView& recv) const {
    return {FView(Kokkos::subview(recv, std::make_pair(std::int64_t(0), first))),
            FView(Kokkos::subview(recv, std::make_pair(first, first + second)))};
  }
  // Forward: my last block's tail to the right, my first block's head to the left; adjoint: my
  // first block's left halo to the left, my last block's right halo to the right.
  void pack(const ExecSpace& space, const FView& x, const FView& to_left,
            const FView& to_right) const {
    const HaloAttrs& a = p.a;
    const std::int64_t nb = p.local[p.blocks].size, n = p.local[p.block].size;
    const std::int64_t w = adjoint ? a.right : a.left;
    kernels::halo_strip_into(space, p.local, x, p.blocks, p.block, 0, 0, adjoint ? a.left : a.right,
                             to_left);
    kernels::halo_strip_into(space, p.local, x, p.blocks, p.block, nb - 1, n - w, w, to_right);
  }

  void start(const ExecSpace& space, const FView& x, Buffers& b, int token) {
    // A finish always runs before the next start (the token orders them): one left over is a run
    // that failed between them.
    if (!in_flight.empty() || shared_in_flight)
      fail("mtk::Program::run", cat(p.a.blocks, "/", p.a.block, ": a halo exchange of a failed ",
                                    "run is still in flight; lower the program again"));
    const auto bytes = [](std::int64_t n) { return static_cast<std::size_t>(n) * sizeof(float); };
    if (detail::NodeHaloChannel* channel =
            site.shared_channel(p.mesh, p.axis, p.periodic(), bytes(second), bytes(first))) {
      const detail::NodeHaloChannel::Strips slot = channel->slots();
      pack(space, x, FView(static_cast<float*>(slot.to_left), second),
           FView(static_cast<float*>(slot.to_right), first));
      space.fence();  // packed before the neighbours may read
      channel->publish();
      shared_in_flight = true;
      b[static_cast<size_t>(token)] =
          Program::Buffer(uninitialized_view<float>("mtk::halo_exchange::token", first + second));
      return;
    }
    const FView recv = filled(space, first + second, fill);
    const auto [from_left, from_right] = halves(recv);
    const FView to_left = uninitialized_view<float>("mtk::halo_exchange::to_left", second);
    const FView to_right = uninitialized_view<float>("mtk::halo_exchange::to_right", first);
    pack(space, x, to_left, to_right);
    in_flight.push_back(std::make_unique<HaloExchange<float>>(p.mesh, p.axis, p.periodic(), to_left,
                                                              to_right, from_left, from_right));
    registry->add(in_flight.back().get());
    b[static_cast<size_t>(token)] = Program::Buffer(recv);
  }

  // Waits for the strips, then writes what they reach: forward, places them; adjoint, the folded
  // values at the edges, each position's terms in halo_fold's order.
  void finish(const ExecSpace& space, const FView& recv, const FView& x, const FView& out) {
    if (shared_in_flight) {
      shared_in_flight = false;
      const detail::NodeHaloChannel::Received r = site.channel->received();
      const auto strip = [](const void* at, std::int64_t n) {
        return FView(const_cast<float*>(static_cast<const float*>(at)), n);
      };
      if (adjoint) {
        if (!zeros_made) {
          zeros_left = filled(space, first, 0.0f);
          zeros_right = filled(space, second, 0.0f);
          zeros_made = true;
        }
        write(space, r.from_left ? strip(r.from_left, first) : zeros_left,
              r.from_right ? strip(r.from_right, second) : zeros_right, x, out);
      } else {  // a missing neighbour's side keeps the fill the local step wrote
        kernels::halo_place(space, p.local_out, out, p.blocks, p.block,
                            r.from_left ? strip(r.from_left, first) : FView(),
                            r.from_right ? strip(r.from_right, second) : FView(),
                            r.from_left ? p.a.left : 0, r.from_right ? p.a.right : 0);
      }
      space.fence();  // read before the neighbours may write the slots again
      site.channel->release();
      return;
    }
    if (in_flight.empty())
      fail("mtk::halo_exchange",
           cat(p.a.blocks, "/", p.a.block, ": finish with nothing in flight"));
    registry->remove(in_flight.front().get());
    in_flight.front()->finish();
    in_flight.pop_front();
    const auto [from_left, from_right] = halves(recv);
    write(space, from_left, from_right, x, out);
  }

  void write(const ExecSpace& space, const FView& from_left, const FView& from_right,
             const FView& x, const FView& out) const {
    const HaloAttrs& a = p.a;
    if (adjoint)
      kernels::halo_fold_edges(space, p.local, x, p.blocks, p.block, from_left, from_right, a.left,
                               a.right, out);
    else
      kernels::halo_place(space, p.local_out, out, p.blocks, p.block, from_left, from_right, a.left,
                          a.right);
  }
};

// Split over a mesh dim: a start step (pack the strips, post the transfers), the local step
// (add_local_step) and a finish step (SplitExchange::finish). Adjacent they compute what
// halo_forward and halo_adjoint do, bitwise; program.overlap_halo moves the start up and the finish
// down (overlap_halos). `token`: the receive buffer, which ties the finish to its start.
void add_split_steps(Lowering& l, HaloPlan p, bool adjoint, int xin, int token, int mid) {
  const HaloAttrs a = p.a;
  const std::int64_t strip =
      p.local.num_elements() / p.local[p.blocks].size / p.local[p.block].size;
  p.local_out = l.local(mid);
  auto ex = std::make_shared<SplitExchange>(p);
  ex->adjoint = adjoint;
  // Forward: the left neighbour's tail arrives first in the token, then the right one's head.
  // Adjoint: the left neighbour's right halo (width right), then the right one's left halo.
  ex->first = strip * (adjoint ? a.right : a.left);
  ex->second = strip * (adjoint ? a.left : a.right);
  ex->fill = adjoint ? 0.0f : static_cast<float>(a.fill);
  ex->registry = l.halos_in_flight();
  l.add_step_of(
      halo_start_kind(), cat(l.label(), " start"), {xin}, {token},
      [=](Buffers& b, const ExecSpace& space) {
        ex->start(space, view_of<float>(b, xin), b, token);
      },
      0, Program::Category::collective);
  add_local_step(l, p, adjoint, xin, mid);
  l.add_step(
      cat(l.label(), " finish"),
      adjoint ? std::vector<int>{token, xin, mid} : std::vector<int>{token, mid}, {mid},
      [=](Buffers& b, const ExecSpace& space) {
        ex->finish(space, view_of<float>(b, token), adjoint ? view_of<float>(b, xin) : FView(),
                   view_of<float>(b, mid));
      },
      static_cast<double>(2 * (ex->first + ex->second)));  // the strips packed and written
}

void lower_halo(Lowering& l, const HaloAttrs& a, bool adjoint) {
  const int x = l.op().inputs[0], y = l.op().outputs[0];
  l.materialize(x);
  const int xin = l.gather_dims(x, {a.block});
  HaloPlan p{l.mesh(), l.local(xin), Shape(), 0, 0, -1, a};
  p.blocks = p.local.index_of(a.blocks);
  p.block = p.local.index_of(a.block);
  const int axis = l.axes(xin)[static_cast<size_t>(p.blocks)];
  // Written in y's own buffer where the layouts agree: no alias step, which overlap_halos could
  // not move the finish past.
  const bool direct = l.axes(y) == l.axes(xin);
  const int mid = direct ? y : l.new_temp(l.layout(y).shape(), l.axes(xin), DType::float32);
  if (axis >= 0 && l.mesh_shape()[axis].size > 1) {
    p.axis = axis;
    // One strip to each side: (left + right) positions of every other dim of one block.
    const std::int64_t strip = p.local.num_elements() / p.local[p.blocks].size /
                               p.local[p.block].size * (a.left + a.right);
    const int token = l.new_temp(Shape({{"halo_strips", strip}}), {-1}, DType::float32);
    l.count_comm(Collective::halo, strip * static_cast<std::int64_t>(sizeof(float)), {axis});
    add_split_steps(l, p, adjoint, xin, token, mid);
  } else {  // a local copy
    l.add_step_of(
        halo_copy_kind(), l.label(), {xin}, {mid},
        [=](Buffers& b, const ExecSpace& space) {
          const FView in = view_of<float>(b, xin);
          b[static_cast<size_t>(mid)] =
              Program::Buffer(adjoint ? halo_adjoint(space, p, in) : halo_forward(space, p, in));
        },
        static_cast<double>(l.local(mid).num_elements()), Program::Category::compute);
  }
  if (!direct)
    l.add_alias(l.relayout(mid, l.axes(y)), y);
}

void lower_halo_exchange(Lowering& l, const HaloAttrs& a) {
  lower_halo(l, a, false);
}
void lower_halo_reduce(Lowering& l, const HaloAttrs& a) {
  lower_halo(l, a, true);
}

void halo_exchange_grad(GradientContext& c, const HaloAttrs& a) {
  c.add(0, halo_reduce(c.dy(), a.blocks, a.block, a.left, a.right, a.boundary));
}

void halo_reduce_grad(GradientContext& c, const HaloAttrs& a) {
  c.add(0, halo_exchange(c.dy(), a.blocks, a.block, a.left, a.right, a.boundary, 0.0));
}

std::vector<std::string> halo_unsplittable(const HaloAttrs& a) {
  return {a.block};
}

constexpr auto halo_exchange_op =
    make_op_kind<HaloAttrs>("halo_exchange", {FlopClass::elementwise, false, true},
                            lower_halo_exchange, halo_exchange_grad, halo_unsplittable);
constexpr auto halo_reduce_op =
    make_op_kind<HaloAttrs>("halo_reduce", {FlopClass::elementwise, false, true}, lower_halo_reduce,
                            halo_reduce_grad, halo_unsplittable);

// The block dim's size in x, checked against the halo (`block_size` positions per block).
void check_halo(const Tensor& x, const HaloAttrs& a, std::int64_t block_size, const char* where) {
  graph_of({x}, where);
  require_float(x, where);
  dim_index(x, a.blocks, where);
  dim_index(x, a.block, where);
  if (a.blocks == a.block)
    fail(where,
         cat("the blocks dim and the block dim of ", describe(x), " are both '", a.block, "'"));
  if (a.left < 0 || a.right < 0)
    fail(where, cat("negative halo (left ", a.left, ", right ", a.right, ") for ", describe(x)));
  if (a.left > block_size || a.right > block_size)
    fail(where, cat("halo (left ", a.left, ", right ", a.right, ") of ", describe(x),
                    " is wider than its blocks: dimension '", a.block, "' has ", block_size,
                    " positions per block (", x.shape().size_of(a.blocks), " blocks along '",
                    a.blocks, "'); use fewer, larger blocks or a narrower halo"));
}

}  // namespace

Tensor halo_exchange(const Tensor& x, const std::string& blocks_dim, const std::string& block_dim,
                     std::int64_t left, std::int64_t right, HaloBoundary boundary, double fill) {
  const char* where = "mtk::halo_exchange";
  const HaloAttrs a{blocks_dim, block_dim, left, right, boundary, fill};
  graph_of({x}, where);
  const int i = dim_index(x, block_dim, where);
  check_halo(x, a, x.shape()[i].size, where);
  if (left == 0 && right == 0)
    return x;
  const Shape out = replace_dim(x.shape(), i, {block_dim, x.shape()[i].size + left + right});
  return x.graph().add_op1(halo_exchange_op, {x}, out, x.dtype(), a);
}

Tensor halo_reduce(const Tensor& dy, const std::string& blocks_dim, const std::string& block_dim,
                   std::int64_t left, std::int64_t right, HaloBoundary boundary) {
  const char* where = "mtk::halo_reduce";
  const HaloAttrs a{blocks_dim, block_dim, left, right, boundary, 0.0};
  graph_of({dy}, where);
  const int i = dim_index(dy, block_dim, where);
  const std::int64_t n = dy.shape()[i].size - left - right;
  if (n < 1)
    fail(where, cat("dimension '", block_dim, "' of ", describe(dy),
                    " is not wider than the halo (", left, " + ", right, ")"));
  check_halo(dy, a, n, where);
  if (left == 0 && right == 0)
    return dy;
  const Shape out = replace_dim(dy.shape(), i, {block_dim, n});
  return dy.graph().add_op1(halo_reduce_op, {dy}, out, dy.dtype(), a);
}

}  // namespace mtk
