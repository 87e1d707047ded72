// Convolution, transposed convolution and pooling layers: halo_exchange on blocked dims, then
// extract_patches (im2col) and an einsum or a reduction; see conv.hpp.
#include <mtk/base/error.hpp>
#include <mtk/nn/conv.hpp>
#include <mtk/nn/impl/conv_overlap.hpp>
#include <mtk/ops/einsum.hpp>
#include <mtk/ops/elementwise.hpp>
#include <mtk/ops/halo_exchange.hpp>
#include <mtk/ops/patches.hpp>
#include <mtk/ops/reduce.hpp>
#include <mtk/ops/shape.hpp>
#include <mtk/ops/sources.hpp>
#include <mtk/ops/state.hpp>

#include <algorithm>
#include <limits>

namespace mtk::nn {
namespace {

using impl::Border;
using impl::DimPlan;

std::string describe(const Tensor& t) {
  return cat("'", t.name(), "' ", t.shape().to_string());
}

// `s` is the shape of the convolution's input, `what` names it.
DimPlan plan_dim(const Shape& s, const std::string& what, const SpatialDim& d, std::int64_t size,
                 Padding padding, const char* where) {
  if (!s.contains(d.dim))
    fail(where, cat(what, " has no spatial dimension '", d.dim, "'"));
  if (d.stride < 1 || d.dilation < 1 || size < 1)
    fail(where, cat("dim '", d.dim, "': stride ", d.stride, ", dilation ", d.dilation, " and size ",
                    size, " must be positive"));
  const std::int64_t n = s.size_of(d.dim), span = d.dilation * (size - 1) + 1;
  DimPlan p;
  p.patch = PatchDim{d.dim, d.tap, size, d.stride, d.dilation, 0, 0};
  if (padding == Padding::valid) {
    if (!d.blocks.empty())
      fail(where, cat("VALID padding along blocked dim '", d.dim, "' (blocks '", d.blocks, "') of ",
                      what, " is not supported; use SAME"));
    return p;
  }
  if (d.blocks.empty()) {
    const std::int64_t m = (n + d.stride - 1) / d.stride;
    const std::int64_t total = std::max<std::int64_t>((m - 1) * d.stride + span - n, 0);
    p.patch.pad_before = total / 2;
    p.patch.pad_after = total - total / 2;
    return p;
  }
  if (!s.contains(d.blocks))
    fail(where, cat(what, " has no blocks dimension '", d.blocks, "'"));
  if (n % d.stride != 0)
    fail(where, cat("blocked dim '", d.dim, "' of ", what, " has ", n,
                    " positions per block, not a multiple of the stride ", d.stride));
  // SAME over the whole dim (blocks * n positions) is a halo of this width and no padding.
  const std::int64_t total = std::max<std::int64_t>(span - d.stride, 0);
  p.halo_left = total / 2;
  p.halo_right = total - total / 2;
  return p;
}

Tensor exchange_halos(Tensor x, const std::vector<SpatialDim>& dims,
                      const std::vector<DimPlan>& plans, double fill) {
  for (size_t k = 0; k < dims.size(); ++k)
    if (!dims[k].blocks.empty())
      x = halo_exchange(x, dims[k].blocks, dims[k].dim, plans[k].halo_left, plans[k].halo_right,
                        HaloBoundary::zero, fill);
  return x;
}

std::vector<PatchDim> patch_dims(const std::vector<DimPlan>& plans) {
  std::vector<PatchDim> out;
  for (const auto& p : plans)
    out.push_back(p.patch);
  return out;
}

// `s` without the tap dims, with `from` renamed and resized to `to`.
Shape without_taps(const Shape& s, const std::vector<SpatialDim>& dims, const std::string& from,
                   const Dimension& to) {
  std::vector<Dimension> out;
  for (const auto& d : s.dims()) {
    bool tap = false;
    for (const auto& sd : dims)
      tap = tap || sd.tap == d.name;
    if (!tap)
      out.push_back(d.name == from ? to : d);
  }
  return Shape(out);
}

// The tap dims of `dims` as one dim (row-major: the last tap fastest), so that 3-D patches stay
// within the einsum's rank.
Dimension merged_taps(const Shape& filter, const std::vector<SpatialDim>& dims) {
  Dimension m{"", 1};
  for (const auto& d : dims) {
    m.name += (m.name.empty() ? "" : "*") + d.tap;
    m.size *= filter.size_of(d.tap);
  }
  return m;
}

// `s` with its tap dims (consecutive, in the order of `dims`: ops/patches.hpp) merged into `taps`.
Shape merge_taps(const Shape& s, const std::vector<SpatialDim>& dims, const Dimension& taps) {
  std::vector<Dimension> out;
  for (const auto& d : s.dims()) {
    const bool tap = std::any_of(dims.begin(), dims.end(),
                                 [&](const SpatialDim& sd) { return sd.tap == d.name; });
    if (!tap)
      out.push_back(d);
    else if (d.name == dims.front().tap)
      out.push_back(taps);
  }
  return Shape(out);
}

// The filter with its tap dims first, merged into `taps`, then its channels.
// The einsum's rank limit (kernels' IndexMap): checked here to name the layer.
constexpr int kMaxEinsumRank = 8;

void check_rank(const Shape& patches, const std::string& what, const char* where) {
  if (patches.rank() > kMaxEinsumRank)
    fail(where, cat("the patches of ", what, " have ", patches.rank(), " dims ",
                    patches.to_string(), " with the taps merged; the einsum takes at most ",
                    kMaxEinsumRank, ": merge other dims first (reshape)"));
}

Tensor merged_filter(const Tensor& f, const std::vector<SpatialDim>& dims, const Dimension& taps) {
  if (dims.size() == 1)
    return f;
  std::vector<Dimension> order, merged{taps};
  for (const auto& d : dims)
    order.push_back(f.shape().dim(d.tap));
  for (const auto& d : f.shape().dims())
    if (std::find(order.begin(), order.end(), d) == order.end()) {
      order.push_back(d);
      merged.push_back(d);
    }
  const Tensor ordered = Shape(order) == f.shape() ? f : einsum({f}, Shape(order));
  return reshape(ordered, Shape(merged));
}

void check_channels(const Tensor& x, const Tensor& filter, const std::vector<SpatialDim>& dims,
                    const std::string& x_channels, const std::string& other, const char* where) {
  if (dims.empty() || dims.size() > 3)
    fail(where, cat(dims.size(), " spatial dims; 1 to 3 are supported"));
  if (!x.shape().contains(x_channels) || !filter.shape().contains(x_channels) ||
      !filter.shape().contains(other) || x.shape().contains(other) || x_channels == other)
    fail(where,
         cat("channels '", x_channels, "' must be a dim of the input ", describe(x),
             " and of the filter ", describe(filter), ", and '", other, "' of the filter only"));
  std::int64_t expected = 2;
  for (const auto& d : dims) {
    if (!filter.shape().contains(d.tap))
      fail(where,
           cat("the filter ", describe(filter), " has no tap dim '", d.tap, "' for '", d.dim, "'"));
    ++expected;
  }
  if (filter.shape().rank() != expected)
    fail(where, cat("the filter ", describe(filter), " must have exactly the tap dims and the ",
                    "channels '", x_channels, "' and '", other, "'"));
}

std::vector<DimPlan> plan_dims(const Tensor& x, const Tensor& filter,
                               const std::vector<SpatialDim>& dims, Padding padding,
                               const char* where) {
  std::vector<DimPlan> plans;
  for (const auto& d : dims)
    plans.push_back(
        plan_dim(x.shape(), describe(x), d, filter.shape().size_of(d.tap), padding, where));
  return plans;
}

// The layout search's candidates: the blocks dims (spatial parallelism) and the output channels
// (split like d_ff: each rank its filters, no communication; "" for pooling).
void offer_splits(Graph& g, const std::vector<SpatialDim>& dims, const std::string& channels) {
  for (const auto& d : dims)
    if (!d.blocks.empty())
      g.offer_split(d.blocks);
  if (!channels.empty())
    g.offer_split(channels);
}

// The patches of a (halo'd or padded) input and their einsum with the filter: a convolution's
// local work.
struct ConvCore {
  Tensor filter;
  std::vector<SpatialDim> dims;
  std::string in_channels, out_channels, what;
  const char* where;

