#pragma once
// Layouts: which mesh dimension splits each tensor dimension.

#include <mtk/base/shape.hpp>
#include <mtk/parallel/mesh_shape.hpp>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace mtk {

/// Rules "tensor dim name -> mesh dim name", e.g. batch:batch;d_ff:model. A tensor dim without a
/// rule is whole on every processor. As in Mesh-TensorFlow, a rule whose mesh dim is not in the
/// mesh is inactive, so one layout serves meshes with and without a `model` dim.
class LayoutRules {
 public:
  LayoutRules() = default;
  /// Throws when a tensor dim has two rules or a name is invalid.
  explicit LayoutRules(std::vector<std::pair<std::string, std::string>> rules);
  /// Parses "batch:batch;d_ff:model".
  static LayoutRules parse(const std::string& text);

  const std::vector<std::pair<std::string, std::string>>& rules() const { return rules_; }
  /// Mesh dim name for `tensor_dim`, or "" when it has no rule.
  std::string mesh_dim_for(const std::string& tensor_dim) const;
  /// Mesh axis splitting `tensor_dim` on `mesh`, or -1 (no rule, or rule inactive on this mesh).
  int mesh_axis_for(const std::string& tensor_dim, const MeshShape& mesh) const;
  /// A copy with `tensor_dim -> mesh_dim` set (replacing any rule for it); "" removes the rule.
  LayoutRules with(const std::string& tensor_dim, const std::string& mesh_dim) const;
  /// A copy where tensor `tensor_name`'s dim `tensor_dim` goes to `mesh_dim` (before the rules by
  /// dim name): the sharded optimizer's slots (mtk/optim/zero.hpp). Not part of to_string().
  LayoutRules with_tensor(const std::string& tensor_name, const std::string& tensor_dim,
                          const std::string& mesh_dim) const;
  /// Mesh axis for dim `tensor_dim` of tensor `tensor_name`: its own rule, else mesh_axis_for().
  int mesh_axis_for(const std::string& tensor_name, const std::string& tensor_dim,
                    const MeshShape& mesh) const;
  /// The per-tensor rules: (tensor name, tensor dim) -> mesh dim.
  const std::map<std::pair<std::string, std::string>, std::string>& tensor_rules() const {
    return tensor_rules_;
  }

  /// "batch:batch;d_ff:model" (parse() reads it back).
  std::string to_string() const;

 private:
  std::vector<std::pair<std::string, std::string>> rules_;
  std::map<std::pair<std::string, std::string>, std::string> tensor_rules_;
};

/// The layout of one tensor shape on one mesh: for each tensor dim the mesh axis splitting it (or
/// -1), the local slice shape, slice origins and the replica axes.
class TensorLayout {
 public:
  TensorLayout() = default;
  /// Validates: each split dim divisible by its mesh dim; no two dims of `shape` on one mesh dim.
  /// `tensor_name` only labels errors.
  TensorLayout(const Shape& shape, const LayoutRules& rules, const MeshShape& mesh,
               const std::string& tensor_name = "");
  /// Explicit mapping: axis_of_dim[i] is the mesh axis splitting dim i, or -1.
  TensorLayout(const Shape& shape, std::vector<int> axis_of_dim, const MeshShape& mesh,
               const std::string& tensor_name = "");

  const Shape& shape() const { return shape_; }
  const MeshShape& mesh() const { return mesh_; }
  /// Mesh axis splitting tensor dim `i`, or -1.
  int mesh_axis(int i) const { return axis_of_dim_.at(static_cast<size_t>(i)); }
  const std::vector<int>& mesh_axes() const { return axis_of_dim_; }
  /// Tensor dim split by mesh axis `a`, or -1.
  int tensor_dim_on(int mesh_axis) const;
  /// Mesh axes that split some dim, ascending.
  std::vector<int> split_axes() const;
  /// Mesh axes that split no dim: the tensor is replicated over them. Ascending.
  std::vector<int> replicated_axes() const;
  bool is_split(int i) const { return mesh_axis(i) >= 0; }

  /// The shape of every processor's slice.
  Shape slice_shape() const { return slice_shape_; }
  /// Offset of the slice held at mesh `coordinates` along each tensor dim.
  std::vector<std::int64_t> slice_origin(const std::vector<int>& coordinates) const;

  /// "[batch=8@batch, d_model=512]" (split dims marked with their mesh dim).
  std::string to_string() const;

 private:
  void validate(const std::string& tensor_name);
  Shape shape_;
  MeshShape mesh_;
  std::vector<int> axis_of_dim_;
  Shape slice_shape_;
};

}  // namespace mtk
