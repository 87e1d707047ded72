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

const char* op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::variable:
      return "variable";
    case OpKind::placeholder:
      return "placeholder";
    case OpKind::constant:
      return "constant";
    case OpKind::range:
      return "range";
    case OpKind::random_uniform:
      return "random_uniform";
    case OpKind::random_normal:
      return "random_normal";
    case OpKind::unary:
      return "unary";
    case OpKind::binary:
      return "binary";
    case OpKind::compare:
      return "compare";
    case OpKind::where:
      return "where";
    case OpKind::cast:
      return "cast";
    case OpKind::einsum:
      return "einsum";
    case OpKind::reduce:
      return "reduce";
    case OpKind::softmax:
      return "softmax";
    case OpKind::log_softmax:
      return "log_softmax";
    case OpKind::cumsum:
      return "cumsum";
    case OpKind::top_1:
      return "top_1";
    case OpKind::one_hot:
      return "one_hot";
    case OpKind::gather:
      return "gather";
    case OpKind::scatter_add:
      return "scatter_add";
    case OpKind::softmax_cross_entropy:
      return "softmax_cross_entropy";
    case OpKind::softmax_cross_entropy_grad:
      return "softmax_cross_entropy_grad";
    case OpKind::adam_update:
      return "adam_update";
    case OpKind::reshape:
      return "reshape";
    case OpKind::broadcast:
      return "broadcast";
    case OpKind::slice:
      return "slice";
    case OpKind::concat:
      return "concat";
    case OpKind::pad:
      return "pad";
    case OpKind::shift:
      return "shift";
    case OpKind::stop_gradient:
      return "stop_gradient";
    case OpKind::assign:
      return "assign";
  }
  return "?";
}

std::string Graph::unique_name(const std::string& base) {
  std::string name = base;
  for (int i = 1; std::find(names_.begin(), names_.end(), name) != names_.end(); ++i)
    name = base + "_" + std::to_string(i);
  names_.push_back(name);
  return name;
}

std::vector<Tensor> Graph::add_op(OpKind kind, const std::string& name,
                                  const std::vector<Tensor>& inputs,
                                  const std::vector<std::pair<Shape, DType>>& outputs,
                                  const OpAttrs& attrs) {
  Operation op{kind, kind == OpKind::variable ? name : unique_name(name), {}, {}, attrs};
  if (kind == OpKind::variable) {
    for (int v : variable_ops())
      if (ops_[static_cast<size_t>(v)].name == name)
        fail("mtk::Graph::add_op", cat("a variable named '", name, "' already exists"));
    names_.push_back(name);
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
  ops_.push_back(std::move(op));
  return out;
}

std::vector<int> Graph::variable_ops() const {
  std::vector<int> out;
  for (int i = 0; i < num_ops(); ++i)
    if (ops_[static_cast<size_t>(i)].kind == OpKind::variable)
      out.push_back(i);
  return out;
}

Tensor Graph::variable(const std::string& name) {
  for (int i : variable_ops())
    if (ops_[static_cast<size_t>(i)].name == name)
      return Tensor(this, ops_[static_cast<size_t>(i)].outputs[0]);
  fail("mtk::Graph::variable", cat("no variable named '", name, "'"));
}

std::vector<Tensor> Graph::trainable_variables() {
  std::vector<Tensor> out;
  for (int i : variable_ops())
    if (ops_[static_cast<size_t>(i)].attrs.trainable &&
        tensors_[static_cast<size_t>(ops_[static_cast<size_t>(i)].outputs[0])].dtype ==
            DType::float32)
      out.emplace_back(this, ops_[static_cast<size_t>(i)].outputs[0]);
  return out;
}

}  // namespace mtk
