// The interior/border split of the spatial layers under MTK_OVERLAP_HALO; see conv_overlap.hpp.
#include <mtk/nn/impl/conv_overlap.hpp>
#include <mtk/ops/ops.hpp>

#include <algorithm>

namespace mtk::nn::impl {

// One split dim (the first exchanged one: the others' exchanges come first, so that one split
// keeps the extra work to two border slabs; splitting every dim, nested, cost more than it hid on
// 2-D and 3-D meshes, bench_spatial).
std::vector<Border> plan_borders(const Shape& s, const std::vector<SpatialDim>& dims,
                                 const std::vector<DimPlan>& plans) {
  std::vector<Border> out(dims.size());
  bool any = false;
  for (size_t k = 0; k < dims.size(); ++k) {
    const DimPlan& p = plans[k];
    // One block: its halos are the zero boundary, so padding is exact along it.
    if (dims[k].blocks.empty() || s.size_of(dims[k].blocks) == 1 || p.halo_left + p.halo_right == 0)
      continue;
    Border& b = out[k];
    b.exchange = true;
    if (any)
      continue;
    const std::int64_t n = s.size_of(dims[k].dim), l = p.halo_left;
    b.stride = p.patch.stride;
    b.span = p.patch.dilation * (p.patch.size - 1) + 1;
    b.m = n / b.stride;
    b.top = (l + b.stride - 1) / b.stride;
    const std::int64_t past = l + n - b.span + 1;  // first output reading the right halo: ceil
    b.first = std::min(b.m, std::max<std::int64_t>(0, (past + b.stride - 1) / b.stride));
    if (b.first <= b.top)
      return {};
    b.active = any = true;
  }
  return any ? out : std::vector<Border>{};
}

namespace {

// The m outputs of a block along the split dim `d` from its three parts: the top and bottom
// border rows around the interior rows. Each part is zero-padded to the m rows and summed (x + 0
// is x): one pass per part, where the concat kernel measured 10-30x slower (bench_spatial).
Tensor join_rows(const std::string& d, std::int64_t m, const std::vector<Tensor>& parts) {
  Tensor y;
  std::int64_t at = 0;
  for (const Tensor& part : parts) {
    const std::int64_t rows = part.shape().size_of(d);
    const Tensor placed = rows == m ? part : pad(part, d, at, m - at - rows);
    y = y.valid() ? y + placed : placed;
    at += rows;
  }
  return y;
}

// The index of the split dim; blocked dims of one block get their halo as padding in `patches`.
size_t split_dim(const std::vector<SpatialDim>& dims, const std::vector<DimPlan>& plans,
                 const std::vector<Border>& borders, std::vector<PatchDim>& patches) {
  size_t split = 0;
  for (size_t k = 0; k < plans.size(); ++k) {
    if (dims[k].blocks.empty())
      continue;
    if (borders[k].active) {
      split = k;
    } else if (!borders[k].exchange) {
      patches[k].pad_before = plans[k].halo_left;
      patches[k].pad_after = plans[k].halo_right;
    }
  }
  return split;
}

std::vector<PatchDim> patches_of(const std::vector<DimPlan>& plans) {
  std::vector<PatchDim> out;
  for (const auto& p : plans)
    out.push_back(p.patch);
  return out;
}

// `s` with `dim` resized to `size`.
Shape resized(const Shape& s, const std::string& dim, std::int64_t size) {
  std::vector<Dimension> out = s.dims();
  out[static_cast<size_t>(s.index_of(dim))].size = size;
  return Shape(out);
}

}  // namespace

// Built in the order the lowering keeps (docs/spatial.md#overlap): overlap_halos moves the split
// exchange's wait after the interior.
Tensor overlapped_patches(const PatchCore& core, const Tensor& x,
                          const std::vector<SpatialDim>& dims, const std::vector<DimPlan>& plans,
                          const std::vector<Border>& borders, double fill) {
  std::vector<PatchDim> patches = patches_of(plans);
  const size_t split = split_dim(dims, plans, borders, patches);
  Tensor xo = x;  // x exchanged along every dim but the split one
  for (size_t k = 0; k < plans.size(); ++k)
    if (k != split && borders[k].exchange)
      xo = halo_exchange(xo, dims[k].blocks, dims[k].dim, plans[k].halo_left, plans[k].halo_right,
                         HaloBoundary::zero, fill);
  const SpatialDim& d = dims[split];
  const Border& b = borders[split];
  const std::int64_t l = plans[split].halo_left;
  const Tensor xh =
      halo_exchange(xo, d.blocks, d.dim, l, plans[split].halo_right, HaloBoundary::zero, fill);
  // The interior rows [top, first) read block rows only (widened row r is block row r - l).
  const Tensor interior =
      core(slice(xo, d.dim, b.begin(b.top) - l, b.rows(b.top, b.first)), patches);
  std::vector<Tensor> parts;  // a one-sided halo has a border on one side only
  if (b.top > 0)
    parts.push_back(core(slice(xh, d.dim, 0, b.rows(0, b.top)), patches));
  parts.push_back(interior);
  if (b.first < b.m)
    parts.push_back(core(slice(xh, d.dim, b.begin(b.first), b.rows(b.first, b.m)), patches));
  return join_rows(d.dim, b.m, parts);
}

// The border input rows write into the halo (and the block's edge rows), the interior rows into
// the block only, so the halo_reduce of the border's contributions runs while the interior's are
// computed. Sums are regrouped: equal to the plain fold to float32 reassociation.
Tensor overlapped_fold(const FoldCore& fold, const Tensor& x, const Shape& widened,
                       const std::vector<SpatialDim>& dims, const std::vector<DimPlan>& plans,
                       const std::vector<Border>& borders) {
  std::vector<PatchDim> patches = patches_of(plans);
  const size_t split = split_dim(dims, plans, borders, patches);
  Shape wide = widened;  // blocks of one block: folded with padding, which drops their halo
  for (size_t k = 0; k < dims.size(); ++k)
    if (!dims[k].blocks.empty() && !borders[k].exchange)
      wide = resized(wide, dims[k].dim,
                     widened.size_of(dims[k].dim) - plans[k].halo_left - plans[k].halo_right);
  const SpatialDim& d = dims[split];
  const Border& b = borders[split];
  const std::int64_t l = plans[split].halo_left, r = plans[split].halo_right;
  const std::int64_t w = wide.size_of(d.dim), n = w - l - r;
  // Input rows [o0, o1) folded into the widened block, placed at its rows [o0 * stride, ...).
  auto part = [&](std::int64_t o0, std::int64_t o1) {
    const std::int64_t rows = b.rows(o0, o1);
    const Tensor f = fold(slice(x, d.dim, o0, o1 - o0), resized(wide, d.dim, rows), patches);
    return rows == w ? f : pad(f, d.dim, b.begin(o0), w - b.begin(o0) - rows);
  };
  Tensor border;
  if (b.top > 0)
    border = part(0, b.top);
  if (b.first < b.m)
    border = border.valid() ? border + part(b.first, b.m) : part(b.first, b.m);
  const Tensor reduced = halo_reduce(border, d.blocks, d.dim, l, r);
  // The interior rows write block rows [top * stride - l, ...): no halo.
  const std::int64_t rows = b.rows(b.top, b.first), at = b.begin(b.top) - l;
  const Tensor inner =
      fold(slice(x, d.dim, b.top, b.first - b.top), resized(wide, d.dim, rows), patches);
  Tensor y = reduced + (rows == n ? inner : pad(inner, d.dim, at, n - at - rows));
  for (size_t k = 0; k < dims.size(); ++k)
    if (k != split && borders[k].exchange)
      y = halo_reduce(y, dims[k].blocks, dims[k].dim, plans[k].halo_left, plans[k].halo_right);
  return y;
}

}  // namespace mtk::nn::impl
