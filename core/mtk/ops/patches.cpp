// extract_patches (im2col) and fold_patches (col2im): builders, gradients (each other) and
// lowering onto kernels/patches.hpp. The spatial and tap dims are gathered whole; every other dim
// keeps its split.
#include <mtk/base/error.hpp>
#include <mtk/graph/gradient_context.hpp>
#include <mtk/kernels/patches.hpp>
#include <mtk/lower/lowering_context.hpp>
#include <mtk/ops/impl/builder_checks.hpp>
#include <mtk/ops/patches.hpp>

#include <set>

namespace mtk {
namespace {

using namespace ops_impl;
using FView = kernels::View<float>;

struct PatchAttrs {
  std::vector<PatchDim> dims;
  double pad_value = 0.0;
  Shape shape;  // fold_patches: the shape folded into
};

std::vector<kernels::PatchGeometry> geometry(const Shape& s, const std::vector<PatchDim>& dims) {
  std::vector<kernels::PatchGeometry> out;
  for (const auto& d : dims) {
    const int i = s.index_of(d.dim);
    out.push_back({i, d.size, d.stride, d.dilation, d.pad_before, patch_positions(d, s[i].size)});
  }
  return out;
}

// Lowers y = kernel(x) where `whole` dims of x are gathered and y's other dims keep x's splits.
template <class Kernel>
void lower_patch_op(Lowering& l, const std::set<std::string>& whole, Kernel kernel) {
  const int x = l.op().inputs[0], y = l.op().outputs[0];
  l.materialize(x);
  const int xin = l.gather_dims(x, whole);
  const Shape& xs = l.layout(xin).shape();
  const Shape& ys = l.layout(y).shape();
  std::vector<int> axes;
  for (const auto& d : ys.dims()) {
    const int i = xs.index_of(d.name);
    axes.push_back(i >= 0 && !whole.count(d.name) ? l.axes(xin)[static_cast<size_t>(i)] : -1);
  }
  const int mid = l.new_temp(ys, axes, DType::float32);
  const Shape lx = l.local(xin), ly = l.local(mid);
  l.add_step(
      l.label(), {xin}, {mid},
      [=](Buffers& b, const ExecSpace& space) {
        b[static_cast<size_t>(mid)] =
            Program::Buffer(kernel(space, lx, ly, view_of<float>(b, xin)));
      },
      static_cast<double>(ly.num_elements()));
  l.add_alias(l.relayout(mid, l.axes(y)), y);
}

std::set<std::string> spatial_dims(const PatchAttrs& a, bool with_taps) {
  std::set<std::string> s;
  for (const auto& d : a.dims) {
    s.insert(d.dim);
    if (with_taps)
      s.insert(d.tap);
  }
  return s;
}

void lower_extract(Lowering& l, const PatchAttrs& a) {
  lower_patch_op(l, spatial_dims(a, false),
                 [a](const ExecSpace& space, const Shape& lx, const Shape&, const FView& x) {
                   return kernels::extract_patches(space, lx, x, geometry(lx, a.dims),
                                                   static_cast<float>(a.pad_value));
                 });
}

void lower_fold(Lowering& l, const PatchAttrs& a) {
  lower_patch_op(l, spatial_dims(a, true),
                 [a](const ExecSpace& space, const Shape&, const Shape& ly, const FView& p) {
                   return kernels::fold_patches(space, ly, p, geometry(ly, a.dims));
                 });
}

void extract_grad(GradientContext& c, const PatchAttrs& a) {
  c.add(0, fold_patches(c.dy(), c.input(0).shape(), a.dims));
}

void fold_grad(GradientContext& c, const PatchAttrs& a) {
  c.add(0, extract_patches(c.dy(), a.dims, 0.0));
}

std::vector<std::string> extract_unsplittable(const PatchAttrs& a) {
  auto s = spatial_dims(a, false);
  return {s.begin(), s.end()};
}

std::vector<std::string> fold_unsplittable(const PatchAttrs& a) {
  auto s = spatial_dims(a, true);
  return {s.begin(), s.end()};
}

constexpr auto extract_patches_op = make_op_kind<PatchAttrs>(
    "extract_patches", {FlopClass::elementwise}, lower_extract, extract_grad, extract_unsplittable);
constexpr auto fold_patches_op = make_op_kind<PatchAttrs>("fold_patches", {FlopClass::elementwise},
                                                          lower_fold, fold_grad, fold_unsplittable);

// The patches' shape of a tensor of shape `s`, checking the dims (`what` names the tensor).
Shape patches_shape(const Shape& s, const std::vector<PatchDim>& dims, const std::string& what,
                    const char* where) {
  if (dims.empty() || dims.size() > 3)
    fail(where, cat(dims.size(), " spatial dims for ", what, "; 1 to 3 are supported"));
  std::vector<Dimension> out = s.dims();
  std::set<std::string> seen;
  for (const auto& d : dims) {
    const int i = s.index_of(d.dim);
    if (i < 0)
      fail(where, cat(what, " has no dimension '", d.dim, "'"));
    if (!seen.insert(d.dim).second || d.tap.empty() || s.contains(d.tap) || d.tap == d.dim)
      fail(where, cat("spatial dim '", d.dim, "' repeated, or its tap dim '", d.tap,
                      "' empty or already a dim of ", what));
    if (d.size < 1 || d.stride < 1 || d.dilation < 1 || d.pad_before < 0 || d.pad_after < 0)
      fail(where, cat("dim '", d.dim, "' of ", what, ": filter size ", d.size, ", stride ",
                      d.stride, ", dilation ", d.dilation, " and padding (", d.pad_before, ", ",
                      d.pad_after, ") must be positive (padding non-negative)"));
    const std::int64_t m = patch_positions(d, s[i].size);
    if (m < 1)
      fail(where, cat("the filter of size ", d.size, " (dilation ", d.dilation, ") along '", d.dim,
                      "' is larger than the padded input: ", what, " has ", s[i].size,
                      " positions there, padded by (", d.pad_before, ", ", d.pad_after, ")"));
    out[static_cast<size_t>(i)].size = m;
  }
  // Channels last (a last dim not spatial): the taps before it, so that each position's patch is
  // [taps][channels], its taps' channel vectors copied whole (kernels/patches.hpp).
  const bool channels_last = !seen.count(s.dims().back().name);
  const auto at = out.end() - (channels_last ? 1 : 0);
  std::vector<Dimension> taps;
  for (const auto& d : dims)
    taps.push_back({d.tap, d.size});
  out.insert(at, taps.begin(), taps.end());
  return Shape(out);
}

}  // namespace

Shape patches_shape(const Shape& s, const std::vector<PatchDim>& dims) {
  return patches_shape(s, dims, "shape " + s.to_string(), "mtk::patches_shape");
}

std::int64_t patch_positions(const PatchDim& d, std::int64_t n) {
  const std::int64_t span = n + d.pad_before + d.pad_after - d.dilation * (d.size - 1) - 1;
  return span < 0 ? 0 : span / d.stride + 1;
}

Tensor extract_patches(const Tensor& x, const std::vector<PatchDim>& dims, double pad_value) {
  const char* where = "mtk::extract_patches";
  graph_of({x}, where);
  require_float(x, where);
  const Shape out = patches_shape(x.shape(), dims, describe(x), where);
  return x.graph().add_op1(extract_patches_op, {x}, out, x.dtype(),
                           PatchAttrs{dims, pad_value, x.shape()});
}

Tensor fold_patches(const Tensor& patches, const Shape& shape, const std::vector<PatchDim>& dims) {
  const char* where = "mtk::fold_patches";
  graph_of({patches}, where);
  require_float(patches, where);
  const Shape want = patches_shape(shape, dims, "shape " + shape.to_string(), where);
  if (want != patches.shape())
    fail(where, cat(describe(patches), " are not the patches of shape ", shape.to_string(),
                    " (those are ", want.to_string(), ")"));
  return patches.graph().add_op1(fold_patches_op, {patches}, shape, patches.dtype(),
                                 PatchAttrs{dims, 0.0, shape});
}

}  // namespace mtk
