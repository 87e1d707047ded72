#pragma once
// What an op's gradient function (OpKind::gradient) sees during the reverse sweep of gradients():
// the op, its tensors, the gradient of its output 0, and where to add the gradients of its inputs.

#include <mtk/graph/graph.hpp>

#include <functional>

namespace mtk {

class GradientContext {
 public:
  using Accumulate = std::function<void(int tensor, const Tensor& gradient)>;
  using Needs = std::function<bool(int tensor)>;
  using RunningSum = std::function<Tensor(int tensor)>;
  GradientContext(Graph& graph, const Operation& op, Tensor dy, Accumulate accumulate,
                  Needs needs = nullptr, RunningSum running_sum = nullptr)
      : graph_(graph),
        op_(op),
        dy_(dy),
        accumulate_(std::move(accumulate)),
        needs_(std::move(needs)),
        running_sum_(std::move(running_sum)) {}

  Graph& graph() const { return graph_; }
  const Operation& op() const { return op_; }
  Tensor input(size_t i) const { return graph_.tensor(op_.inputs.at(i)); }
  Tensor output(size_t i) const { return graph_.tensor(op_.outputs.at(i)); }
  /// d loss / d output 0.
  const Tensor& dy() const { return dy_; }
  /// Adds `d` to the gradient of input i (summed to the input's shape; fan-in is summed; an
  /// invalid `d` or a non-float input gets nothing).
  void add(size_t i, const Tensor& d) const { accumulate_(op_.inputs.at(i), d); }
  /// Whether input i needs a gradient (it depends on a tensor gradients() was asked about): a
  /// gradient function skips building the ops of an input that does not.
  bool needs(size_t i) const { return !needs_ || needs_(op_.inputs.at(i)); }
  /// The running sum input i's gradient is being added to, where gradients() was given one
  /// (microbatches), else an invalid tensor: a gradient may add its part into it itself
  /// (einsum_accumulate) and pass the new sum to add().
  Tensor running_sum(size_t i) const {
    return running_sum_ ? running_sum_(op_.inputs.at(i)) : Tensor();
  }

 private:
  Graph& graph_;
  const Operation& op_;
  Tensor dy_;
  Accumulate accumulate_;
  Needs needs_;
  RunningSum running_sum_;
};

namespace op_kind_impl {
template <class A>
void gradient(const OpDef& d, GradientContext& c) {
  of<A>(d).gradient(c, attrs<A>(d, c.op()));
}
}  // namespace op_kind_impl

}  // namespace mtk
