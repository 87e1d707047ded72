#include <mtk/base/functions.hpp>

namespace mtk {

const char* unary_name(UnaryFn f) {
  switch (f) {
    case UnaryFn::identity:
      return "identity";
    case UnaryFn::negative:
      return "negative";
    case UnaryFn::abs:
      return "abs";
    case UnaryFn::exp:
      return "exp";
    case UnaryFn::log:
      return "log";
    case UnaryFn::sqrt:
      return "sqrt";
    case UnaryFn::rsqrt:
      return "rsqrt";
    case UnaryFn::square:
      return "square";
    case UnaryFn::reciprocal:
      return "reciprocal";
    case UnaryFn::relu:
      return "relu";
    case UnaryFn::gelu:
      return "gelu";
    case UnaryFn::gelu_grad:
      return "gelu_grad";
    case UnaryFn::tanh:
      return "tanh";
    case UnaryFn::sigmoid:
      return "sigmoid";
    case UnaryFn::sign:
      return "sign";
    case UnaryFn::pow_scalar:
      return "pow_scalar";
    case UnaryFn::add_scalar:
      return "add_scalar";
    case UnaryFn::mul_scalar:
      return "mul_scalar";
    case UnaryFn::relu_mask:
      return "relu_mask";
  }
  return "?";
}

const char* binary_name(BinaryFn f) {
  switch (f) {
    case BinaryFn::add:
      return "add";
    case BinaryFn::subtract:
      return "subtract";
    case BinaryFn::multiply:
      return "multiply";
    case BinaryFn::divide:
      return "divide";
    case BinaryFn::maximum:
      return "maximum";
    case BinaryFn::minimum:
      return "minimum";
    case BinaryFn::pow:
      return "pow";
  }
  return "?";
}

const char* compare_name(CompareFn f) {
  switch (f) {
    case CompareFn::less:
      return "less";
    case CompareFn::less_equal:
      return "less_equal";
    case CompareFn::greater:
      return "greater";
    case CompareFn::greater_equal:
      return "greater_equal";
    case CompareFn::equal:
      return "equal";
    case CompareFn::not_equal:
      return "not_equal";
    case CompareFn::near_equal:
      return "near_equal";
  }
  return "?";
}

const char* reduce_name(ReduceFn f) {
  switch (f) {
    case ReduceFn::sum:
      return "sum";
    case ReduceFn::max:
      return "max";
    case ReduceFn::min:
      return "min";
    case ReduceFn::sum_squares:
      return "sum_squares";
  }
  return "?";
}

}  // namespace mtk
