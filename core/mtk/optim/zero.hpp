#pragma once
// The sharded optimizer update (ZeRO stage 1, docs/sharded-optimizer.md). A variable replicated
// over the data-parallel mesh dim is updated by shards: one of its whole dims is renamed to the
// batch dim, which the layout splits over that mesh dim, so the gradient's pending partial sum
// becomes a reduce-scatter (Lowering::relayout), the update reads and writes 1/n of the
// variable and its slots, and the new variable is allgathered back. Slots keep their names and
// shapes (checkpoints unchanged) and are stored split by per-tensor layout rules
// (LayoutRules::with_tensor): 1/n of their memory per rank.

#include <mtk/graph/graph.hpp>
#include <mtk/parallel/layout.hpp>
#include <mtk/parallel/mesh_shape.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mtk::optim {

struct ShardOptions {
  LayoutRules rules;                ///< the layout the program is lowered with
  MeshShape mesh;                   ///< the mesh it runs on
  std::string batch_dim = "batch";  ///< the tensor dim the layout splits over the data-parallel dim
  std::int64_t min_bytes = 64 << 10;  ///< smaller variables (float32 bytes) keep the full update
};

/// Which variables are updated by shards, and the graph pieces that do it.
class ZeroSharding {
 public:
  ZeroSharding() = default;
  explicit ZeroSharding(ShardOptions o);
  /// The mesh dim splits the batch over more than one rank.
  bool active() const { return ranks_ > 1; }
  /// The data-parallel ranks the update is sharded over (1: inactive).
  int ranks() const { return ranks_; }
  /// The dim of `var` renamed to the batch dim, or -1 (full update): the first dim whole under the
  /// layout whose size divides by ranks(), for variables of min_bytes or more that no dim of
  /// splits over the data-parallel mesh dim.
  int shard_dim(const Tensor& var) const;
  /// `s` with dim `dim` renamed to the batch dim (s itself when dim < 0).
  Shape sharded_shape(const Shape& s, int dim) const;
  /// x viewed as sharded_shape(x.shape(), dim): a slice, or a reduce-scatter of a pending sum.
  Tensor shard(const Tensor& x, int dim, const std::string& name = "zero_shard") const;
  /// x (a sharded_shape) viewed as `full`: an allgather unless x's tensor rule keeps it split.
  Tensor unshard(const Tensor& x, const Shape& full,
                 const std::string& name = "zero_unshard") const;
  /// The new value of `var` from its shard x (a sharded_shape): an allgather, in place into the
  /// variable's storage where it can be (assign it to `var`, nothing else).
  Tensor gather_into(const Tensor& var, const Tensor& x) const;
  /// The gradients the update reads: those of sharded variables as shard(grad) (already sharded
  /// ones as they are).
  std::vector<Tensor> gradients(const std::vector<Tensor>& vars,
                                const std::vector<Tensor>& grads) const;

  /// An optimizer slot whose shape is given in the sharded names of `var` (shard_dim(var)).
  struct Slot {
    Tensor variable;       ///< "<var>/<suffix>" with the variable's dim names
    Tensor value;          ///< its value in sharded names
    std::string full_dim;  ///< the renamed dim's own name; "" when the slot is not split
  };
  /// The slot variable, stored split over the data-parallel dim when it has the sharded dim.
  Slot slot(const Tensor& var, const std::string& suffix, const Shape& shape, DType storage);
  /// Assigns `value` (the slot's sharded shape) to the slot, without gathering it.
  void assign(const Slot& s, const Tensor& value);
  /// `base` with the per-tensor rules of the split slots (lower() with these).
  LayoutRules layout_rules(const LayoutRules& base) const;

 private:
  ShardOptions o_;
  std::string mesh_dim_;
  int axis_ = -1;
  int ranks_ = 1;
  std::vector<std::pair<std::string, std::string>> split_;  // (tensor name, tensor dim)
};

}  // namespace mtk::optim
