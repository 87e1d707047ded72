// The interior/border split of the spatial layers under program.overlap_halo; see conv_overlap.hpp.
#include <mtk/nn/impl/conv_overlap.hpp>
#include <mtk/ops/elementwise.hpp>
#include <mtk/ops/halo_exchange.hpp>
#include <mtk/ops/patches.hpp>
#include <mtk/ops/shape.hpp>

#include <algorithm>

namespace mtk::nn::impl {

// Every exchanged dim is split (nested: docs/spatial.md#overlap), so that each exchange of the
// chain has a part of the layer to run while it travels.
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
    const std::int64_t n = s.size_of(dims[k].dim), l = p.halo_left;
    b.stride = p.patch.stride;
    b.span = p.patch.dilation * (p.patch.size - 1) + 1;
    b.m = n / b.stride;
    b.top = (l + b.stride - 1) / b.stride;
    const std::int64_t past = l + n - b.span + 1;  // first output reading the right halo: ceil
    b.first = std::min(b.m, std::max<std::int64_t>(0, (past + b.stride - 1) / b.stride));
    if (b.first <= b.top)
      return {};  // a dim without interior: the plain layer
    b.active = any = true;
  }
  return any ? out : std::vector<Border>{};
}

namespace {

// The m outputs of a block along `d` from its three parts: the top and bottom border rows around
// the inner rows. Each part is zero-padded to the m rows and summed (x + 0 is x): one pass per
// part, where the concat kernel measured 10-30x slower (bench_spatial).
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

// The exchanged dims in the order of their chain: the first one last, so that its corners travel
// with it and its border slabs, the largest, come from the block widened along every dim. Blocked
// dims of one block get their halo as padding in `patches`.
std::vector<size_t> chain_of(const std::vector<SpatialDim>& dims, const std::vector<DimPlan>& plans,
                             const std::vector<Border>& borders, std::vector<PatchDim>& patches) {
  std::vector<size_t> chain;
  for (size_t k = 0; k < plans.size(); ++k) {
    if (dims[k].blocks.empty())
      continue;
    if (borders[k].active) {
      chain.push_back(k);
    } else if (!borders[k].exchange) {
      patches[k].pad_before = plans[k].halo_left;
      patches[k].pad_after = plans[k].halo_right;
    }
  }
  std::rotate(chain.begin(), chain.begin() + 1, chain.end());
  return chain;
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

// Built in the order the lowering keeps (docs/spatial.md#overlap): with the chain's dims e_1..e_k,
// the outputs interior along all of them come from the block while e_1's exchange travels; then
// for each e_i, the outputs on its border (whole along e_1..e_{i-1}, interior along the rest) from
// the block widened along e_1..e_i, while e_{i+1}'s exchange travels (overlap_halos moves each
// exchange's wait after the part before it).
Tensor overlapped_patches(const PatchCore& core, const Tensor& x,
                          const std::vector<SpatialDim>& dims, const std::vector<DimPlan>& plans,
                          const std::vector<Border>& borders, double fill) {
  std::vector<PatchDim> patches = patches_of(plans);
  const std::vector<size_t> chain = chain_of(dims, plans, borders, patches);
  auto exchange = [&](const Tensor& t, size_t k) {
    return halo_exchange(t, dims[k].blocks, dims[k].dim, plans[k].halo_left, plans[k].halo_right,
                         HaloBoundary::zero, fill);
  };
  // The block rows that the interior outputs along chain[from..] read (widened row r is block row
  // r - l).
  auto interior = [&](Tensor t, size_t from) {
    for (size_t i = from; i < chain.size(); ++i) {
      const Border& b = borders[chain[i]];
      t = slice(t, dims[chain[i]].dim, b.begin(b.top) - plans[chain[i]].halo_left,
                b.rows(b.top, b.first));
    }
    return t;
  };
  Tensor next = exchange(x, chain[0]);
  Tensor y = core(interior(x, 0), patches);
  for (size_t i = 0; i < chain.size(); ++i) {
    const Tensor widened = next;  // along chain[0..i]
    if (i + 1 < chain.size())
      next = exchange(widened, chain[i + 1]);
    const Tensor base = interior(widened, i + 1);
    const std::string& d = dims[chain[i]].dim;
    const Border& b = borders[chain[i]];
    std::vector<Tensor> parts;  // a one-sided halo has a border on one side only
    if (b.top > 0)
      parts.push_back(core(slice(base, d, 0, b.rows(0, b.top)), patches));
    parts.push_back(y);
    if (b.first < b.m)
      parts.push_back(core(slice(base, d, b.begin(b.first), b.rows(b.first, b.m)), patches));
    y = join_rows(d, b.m, parts);
  }
  return y;
}

// The adjoint of overlapped_patches: the input rows on the border of the chain's last dim e_k
// (whole along the others) are folded into the block widened along every dim and their
// halo_reduce along e_k posted; while it travels, the rows on e_{k-1}'s border (interior along
// e_k) are folded, and so on down to the rows interior along every dim, which write the block
// only. Sums are regrouped: equal to the plain fold to float32 reassociation.
Tensor overlapped_fold(const FoldCore& fold, const Tensor& x, const Shape& widened,
                       const std::vector<SpatialDim>& dims, const std::vector<DimPlan>& plans,
                       const std::vector<Border>& borders) {
  std::vector<PatchDim> patches = patches_of(plans);
  const std::vector<size_t> chain = chain_of(dims, plans, borders, patches);
  Shape wide = widened;  // blocks of one block: folded with padding, which drops their halo
  for (size_t k = 0; k < dims.size(); ++k)
    if (!dims[k].blocks.empty() && !borders[k].exchange)
      wide = resized(wide, dims[k].dim,
                     widened.size_of(dims[k].dim) - plans[k].halo_left - plans[k].halo_right);
  // Input rows whole along chain[0..from), [o0, o1) along chain[border] and interior along the
  // rest: folded, then placed in `into`.
  auto part = [&](size_t from, size_t border, std::int64_t o0, std::int64_t o1, const Shape& into) {
    Tensor rows_in = x;
    Shape out = into;
    std::vector<std::pair<std::string, std::int64_t>> at;  // (dim, first row) to pad at
    for (size_t j = from; j < chain.size(); ++j) {
      const Border& b = borders[chain[j]];
      const std::string& d = dims[chain[j]].dim;
      const std::int64_t a = j == border ? o0 : b.top, e = j == border ? o1 : b.first;
      rows_in = slice(rows_in, d, a, e - a);
      out = resized(out, d, b.rows(a, e));
      // The border's rows write into the widened block, the interior's into the block only.
      at.emplace_back(d, j == border ? b.begin(a) : b.begin(a) - plans[chain[j]].halo_left);
    }
    Tensor f = fold(rows_in, out, patches);
    for (const auto& [d, first] : at) {
      const std::int64_t size = into.size_of(d), rows = f.shape().size_of(d);
      if (rows != size)
        f = pad(f, d, first, size - first - rows);
    }
    return f;
  };
  // `wide` along chain[0..from), the block along chain[from..).
  auto block_from = [&](size_t from) {
    Shape s = wide;
    for (size_t j = from; j < chain.size(); ++j) {
      const size_t k = chain[j];
      s = resized(s, dims[k].dim,
                  wide.size_of(dims[k].dim) - plans[k].halo_left - plans[k].halo_right);
    }
    return s;
  };
  Tensor y;
  for (size_t i = chain.size(); i-- > 0;) {
    const Border& b = borders[chain[i]];
    const Shape into = block_from(i + 1);
    Tensor border;
    if (b.top > 0)
      border = part(i, i, 0, b.top, into);
    if (b.first < b.m) {
      const Tensor bottom = part(i, i, b.first, b.m, into);
      border = border.valid() ? border + bottom : bottom;
    }
    y = y.valid() ? border + y : border;
    const size_t k = chain[i];
    y = halo_reduce(y, dims[k].blocks, dims[k].dim, plans[k].halo_left, plans[k].halo_right);
  }
  // The rows interior along every dim write the block only.
  return y + part(0, chain.size(), 0, 0, block_from(0));
}

}  // namespace mtk::nn::impl
