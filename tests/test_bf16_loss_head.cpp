// The loss head under bfloat16 (docs/models.md, "bfloat16"): its forward product, the logits
// [batch, length, vocab] = final-norm output x [batch, length, d_model] . softmax weight
// [vocab, d_model], rounds both operands to bf16 like every other contraction of the model; the
// logits, the softmax and the cross-entropy stay float32.

#include <mtk/base/error.hpp>
#include <mtk/kernels/bfloat16.hpp>
#include <mtk/kernels/einsum.hpp>
#include <mtk/nn/nn.hpp>
#include <mtk/optim/optim.hpp>

#include <gtest/gtest.h>

#include "model_fixtures.hpp"
#include "mtk_invariance_check.hpp"
#include "training_fixtures.hpp"
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

using namespace mtk;

namespace {

struct HeadValues {
  std::vector<float> x, w, logits;
  std::int64_t rows = 0, vocab = 0, d_model = 0;
};

// One training step of the tiny bf16 model: the logits and the head's operands in that step.
HeadValues first_step() {
  Graph g;
  nn::TransformerConfig c = test::tiny_transformer();
  c.activation_dtype = "bfloat16";
  nn::ModelGraph m = nn::build_transformer(g, c, /*training=*/true, /*seed=*/3);
  test::minimize_for_test(m.loss);  // the step's forward is what is checked
  const Operation& head = g.op(m.logits.producer());
  EXPECT_EQ(std::string(head.kind()), "einsum");
  EXPECT_EQ(head.inputs.size(), 2u);
  const Tensor x(&g, head.inputs[0]), w(&g, head.inputs[1]);
  EXPECT_EQ(x.shape().to_string(),
            Shape({{"batch", c.batch}, {"length", c.length}, {"d_model", c.d_model}}).to_string());
  EXPECT_EQ(w.shape().to_string(),
            Shape({{"vocab", c.vocab_size}, {"d_model", c.d_model}}).to_string());
  auto feeds = test::lm_feeds(
      m, c,
      [&](std::int64_t b, std::int64_t l) { return (b * 7 + l * 3 + 1) % (c.vocab_size - 1) + 1; },
      [&](std::int64_t b, std::int64_t l) {
        return (b * 5 + l * 11 + 2) % (c.vocab_size - 1) + 1;
      });
  auto p = lower(g, test::single_processor_mesh(), LayoutRules());
  HeadValues h;
  h.w = p->variable_value("decoder/softmax").values<float>();  // before the step's update
  const auto out = p->run(feeds, {x, m.logits});
  h.x = out[0].values<float>();
  h.logits = out[1].values<float>();
  h.rows = c.batch * c.length;
  h.vocab = c.vocab_size;
  h.d_model = c.d_model;
  return h;
}

// The largest difference of `h.logits` from x . w^T in double, with the operands rounded to bf16
// first (`rounded`) or not.
double largest_difference(const HeadValues& h, bool rounded) {
  auto op = [&](float v) {
    return rounded ? static_cast<double>(kernels::round_to_bfloat16(v)) : static_cast<double>(v);
  };
  double worst = 0;
  for (std::int64_t r = 0; r < h.rows; ++r)
    for (std::int64_t v = 0; v < h.vocab; ++v) {
      double sum = 0;
      for (std::int64_t d = 0; d < h.d_model; ++d)
        sum += op(h.x[static_cast<size_t>(r * h.d_model + d)]) *
               op(h.w[static_cast<size_t>(v * h.d_model + d)]);
      worst = std::max(worst, std::abs(sum - h.logits[static_cast<size_t>(r * h.vocab + v)]));
    }
  return worst;
}

}  // namespace

// On whichever bf16 path this CPU takes (oneDNN's native matmul, or emulated), and emulated.
TEST(Bf16LossHead, TheForwardProductRoundsItsOperands) {
  for (const bool emulate : {false, true}) {
    if (emulate)
      kernels::set_bf16_gemm(kernels::Bf16Gemm::emulate);
    const HeadValues h = first_step();
    kernels::reset_bf16_gemm();
    ASSERT_EQ(h.logits.size(), static_cast<size_t>(h.rows * h.vocab));
    const double rounded = largest_difference(h, true), exact = largest_difference(h, false);
    const std::string path = emulate ? "emulated" : kernels::bf16_gemm_description();
    // float32 sums of exact bf16 products: within float32 rounding of the rounded product.
    EXPECT_LT(rounded, 1e-6) << path;
    // Not the float32 product: the operands' rounding shows, far above float32's.
    EXPECT_GT(exact, 100 * rounded + 1e-5) << path << ": " << exact << " against " << rounded;
    std::printf("%s: largest difference %.3g from the rounded product, %.3g from the float32 one\n",
                path.c_str(), rounded, exact);
  }
}
