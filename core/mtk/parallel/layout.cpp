#include <mtk/base/error.hpp>
#include <mtk/base/name_pairs.hpp>
#include <mtk/parallel/layout.hpp>

namespace mtk {

LayoutRules::LayoutRules(std::vector<std::pair<std::string, std::string>> rules)
    : rules_(std::move(rules)) {
  for (size_t i = 0; i < rules_.size(); ++i) {
    const auto& [tensor_dim, mesh_dim] = rules_[i];
    if (!is_valid_name(tensor_dim) || !is_valid_name(mesh_dim))
      fail("mtk::LayoutRules", cat("invalid rule '", tensor_dim, ":", mesh_dim, "'"));
    for (size_t j = 0; j < i; ++j)
      if (rules_[j].first == tensor_dim)
        fail("mtk::LayoutRules",
             cat("tensor dimension '", tensor_dim, "' is mapped to two mesh dimensions ('",
                 rules_[j].second, "' and '", mesh_dim,
                 "'); a tensor dimension is split over at "
                 "most one mesh dimension"));
  }
}

LayoutRules LayoutRules::parse(const std::string& text) {
  try {
    return LayoutRules(parse_name_pairs(text, "mtk::LayoutRules::parse"));
  } catch (const Error& e) {
    std::string what = e.what();
    if (what.rfind("mtk::LayoutRules::parse", 0) == 0)
      throw;
    fail("mtk::LayoutRules::parse", cat("in \"", text, "\": ", what));
  }
}

std::string LayoutRules::mesh_dim_for(const std::string& tensor_dim) const {
  for (const auto& r : rules_)
    if (r.first == tensor_dim)
      return r.second;
  return "";
}

int LayoutRules::mesh_axis_for(const std::string& tensor_dim, const MeshShape& mesh) const {
  std::string m = mesh_dim_for(tensor_dim);
  return m.empty() ? -1 : mesh.index_of(m);
}

LayoutRules LayoutRules::with(const std::string& tensor_dim, const std::string& mesh_dim) const {
  std::vector<std::pair<std::string, std::string>> r;
  for (const auto& p : rules_)
    if (p.first != tensor_dim)
      r.push_back(p);
  if (!mesh_dim.empty())
    r.emplace_back(tensor_dim, mesh_dim);
  return LayoutRules(std::move(r));
}

LayoutRules LayoutRules::with_tensor(const std::string& tensor_name, const std::string& tensor_dim,
                                     const std::string& mesh_dim) const {
  if (!is_valid_name(tensor_dim) || !is_valid_name(mesh_dim))
    fail("mtk::LayoutRules::with_tensor",
         cat("invalid rule '", tensor_dim, ":", mesh_dim, "' for tensor '", tensor_name, "'"));
  LayoutRules r = *this;
  r.tensor_rules_[{tensor_name, tensor_dim}] = mesh_dim;
  return r;
}

int LayoutRules::mesh_axis_for(const std::string& tensor_name, const std::string& tensor_dim,
                               const MeshShape& mesh) const {
  if (!tensor_rules_.empty()) {
    auto it = tensor_rules_.find({tensor_name, tensor_dim});
    if (it != tensor_rules_.end())
      return mesh.index_of(it->second);
  }
  return mesh_axis_for(tensor_dim, mesh);
}

std::string LayoutRules::to_string() const {
  std::string s;
  for (const auto& [t, m] : rules_)
    s += (s.empty() ? "" : ";") + t + ":" + m;
  return s;
}

TensorLayout::TensorLayout(const Shape& shape, const LayoutRules& rules, const MeshShape& mesh,
                           const std::string& tensor_name)
    : shape_(shape), mesh_(mesh) {
  for (const auto& d : shape.dims())
    axis_of_dim_.push_back(rules.mesh_axis_for(tensor_name, d.name, mesh));
  validate(tensor_name);
}

TensorLayout::TensorLayout(const Shape& shape, std::vector<int> axis_of_dim, const MeshShape& mesh,
                           const std::string& tensor_name)
    : shape_(shape), mesh_(mesh), axis_of_dim_(std::move(axis_of_dim)) {
  if (static_cast<int>(axis_of_dim_.size()) != shape.rank())
    fail("mtk::TensorLayout", cat("tensor '", tensor_name, "' ", shape.to_string(), " has rank ",
                                  shape.rank(), " but ", axis_of_dim_.size(), " axes were given"));
  validate(tensor_name);
}

void TensorLayout::validate(const std::string& tensor_name) {
  std::string label =
      tensor_name.empty() ? shape_.to_string() : "'" + tensor_name + "' " + shape_.to_string();
  std::vector<Dimension> local = shape_.dims();
  for (int i = 0; i < shape_.rank(); ++i) {
    int a = axis_of_dim_[static_cast<size_t>(i)];
    if (a < 0)
      continue;
    if (a >= mesh_.ndims())
      fail("mtk::TensorLayout",
           cat("tensor ", label, ": mesh axis ", a, " outside mesh ", mesh_.to_string()));
    const Dimension& md = mesh_[a];
    for (int j = 0; j < i; ++j)
      if (axis_of_dim_[static_cast<size_t>(j)] == a)
        fail("mtk::TensorLayout",
             cat("tensor ", label, ": dimensions '", shape_[j].name, "' and '", shape_[i].name,
                 "' are both mapped to mesh dimension '", md.name,
                 "'; two dimensions of one tensor cannot share a mesh dimension"));
    if (shape_[i].size % md.size != 0)
      fail("mtk::TensorLayout",
           cat("tensor ", label, ": dimension '", shape_[i].name, "' of size ", shape_[i].size,
               " is not divisible by mesh dimension '", md.name, "' of size ", md.size));
    local[static_cast<size_t>(i)].size = shape_[i].size / md.size;
  }
  slice_shape_ = Shape(local);
}

int TensorLayout::tensor_dim_on(int mesh_axis) const {
  for (size_t i = 0; i < axis_of_dim_.size(); ++i)
    if (axis_of_dim_[i] == mesh_axis)
      return static_cast<int>(i);
  return -1;
}

std::vector<int> TensorLayout::split_axes() const {
  std::vector<int> out;
  for (int a = 0; a < mesh_.ndims(); ++a)
    if (tensor_dim_on(a) >= 0)
      out.push_back(a);
  return out;
}

std::vector<int> TensorLayout::replicated_axes() const {
  std::vector<int> out;
  for (int a = 0; a < mesh_.ndims(); ++a)
    if (tensor_dim_on(a) < 0)
      out.push_back(a);
  return out;
}

std::vector<std::int64_t> TensorLayout::slice_origin(const std::vector<int>& coordinates) const {
  if (static_cast<int>(coordinates.size()) != mesh_.ndims())
    fail("mtk::TensorLayout::slice_origin",
         cat(coordinates.size(), " coordinates for mesh ", mesh_.to_string()));
  std::vector<std::int64_t> origin(static_cast<size_t>(shape_.rank()), 0);
  for (int i = 0; i < shape_.rank(); ++i) {
    int a = axis_of_dim_[static_cast<size_t>(i)];
    if (a >= 0)
      origin[static_cast<size_t>(i)] = coordinates[static_cast<size_t>(a)] * slice_shape_[i].size;
  }
  return origin;
}

std::string TensorLayout::to_string() const {
  std::string s = "[";
  for (int i = 0; i < shape_.rank(); ++i) {
    if (i)
      s += ", ";
    s += shape_[i].name + "=" + std::to_string(shape_[i].size);
    int a = axis_of_dim_[static_cast<size_t>(i)];
    if (a >= 0)
      s += "@" + mesh_[a].name;
  }
  return s + "]";
}

}  // namespace mtk
