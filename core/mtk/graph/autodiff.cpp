#include <mtk/graph/autodiff.hpp>
#include <mtk/base/error.hpp>
#include <mtk/ops/ops.hpp>

#include <map>

namespace mtk {
namespace {

// dy reduced (summed) and reordered to `shape`.
Tensor sum_to(const Tensor& dy, const Shape& shape) {
  if (dy.shape() == shape)
    return dy;
  return einsum({dy}, shape);
}

// An einsum that may need dims none of its inputs have: contract, then broadcast.
Tensor einsum_to(const std::vector<Tensor>& xs, const Shape& shape) {
  std::vector<Dimension> have;
  for (const auto& d : shape.dims()) {
    bool found = false;
    for (const auto& x : xs)
      found = found || x.shape().contains(d.name);
    if (found)
      have.push_back(d);
  }
  Tensor t = einsum(xs, Shape(have));
  return static_cast<int>(have.size()) == shape.rank() ? t : broadcast(t, shape);
}

Tensor zeros_like(const Tensor& x) {
  return constant(x.graph(), x.shape(), 0.0);
}

Tensor unary_grad(const Operation& op, const Tensor& x, const Tensor& y, const Tensor& dy) {
  const double p = op.attrs.scalar;
  switch (op.attrs.unary) {
    case UnaryFn::identity:
      return dy;
    case UnaryFn::add_scalar:
      return dy;
    case UnaryFn::negative:
      return negative(dy);
    case UnaryFn::mul_scalar:
      return multiply(dy, p);
    case UnaryFn::abs:
      return dy * unary(UnaryFn::sign, x);
    case UnaryFn::exp:
      return dy * y;
    case UnaryFn::log:
      return dy / x;
    case UnaryFn::sqrt:
      return multiply(dy / y, 0.5);
    case UnaryFn::rsqrt:
      return multiply(dy * pow(y, 3.0), -0.5);
    case UnaryFn::square:
      return multiply(dy * x, 2.0);
    case UnaryFn::reciprocal:
      return negative(dy * square(y));
    case UnaryFn::relu:
      return dy * unary(UnaryFn::relu_mask, x);
    case UnaryFn::gelu:
      return dy * unary(UnaryFn::gelu_grad, x);
    case UnaryFn::tanh:
      return dy * add(negative(square(y)), 1.0);
    case UnaryFn::sigmoid:
      return dy * y * add(negative(y), 1.0);
    case UnaryFn::pow_scalar:
      return multiply(dy * pow(x, p - 1.0), p);
    case UnaryFn::sign:
    case UnaryFn::relu_mask:
    case UnaryFn::gelu_grad:
      return Tensor();
  }
  return Tensor();
}

}  // namespace

std::vector<Tensor> gradients(const Tensor& loss, const std::vector<Tensor>& xs) {
  if (!loss.valid())
    fail("mtk::gradients", "the loss tensor handle is empty");
  if (loss.dtype() != DType::float32)
    fail("mtk::gradients", cat("loss '", loss.name(), "' must be float32"));
  Graph& g = loss.graph();
  const int last_op = loss.producer();
  std::map<int, Tensor> grad;  // tensor id -> accumulated gradient
  auto accumulate = [&](int id, const Tensor& d) {
    if (!d.valid())
      return;
    const auto& info = g.tensor_info(id);
    if (info.dtype != DType::float32)
      return;
    Tensor shaped = d.shape() == info.shape ? d : sum_to(d, info.shape);
    auto it = grad.find(id);
    if (it == grad.end())
      grad.emplace(id, shaped);
    else
      it->second = it->second + shaped;
  };
  grad.emplace(loss.id(), constant(g, loss.shape(), 1.0));

  for (int oi = last_op; oi >= 0; --oi) {
    const Operation op = g.op(oi);  // copy: the loop appends ops
    Tensor dy;
    if (op.outputs.size() == 1) {
      auto it = grad.find(op.outputs[0]);
      if (it == grad.end())
        continue;
      dy = it->second;
    } else if (op.kind == OpKind::top_1 || op.kind == OpKind::softmax_cross_entropy) {
      auto it = grad.find(op.outputs[0]);
      if (it == grad.end())
        continue;
      dy = it->second;
    } else {
      continue;
    }
    auto in = [&](size_t i) { return g.tensor(op.inputs[i]); };
    Tensor y = g.tensor(op.outputs[0]);
    switch (op.kind) {
      case OpKind::unary:
        accumulate(op.inputs[0], unary_grad(op, in(0), y, dy));
        break;
      case OpKind::binary: {
        Tensor a = in(0), b = in(1);
        switch (op.attrs.binary) {
          case BinaryFn::add:
            accumulate(a.id(), sum_to(dy, a.shape()));
            accumulate(b.id(), sum_to(dy, b.shape()));
            break;
          case BinaryFn::subtract:
            accumulate(a.id(), sum_to(dy, a.shape()));
            accumulate(b.id(), negative(sum_to(dy, b.shape())));
            break;
          case BinaryFn::multiply:
            accumulate(a.id(), einsum_to({dy, b}, a.shape()));
            accumulate(b.id(), einsum_to({dy, a}, b.shape()));
            break;
          case BinaryFn::divide:
            accumulate(a.id(), sum_to(dy / b, a.shape()));
            accumulate(b.id(), sum_to(negative(dy * y / b), b.shape()));
            break;
          case BinaryFn::maximum:
            accumulate(a.id(), sum_to(dy * compare(CompareFn::greater_equal, a, b), a.shape()));
            accumulate(b.id(), sum_to(dy * compare(CompareFn::less, a, b), b.shape()));
            break;
          case BinaryFn::minimum:
            accumulate(a.id(), sum_to(dy * compare(CompareFn::less_equal, a, b), a.shape()));
            accumulate(b.id(), sum_to(dy * compare(CompareFn::greater, a, b), b.shape()));
            break;
          case BinaryFn::pow:
            accumulate(a.id(), sum_to(dy * b * binary(BinaryFn::pow, a, add(b, -1.0)), a.shape()));
            accumulate(b.id(), sum_to(dy * y * log(a), b.shape()));
            break;
        }
        break;
      }
      case OpKind::where: {
        Tensor c = in(0), zero = constant(g, Shape(), 0.0);
        accumulate(op.inputs[1], sum_to(where(c, dy, zero), in(1).shape()));
        accumulate(op.inputs[2], sum_to(where(c, zero, dy), in(2).shape()));
        break;
      }
      case OpKind::cast:
        break;  // float <-> int: no gradient
      case OpKind::einsum: {
        if (op.inputs.size() == 1) {
          accumulate(op.inputs[0], einsum_to({dy}, in(0).shape()));
        } else {
          accumulate(op.inputs[0], einsum_to({dy, in(1)}, in(0).shape()));
          accumulate(op.inputs[1], einsum_to({dy, in(0)}, in(1).shape()));
        }
        break;
      }
      case OpKind::reduce: {
        Tensor x = in(0);
        if (op.attrs.reduce == ReduceFn::sum) {
          accumulate(x.id(), broadcast(dy, x.shape()));
        } else {
          accumulate(x.id(), broadcast(dy, x.shape()) * equal(x, y));
        }
        break;
      }
      case OpKind::softmax: {
        // dx = y * (dy - sum(dy * y))
        Tensor s = reduce_sum(dy * y, {op.attrs.dim});
        accumulate(op.inputs[0], y * (dy - s));
        break;
      }
      case OpKind::log_softmax: {
        // dx = dy - softmax(x) * sum(dy)
        Tensor s = reduce_sum(dy, {op.attrs.dim});
        accumulate(op.inputs[0], dy - exp(y) * s);
        break;
      }
      case OpKind::cumsum: {
        Tensor total = reduce_sum(dy, {op.attrs.dim});
        accumulate(op.inputs[0], total - cumsum(dy, op.attrs.dim, !op.attrs.flag));
        break;
      }
      case OpKind::top_1: {
        Tensor x = in(0);
        Tensor idx = g.tensor(op.outputs[1]);
        Tensor hot = one_hot(idx, x.shape().dim(op.attrs.dim));
        accumulate(x.id(), einsum_to({dy, hot}, x.shape()));
        break;
      }
      case OpKind::softmax_cross_entropy: {
        Tensor logits = in(0), targets = in(1), lse = g.tensor(op.outputs[1]);
        accumulate(logits.id(),
                   g.add_op1(OpKind::softmax_cross_entropy_grad, "softmax_cross_entropy_grad",
                             {logits, targets, lse, dy}, logits.shape(), DType::float32, op.attrs));
        break;
      }
      case OpKind::gather: {
        Tensor table = in(0), ids = in(1);
        accumulate(table.id(), scatter_add(ids, dy, table.shape(), op.attrs.dim));
        break;
      }
      case OpKind::scatter_add: {
        Tensor ids = in(0), upd = in(1);
        accumulate(upd.id(), sum_to(gather(dy, ids, op.attrs.dim), upd.shape()));
        break;
      }
      case OpKind::reshape:
        accumulate(op.inputs[0], reshape(dy, in(0).shape()));
        break;
      case OpKind::broadcast:
        accumulate(op.inputs[0], sum_to(dy, in(0).shape()));
        break;
      case OpKind::slice: {
        const Shape& xs_ = in(0).shape();
        const std::int64_t full = xs_.size_of(op.attrs.dim);
        const std::string out_dim = y.shape()[xs_.index_of(op.attrs.dim)].name;
        accumulate(op.inputs[0], pad(dy, out_dim, op.attrs.begin,
                                     full - op.attrs.begin - op.attrs.size, op.attrs.dim));
        break;
      }
      case OpKind::concat: {
        const int i = in(0).shape().index_of(op.attrs.dim);
        const std::string out_dim = y.shape()[i].name;
        std::int64_t offset = 0;
        for (size_t k = 0; k < op.inputs.size(); ++k) {
          const std::int64_t n = in(k).shape()[i].size;
          accumulate(op.inputs[k], slice(dy, out_dim, offset, n, op.attrs.dim));
          offset += n;
        }
        break;
      }
      case OpKind::pad: {
        const int i = in(0).shape().index_of(op.attrs.dim);
        accumulate(op.inputs[0], slice(dy, y.shape()[i].name, op.attrs.begin, in(0).shape()[i].size,
                                       op.attrs.dim));
        break;
      }
      case OpKind::shift:
        accumulate(op.inputs[0], shift(dy, op.attrs.dim, -op.attrs.begin, op.attrs.flag));
        break;
      default:
        break;  // sources, compare, one_hot, range, random, stop_gradient, assign
    }
  }

  std::vector<Tensor> out;
  for (const auto& x : xs) {
    if (!x.valid() || &x.graph() != &g)
      fail("mtk::gradients", "a tensor of another graph");
    auto it = grad.find(x.id());
    out.push_back(it != grad.end() ? it->second : zeros_like(x));
  }
  return out;
}

}  // namespace mtk
