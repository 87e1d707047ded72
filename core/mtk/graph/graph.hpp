#pragma once
// The symbolic graph: named-dimension tensors produced by operations. Users build it with the
// functions in mtk/ops/ops.hpp; gradients() (mtk/autodiff/gradients.hpp) appends backward ops;
// lower() (mtk/lower/lowering.hpp) turns it into a per-rank Program. Nothing here touches data or
// MPI.

#include <mtk/base/dtype.hpp>
#include <mtk/base/precision.hpp>
#include <mtk/base/program_options.hpp>
#include <mtk/base/shape.hpp>
#include <mtk/graph/op_def.hpp>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
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

/// How assignments round into bfloat16 storage (train.variable_rounding).
enum class Rounding {
  nearest,    ///< to nearest even: updates below half an ulp are lost
  stochastic  ///< up with probability the fraction of an ulp (kernels::store_bfloat16_stochastic)
};

/// How a variable starts and whether the optimizer trains it (the attributes of a variable op).
struct VariableAttrs {
  Initializer init;
  bool trainable = true;  ///< false for optimizer slots and counters
  /// How the values are stored between runs: float32, or bfloat16 for a float32 variable (read as
  /// a float32 tensor, assignments rounded by `rounding`; Graph::set_variable_storage).
  DType storage = DType::float32;
  Rounding rounding = Rounding::nearest;  ///< stochastic only with bfloat16 storage
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
  /// A graph built, and by default lowered, with `options` (program.*): builders read them
  /// (nn::conv splits its layers under overlap_halo).
  explicit Graph(const ProgramOptions& options) : options_(options) {}
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  /// Appends an operation of `kind` named after the kind ("einsum", "einsum_1", ...).
  template <class A>
  std::vector<Tensor> add_op(const OpKind<A>& kind, const std::vector<Tensor>& inputs,
                             const std::vector<std::pair<Shape, DType>>& outputs, A attrs = {}) {
    return add_named_op(kind, kind.def.name, inputs, outputs, std::move(attrs));
  }
  /// The same named `name` (made unique, except for variables).
  template <class A>
  std::vector<Tensor> add_named_op(const OpKind<A>& kind, const std::string& name,
                                   const std::vector<Tensor>& inputs,
                                   const std::vector<std::pair<Shape, DType>>& outputs,
                                   A attrs = {}) {
    std::shared_ptr<const void> stored;
    if constexpr (!std::is_same_v<A, NoAttrs>)
      stored = std::make_shared<const A>(std::move(attrs));
    return add_erased_op(kind.def, name, inputs, outputs, std::move(stored));
  }
  /// One-output forms of the two above.
  template <class A>
  Tensor add_op1(const OpKind<A>& kind, const std::vector<Tensor>& inputs, const Shape& shape,
                 DType dtype, A attrs = {}) {
    return add_op(kind, inputs, {{shape, dtype}}, std::move(attrs)).front();
  }
  template <class A>
  Tensor add_named_op1(const OpKind<A>& kind, const std::string& name,
                       const std::vector<Tensor>& inputs, const Shape& shape, DType dtype,
                       A attrs = {}) {
    return add_named_op(kind, name, inputs, {{shape, dtype}}, std::move(attrs)).front();
  }

  /// The program options the graph is built with and lower() lowers it with by default.
  const ProgramOptions& options() const { return options_; }
  void set_options(const ProgramOptions& options) { options_ = options; }
  int num_ops() const { return static_cast<int>(ops_.size()); }
  int num_tensors() const { return static_cast<int>(tensors_.size()); }
  const Operation& op(int i) const { return ops_.at(static_cast<size_t>(i)); }
  const TensorInfo& tensor_info(int id) const { return tensors_.at(static_cast<size_t>(id)); }
  Tensor tensor(int id) { return Tensor(this, id); }

  /// The attributes of variable op i.
  const VariableAttrs& variable_attrs(int i) const;
  /// Stores float32 variable `name` as `storage` (float32 or bfloat16) from now on: its tensor
  /// stays float32, lowering keeps the slice in that type (Mesh-TF's master dtype); assignments
  /// round into bfloat16 by `rounding` (stochastic needs bfloat16).
  void set_variable_storage(const std::string& name, DType storage,
                            Rounding rounding = Rounding::nearest);

  /// Indices of the variable operations, in creation order.
  const std::vector<int>& variable_ops() const { return variable_ops_; }
  bool has_variable(const std::string& name) const { return variable_by_name_.count(name) > 0; }
  /// The output of variable `name`; throws when there is none.
  Tensor variable(const std::string& name);
  /// Outputs of the trainable float32 variables, in creation order.
  std::vector<Tensor> trainable_variables();

  /// A layer offers tensor dim `dim` for splitting (data, model or expert parallelism): the
  /// layout search's default candidates, in the order first offered.
  void offer_split(const std::string& dim) {
    if (std::find(offered_splits_.begin(), offered_splits_.end(), dim) == offered_splits_.end())
      offered_splits_.push_back(dim);
  }
  const std::vector<std::string>& offered_splits() const { return offered_splits_; }
  /// The dims some op of the graph needs whole (OpDef::unsplittable), each with such an op.
  std::vector<std::pair<std::string, const Operation*>> unsplittable_dims() const;

  /// The precision new einsum ops contract in (ops/einsum.hpp); float32 unless a model sets it
  /// (TransformerConfig::activation_dtype). Gradient einsums take their forward op's precision.
  Precision contraction_precision() const { return contraction_precision_; }
  void set_contraction_precision(Precision p) { contraction_precision_ = p; }

  /// The recomputation segment new ops join (none by default): a model sets it around a layer
  /// (TransformerConfig::recompute), gradients() around the gradient ops of a segment's ops.
  RecomputeTag recompute_tag() const { return recompute_tag_; }
  void set_recompute_tag(RecomputeTag t) { recompute_tag_ = t; }
  /// A new segment id for set_recompute_tag (0, 1, 2, ... per graph).
  int new_recompute_segment() { return next_recompute_segment_++; }

  /// While on, adding a variable whose name exists returns the existing one (its shape and dtype
  /// must match): a model built again on other inputs shares its weights (microbatches).
  void set_reuse_variables(bool on) { reuse_variables_ = on; }
  bool reuse_variables() const { return reuse_variables_; }

 private:
  std::vector<Tensor> add_erased_op(const OpDef& def, const std::string& name,
                                    const std::vector<Tensor>& inputs,
                                    const std::vector<std::pair<Shape, DType>>& outputs,
                                    std::shared_ptr<const void> attrs);
  std::string unique_name(const std::string& base);
  ProgramOptions options_;
  // Deques: references to ops and tensors stay valid while the graph grows.
  std::deque<Operation> ops_;
  std::deque<TensorInfo> tensors_;
  // Name lookups in O(1): building a graph stays linear in its ops (deep models have 10^5).
  std::unordered_set<std::string> names_;
  std::unordered_map<std::string, int> next_suffix_;  // base name -> first suffix to try
  std::vector<int> variable_ops_;
  std::unordered_map<std::string, int> variable_by_name_;
  std::vector<std::string> offered_splits_;
  Precision contraction_precision_ = Precision::float32;
  RecomputeTag recompute_tag_;
  int next_recompute_segment_ = 0;
  bool reuse_variables_ = false;
};

}  // namespace mtk
