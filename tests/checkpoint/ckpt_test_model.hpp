#pragma once
// A small model for the checkpoint tests and the ckpt_writer test program: a two-layer MLP with
// an RMSProp-like optimizer whose slots (and a step counter) are non-trainable variables, so a
// checkpoint holds variables of several shapes and layouts: split on one or two mesh axes,
// replicated, scalar. Inputs depend on the step only: a resumed run sees the same data.

#include <mtk/autodiff/gradients.hpp>
#include <mtk/graph/graph.hpp>
#include <mtk/lower/lowering.hpp>
#include <mtk/ops/ops.hpp>
#include <mtk/runtime/program.hpp>

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mtk::test {

/// Layouts of the tests: A splits d_ff over `b` and vocab over `a` (w2 split on both axes, b1
/// split and replicated over `a`, scalars replicated); B splits batch and d_model; C puts d_model
/// and vocab on one axis `x`. Rules naming a mesh dim the mesh lacks are inactive.
inline LayoutRules rules_a() {
  return LayoutRules::parse("d_ff:b;vocab:a");
}
inline LayoutRules rules_b() {
  return LayoutRules::parse("batch:a;d_model:b");
}
inline LayoutRules rules_c() {
  return LayoutRules::parse("d_model:x;vocab:x");
}

/// The 2-D mesh checkpoints are saved on: 1x1, 1x2, 2x2, 2x(n/2).
inline MeshShape checkpoint_test_mesh(int ranks) {
  switch (ranks) {
    case 1:
      return MeshShape::parse("a:1;b:1");
    case 2:
      return MeshShape::parse("a:1;b:2");
    default:
      return MeshShape::parse("a:2;b:" + std::to_string(ranks / 2));
  }
}

struct TinyModel {
  std::unique_ptr<Graph> graph = std::make_unique<Graph>();
  Tensor x, target, loss;
  std::unique_ptr<Program> program;

  /// Inputs of training step `step` (global values, the same on every rank).
  std::map<int, HostTensor> feeds(std::int64_t step) const {
    std::vector<float> xv(static_cast<size_t>(x.shape().num_elements()));
    std::vector<float> tv(static_cast<size_t>(target.shape().num_elements()));
    for (size_t i = 0; i < xv.size(); ++i)
      xv[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i) + 0.11 * step));
    for (size_t i = 0; i < tv.size(); ++i)
      tv[i] = static_cast<float>(std::cos(0.23 * static_cast<double>(i) - 0.07 * step));
    return {{x.id(), HostTensor::floats(x.shape(), xv)},
            {target.id(), HostTensor::floats(target.shape(), tv)}};
  }

  /// One training step (the data of Program::step()); returns the loss.
  float train_step() {
    const auto out = program->run(feeds(program->step()), {loss});
    return out.at(0).values<float>().at(0);
  }
};

/// d_ff: size of the hidden dim (another value makes shapes that do not match a checkpoint).
/// `stored`: how the parameters and their slots are stored (the step counter stays float32);
/// `rounding`: how the parameters' updates round into bfloat16 (the slots' to nearest).
inline TinyModel make_tiny_model(const Mesh& mesh, const LayoutRules& rules,
                                 std::int64_t d_ff_size = 12, DType stored = DType::float32,
                                 Rounding rounding = Rounding::nearest) {
  TinyModel m;
  Graph& g = *m.graph;
  const Dimension batch{"batch", 4}, d_model{"d_model", 8}, d_ff{"d_ff", d_ff_size},
      vocab{"vocab", 16};
  m.x = placeholder(g, "x", Shape{batch, d_model});
  m.target = placeholder(g, "target", Shape{batch, vocab});
  Tensor w1 = variable(g, "layer_0/w1", Shape{d_model, d_ff}, Initializer::normal(0.3f, 0, 11));
  Tensor b1 = variable(g, "layer_0/b1", Shape{d_ff}, Initializer::constant(0.01f));
  Tensor w2 = variable(g, "layer_0/w2", Shape{d_ff, vocab}, Initializer::uniform(-0.3f, 0.3f, 12));
  Tensor bias = variable(g, "out_bias", Shape{vocab}, Initializer::zeros());
  Tensor scale = variable(g, "scale", Shape{}, Initializer::constant(1.0f));
  Tensor counter = variable(g, "global_step", Shape{}, Initializer::zeros(), /*trainable=*/false);

  Tensor h = relu(einsum({m.x, w1}, std::vector<std::string>{"batch", "d_ff"}) + b1);
  Tensor logits = einsum({h, w2}, std::vector<std::string>{"batch", "vocab"}) + bias;
  logits = logits * scale;
  m.loss = reduce_mean(square(logits - m.target));

  const std::vector<Tensor> params = {w1, b1, w2, bias, scale};
  const auto grads = gradients(m.loss, params);
  const double lr = 0.05;
  for (size_t k = 0; k < params.size(); ++k) {
    Tensor slot = variable(g, params[k].name() + "/rms", params[k].shape(), Initializer::zeros(),
                           /*trainable=*/false);
    Tensor v = add(multiply(slot, 0.9), multiply(square(grads[k]), 0.1));
    assign(slot, v);
    assign_sub(params[k], multiply(grads[k] * rsqrt(add(v, 1e-6)), lr));
    g.set_variable_storage(params[k].name(), stored, rounding);
    g.set_variable_storage(slot.name(), stored);
  }
  assign_add(counter, constant(g, Shape{}, 1.0));
  m.program = lower(g, mesh, rules);
  return m;
}

}  // namespace mtk::test
