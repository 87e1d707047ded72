#pragma once
// The symbolic graph: named-dimension tensors produced by operations. Users build it with the
// functions in mtk_ops.hpp; gradients() (mtk_autodiff.hpp) appends backward ops; Lowering
// (mtk_lowering.hpp) turns it into a per-rank Program. Nothing here touches data or MPI.

#include <mtk/base/dtype.hpp>
#include <mtk/base/functions.hpp>
#include <mtk/base/shape.hpp>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace mtk {

class Graph;

/// A symbolic tensor: a handle to one output of one operation in a Graph.
class Tensor {
 public:
  Tensor() = default;
  Tensor(Graph* graph, int id) : graph_(graph), id_(id) {}
  bool valid() const { return graph_ != nullptr && id_ >= 0; }
  Graph& graph() const;
  int id() const { return id_; }
  const Shape& shape() const;
  DType dtype() const;
  const std::string& name() const;
  /// Index of the producing operation.
  int producer() const;
  friend bool operator==(const Tensor& a, const Tensor& b) {
    return a.graph_ == b.graph_ && a.id_ == b.id_;
  }
  friend bool operator!=(const Tensor& a, const Tensor& b) { return !(a == b); }

 private:
  Graph* graph_ = nullptr;
  int id_ = -1;
};

/// How a variable's initial value is drawn. Values depend only on the variable name, the seed and
/// the global element index: every mesh and layout starts from the same weights.
struct Initializer {
  enum class Kind { zeros, ones, constant, normal, truncated_normal, uniform };
  Kind kind = Kind::zeros;
  float a = 0.0f;  ///< constant value, mean, or low
  float b = 1.0f;  ///< stddev or high
  std::uint64_t seed = 0;

  static Initializer zeros() { return {Kind::zeros, 0, 0, 0}; }
  static Initializer ones() { return {Kind::ones, 1, 0, 0}; }
  static Initializer constant(float v) { return {Kind::constant, v, 0, 0}; }
  static Initializer normal(float stddev, float mean = 0, std::uint64_t seed = 0) {
    return {Kind::normal, mean, stddev, seed};
  }
  static Initializer truncated_normal(float stddev, float mean = 0, std::uint64_t seed = 0) {
    return {Kind::truncated_normal, mean, stddev, seed};
  }
  static Initializer uniform(float low, float high, std::uint64_t seed = 0) {
    return {Kind::uniform, low, high, seed};
  }
};

enum class OpKind {
  // sources
  variable,
  placeholder,
  constant,
  range,
  random_uniform,
  random_normal,
  // elementwise
  unary,
  binary,
  compare,
  where,
  cast,
  // contractions and reductions
  einsum,
  reduce,
  softmax,
  log_softmax,
  cumsum,
  top_1,
  // indexing
  one_hot,
  gather,
  scatter_add,
  // fused losses
  softmax_cross_entropy,
  softmax_cross_entropy_grad,
  // fused optimizer updates
  adam_update,
  // shape and layout
  reshape,
  broadcast,
  slice,
  concat,
  pad,
  shift,
  // autodiff and state
  stop_gradient,
  assign,
};

const char* op_kind_name(OpKind k);

enum class AssignMode { set, add, subtract };

/// Attributes of an operation; each kind reads the fields it needs.
struct OpAttrs {
  UnaryFn unary = UnaryFn::identity;
  BinaryFn binary = BinaryFn::add;
  CompareFn compare = CompareFn::equal;
  ReduceFn reduce = ReduceFn::sum;
  AssignMode assign = AssignMode::set;
  double scalar = 0.0;   ///< unary parameter; constant value; one_hot on; random low/mean
  double scalar2 = 0.0;  ///< one_hot off; random high/stddev
  double scalar3 = 0.0;  ///< adam epsilon
  std::string dim;       ///< the dim an op works along
  std::int64_t begin = 0, size = 0, after = 0;
  bool flag = false;  ///< cumsum exclusive; shift wrap; random truncated
  std::uint64_t seed = 0;
  Initializer init;
  bool trainable = true;  ///< variables: false for optimizer slots and counters
};

struct Operation {
  OpKind kind;
  std::string name;
  std::vector<int> inputs;   ///< tensor ids
  std::vector<int> outputs;  ///< tensor ids
  OpAttrs attrs;
};

struct TensorInfo {
  Shape shape;
  DType dtype = DType::float32;
  int producer = -1;
  std::string name;
};

/// Operations in creation order (which is a topological order).
class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  /// Appends an operation. `name` is made unique ("einsum", "einsum_1", ...).
  std::vector<Tensor> add_op(OpKind kind, const std::string& name,
                             const std::vector<Tensor>& inputs,
                             const std::vector<std::pair<Shape, DType>>& outputs,
                             const OpAttrs& attrs = {});
  Tensor add_op1(OpKind kind, const std::string& name, const std::vector<Tensor>& inputs,
                 const Shape& shape, DType dtype, const OpAttrs& attrs = {}) {
    return add_op(kind, name, inputs, {{shape, dtype}}, attrs).front();
  }

  int num_ops() const { return static_cast<int>(ops_.size()); }
  int num_tensors() const { return static_cast<int>(tensors_.size()); }
  const Operation& op(int i) const { return ops_.at(static_cast<size_t>(i)); }
  const TensorInfo& tensor_info(int id) const { return tensors_.at(static_cast<size_t>(id)); }
  Tensor tensor(int id) { return Tensor(this, id); }

  /// Indices of the variable operations, in creation order.
  std::vector<int> variable_ops() const;
  /// The output of variable `name`; throws when there is none.
  Tensor variable(const std::string& name);
  /// Outputs of the trainable float32 variables, in creation order.
  std::vector<Tensor> trainable_variables();

 private:
  std::string unique_name(const std::string& base);
  // Deques: references to ops and tensors stay valid while the graph grows.
  std::deque<Operation> ops_;
  std::deque<TensorInfo> tensors_;
  std::vector<std::string> names_;
};

}  // namespace mtk