  Tensor operator()(const Tensor& xin, const std::vector<PatchDim>& patches) const {
    return contract(extract_patches(xin, patches));
  }
  Tensor contract(const Tensor& cols) const {
    const Shape out = without_taps(cols.shape(), dims, in_channels,
                                   {out_channels, filter.shape().size_of(out_channels)});
    const Dimension taps = merged_taps(filter.shape(), dims);
    check_rank(merge_taps(cols.shape(), dims, taps), what, where);
    if (dims.size() == 1)
      return einsum({cols, filter}, out);
    return einsum(
        {reshape(cols, merge_taps(cols.shape(), dims, taps)), merged_filter(filter, dims, taps)},
        out);
  }
};

// A transposed convolution's local work on rows of its input: the einsum with the filter into
// the patches of `out` (the columns) and their fold into `out`.
struct TransposeCore {
  Tensor filter;
  std::vector<SpatialDim> dims;
  std::string in_channels, out_channels, what;
  const char* where;

  Tensor operator()(const Tensor& x, const Shape& out, const std::vector<PatchDim>& patches) const {
    const Shape col_shape = patches_shape(out, patches);  // the fold's input
    const Dimension taps = merged_taps(filter.shape(), dims);
    check_rank(merge_taps(col_shape, dims, taps), what, where);
    const Tensor cols = dims.size() == 1 ? einsum({x, filter}, col_shape)
                                         : reshape(einsum({x, merged_filter(filter, dims, taps)},
                                                          merge_taps(col_shape, dims, taps)),
                                                   col_shape);
    return fold_patches(cols, out, patches);
  }
};

// Under program.overlap_halo (the graph's options), a blocked layer with an interior is built
// split (impl/conv_overlap.hpp).
std::vector<Border> overlap_borders(const Graph& g, const Shape& s,
                                    const std::vector<SpatialDim>& dims,
                                    const std::vector<DimPlan>& plans) {
  if (!g.options().overlap_halo)
    return {};
  return impl::plan_borders(s, dims, plans);
}

// A pooling layer's plans and its window dims.
std::vector<DimPlan> pool_plans(const Tensor& x, const std::vector<SpatialDim>& dims,
                                Padding padding, const char* where,
                                std::vector<std::string>& taps) {
  std::vector<DimPlan> plans;
  for (const auto& d : dims) {
    plans.push_back(plan_dim(x.shape(), describe(x), d, d.window, padding, where));
    taps.push_back(d.tap);
  }
  return plans;
}

// core(x with its halos, filled with `fill` at the image's edges), split or plain.
Tensor pooled(const impl::PatchCore& core, const Tensor& x, const std::vector<SpatialDim>& dims,
              const std::vector<DimPlan>& plans, double fill) {
  const auto borders = overlap_borders(x.graph(), x.shape(), dims, plans);
  if (!borders.empty())
    return impl::overlapped_patches(core, x, dims, plans, borders, fill);
  return core(exchange_halos(x, dims, plans, fill), patch_dims(plans));
}

}  // namespace

Tensor conv(const Tensor& x, const Tensor& filter, const std::vector<SpatialDim>& dims,
            const std::string& in_channels, const std::string& out_channels, Padding padding) {
  const char* where = "mtk::nn::conv";
  check_channels(x, filter, dims, in_channels, out_channels, where);
  offer_splits(x.graph(), dims, out_channels);
  const ConvCore core{filter, dims, in_channels, out_channels, describe(x), where};
  const std::vector<DimPlan> plans = plan_dims(x, filter, dims, padding, where);
  // program.overlap_halo: interior first, then the border
  if (const auto borders = overlap_borders(x.graph(), x.shape(), dims, plans); !borders.empty())
    return impl::overlapped_patches(core, x, dims, plans, borders, 0.0);
  return core(exchange_halos(x, dims, plans, 0.0), patch_dims(plans));
}

Tensor conv_transpose(const Tensor& x, const Tensor& filter, const std::vector<SpatialDim>& dims,
                      const std::string& in_channels, const std::string& out_channels,
                      Padding padding) {
  const char* where = "mtk::nn::conv_transpose";
  offer_splits(x.graph(), dims, in_channels);
  // x plays the convolution's output: its channels are the filter's out_channels. The result is
  // the adjoint of the convolution of a tensor of y_shape.
  check_channels(x, filter, dims, out_channels, in_channels, where);
  std::vector<Dimension> y_dims;
  for (const auto& d : x.shape().dims())
    y_dims.push_back(d.name == out_channels ? filter.shape().dim(in_channels) : d);
  for (const auto& d : dims) {
    const std::int64_t k = filter.shape().size_of(d.tap), n = x.shape().size_of(d.dim);
    const std::int64_t span = d.dilation * (k - 1) + 1;
    const int i = x.shape().index_of(d.dim);
    y_dims[static_cast<size_t>(i)].size =
        padding == Padding::same ? n * d.stride : (n - 1) * d.stride + span;
  }
  const Shape y_shape(y_dims);
  const std::string what = cat("the output ", y_shape.to_string());
  std::vector<DimPlan> plans;
  std::vector<Dimension> widened = y_dims;
  for (const auto& d : dims) {
    plans.push_back(plan_dim(y_shape, what, d, filter.shape().size_of(d.tap), padding, where));
    const int i = y_shape.index_of(d.dim);
    widened[static_cast<size_t>(i)].size += plans.back().halo_left + plans.back().halo_right;
  }
  const TransposeCore fold{filter, dims, in_channels, out_channels, describe(x), where};
  // program.overlap_halo: the border's halo_reduce runs while the interior is folded
  if (const auto borders = overlap_borders(x.graph(), y_shape, dims, plans); !borders.empty())
    return impl::overlapped_fold(fold, x, Shape(widened), dims, plans, borders);
  Tensor y = fold(x, Shape(widened), patch_dims(plans));
  for (size_t k = 0; k < dims.size(); ++k)
    if (!dims[k].blocks.empty())
      y = halo_reduce(y, dims[k].blocks, dims[k].dim, plans[k].halo_left, plans[k].halo_right);
  return y;
}

Tensor max_pool(const Tensor& x, const std::vector<SpatialDim>& dims, Padding padding) {
  const char* where = "mtk::nn::max_pool";
  offer_splits(x.graph(), dims, "");
  const double lowest = -std::numeric_limits<float>::infinity();
  std::vector<std::string> taps;
  const std::vector<DimPlan> plans = pool_plans(x, dims, padding, where, taps);
  const auto core = [&](const Tensor& xin, const std::vector<PatchDim>& patches) {
    return reduce_max(extract_patches(xin, patches, lowest), taps);
  };
  return pooled(core, x, dims, plans, lowest);
}

Tensor avg_pool(const Tensor& x, const std::vector<SpatialDim>& dims, Padding padding) {
  const char* where = "mtk::nn::avg_pool";
  offer_splits(x.graph(), dims, "");
  std::vector<std::string> taps;
  const std::vector<DimPlan> plans = pool_plans(x, dims, padding, where, taps);
  std::vector<Dimension> spatial;  // the positions a window may cover: blocks and dims
  for (const auto& d : dims) {
    if (!d.blocks.empty())
      spatial.push_back(x.shape().dim(d.blocks));
    spatial.push_back(x.shape().dim(d.dim));
  }
  const auto core = [&](const Tensor& xin, const std::vector<PatchDim>& patches) {
    return reduce_sum(extract_patches(xin, patches), taps);
  };
  const Tensor sums = pooled(core, x, dims, plans, 0.0);
  // Each window's count of real positions: the same pooling of ones.
  const Tensor counts = pooled(core, constant(x.graph(), Shape(spatial), 1.0), dims, plans, 0.0);
  return divide(sums, stop_gradient(counts));
}

}  // namespace mtk::nn
