#include <mtk/base/error.hpp>
#include <mtk/graph/graph.hpp>

#include <algorithm>

namespace mtk {

Graph& Tensor::graph() const {
  if (!graph_)
    fail("mtk::Tensor", "use of an empty tensor handle");
  return *graph_;
}
const Shape& Tensor::shape() const {
  return graph().tensor_info(id_).shape;
}
DType Tensor::dtype() const {
  return graph().tensor_info(id_).dtype;
}
const std::string& Tensor::name() const {
  return graph().tensor_info(id_).name;
}
int Tensor::producer() const {
  return graph().tensor_info(id_).producer;
}

void fail_op_kind(const Operation& op, const char* expected) {
  fail("mtk::OpKind::attrs", cat("op '", op.name, "' is a ", op.kind(), ", not a ", expected));
}

const char* to_string(FlopClass c) {
  switch (c) {
    case FlopClass::none:
      return "none";
    case FlopClass::einsum:
      return "einsum";
    case FlopClass::elementwise:
      return "elementwise";
    case FlopClass::reduce:
      return "reduce";
    case FlopClass::softmax:
      return "softmax";
    case FlopClass::gather:
      return "gather";
    case FlopClass::optimizer:
      return "optimizer";
    case FlopClass::random:
      return "random";
    case FlopClass::assign:
      return "assign";
  }
  return "?";
}

std::string Graph::unique_name(const std::string& base) {
  if (names_.insert(base).second)
    return base;
  int& i = next_suffix_[base];
  std::string name;
  do
    name = base + "_" + std::to_string(++i);
  while (!names_.insert(name).second);
  return name;
}

std::vector<Tensor> Graph::add_erased_op(const OpDef& def, const std::string& name,
                                         const std::vector<Tensor>& inputs,
                                         const std::vector<std::pair<Shape, DType>>& outputs,
                                         std::shared_ptr<const void> attrs) {
  if (def.is_variable && reuse_variables_ && variable_by_name_.count(name)) {
    const Tensor v = variable(name);
    if (outputs.size() != 1 || v.shape() != outputs[0].first || v.dtype() != outputs[0].second)
      fail("mtk::Graph::add_op",
           cat("variable '", name, "' ", v.shape().to_string(), " ", dtype_name(v.dtype()),
               " is reused as ",
               outputs.empty() ? std::string("nothing") : outputs[0].first.to_string()));
    return {v};
  }
  Operation op{&def,
               def.is_variable ? name : unique_name(name),
               {},
               {},
               std::move(attrs),
               contraction_precision_,
               recompute_tag_};
  if (def.is_variable) {
    if (variable_by_name_.count(name))
      fail("mtk::Graph::add_op", cat("a variable named '", name, "' already exists"));
    names_.insert(name);
  }
  for (const auto& t : inputs) {
    if (!t.valid() || &t.graph() != this)
      fail("mtk::Graph::add_op", cat("op '", op.name, "' takes a tensor of another graph"));
    op.inputs.push_back(t.id());
  }
  std::vector<Tensor> out;
  const int index = num_ops();
  for (size_t i = 0; i < outputs.size(); ++i) {
    op.outputs.push_back(num_tensors());
    tensors_.push_back({outputs[i].first, outputs[i].second, index,
                        outputs.size() == 1 ? op.name : op.name + ":" + std::to_string(i)});
    out.emplace_back(this, op.outputs.back());
  }
  if (def.is_variable) {
    variable_ops_.push_back(index);
    variable_by_name_.emplace(op.name, index);
  }
  ops_.push_back(std::move(op));
  return out;
}

Tensor Graph::variable(const std::string& name) {
  const auto it = variable_by_name_.find(name);
  if (it == variable_by_name_.end())
    fail("mtk::Graph::variable", cat("no variable named '", name, "'"));
  return Tensor(this, ops_[static_cast<size_t>(it->second)].outputs[0]);
}

const VariableAttrs& Graph::variable_attrs(int i) const {
  const Operation& o = op(i);
  // Only the variable kind (ops/sources.cpp) sets is_variable, and its attributes are these.
  if (!o.def->is_variable)
    fail_op_kind(o, "variable");
  return *static_cast<const VariableAttrs*>(o.attributes.get());
}

void Graph::set_variable_storage(const std::string& name, DType storage, Rounding rounding) {
  const char* where = "mtk::Graph::set_variable_storage";
  const auto it = variable_by_name_.find(name);
  if (it == variable_by_name_.end())
    fail(where, cat("no variable named '", name, "'"));
  Operation& o = ops_[static_cast<size_t>(it->second)];
  const DType dtype = tensor_info(o.outputs[0]).dtype;
  if (storage != DType::float32 && (storage != DType::bfloat16 || dtype != DType::float32))
    fail(where, cat("variable '", name, "' of ", dtype_name(dtype), " cannot be stored as ",
                    dtype_name(storage), " (float32 variables: float32 or bfloat16)"));
  if (rounding == Rounding::stochastic && storage != DType::bfloat16)
    fail(where, cat("variable '", name, "': stochastic rounding needs bfloat16 storage, not ",
                    dtype_name(storage)));
  VariableAttrs a = variable_attrs(it->second);
  a.storage = storage;
  a.rounding = rounding;
  o.attributes = std::make_shared<const VariableAttrs>(a);
}

std::vector<std::pair<std::string, const Operation*>> Graph::unsplittable_dims() const {
  std::vector<std::pair<std::string, const Operation*>> out;
  for (const auto& o : ops_)
    if (o.def->unsplittable)
      for (auto& d : o.def->unsplittable(*o.def, o))
        if (std::none_of(out.begin(), out.end(), [&](const auto& e) { return e.first == d; }))
          out.emplace_back(std::move(d), &o);
  return out;
}

std::vector<Tensor> Graph::trainable_variables() {
  std::vector<Tensor> out;
  for (int i : variable_ops())
    if (variable_attrs(i).trainable &&
        tensors_[static_cast<size_t>(ops_[static_cast<size_t>(i)].outputs[0])].dtype ==
            DType::float32)
      out.emplace_back(this, ops_[static_cast<size_t>(i)].outputs[0]);
  return out;
}

}  // namespace mtk
