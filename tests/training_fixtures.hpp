#pragma once
// What the training tests share: the optimizer they train with, the global weights a program
// holds after its steps, and the two ways two runs are compared (bitwise; within float32
// reassociation of a stated tolerance).

#include <mtk/optim/optim.hpp>
#include <mtk/runtime/program.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace mtk::test {

/// A constant learning rate of 0.05: the training tests' schedule (with a default Adafactor).
inline optim::LearningRateSchedule test_learning_rate() {
  optim::LearningRateSchedule lr;
  lr.kind = optim::LearningRateSchedule::Kind::constant;
  lr.value = 0.05;
  return lr;
}

/// Every variable's global value, in the program's variable order, as one vector.
inline std::vector<float> global_weights(Program& p) {
  std::vector<float> out;
  for (const auto& name : p.variable_names()) {
    const auto v = p.variable_value(name).values<float>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

/// Adafactor at test_learning_rate() on `loss`.
inline void minimize_for_test(const Tensor& loss) {
  optim::Adafactor opt;
  optim::minimize(loss, opt, test_learning_rate());
}

/// The same losses and weights, bit for bit. `Run` has members `losses` and `weights`.
template <class Run>
void expect_bitwise(const Run& a, const Run& b, const std::string& what) {
  ASSERT_EQ(a.losses.size(), b.losses.size()) << what;
  ASSERT_EQ(a.weights.size(), b.weights.size()) << what;
  EXPECT_EQ(std::memcmp(a.losses.data(), b.losses.data(), 4 * a.losses.size()), 0)
      << what << ": losses " << a.losses.back() << " vs " << b.losses.back();
  EXPECT_EQ(std::memcmp(a.weights.data(), b.weights.data(), 4 * a.weights.size()), 0)
      << what << ": weights differ";
}

/// Within float32 reassociation: weights within `tol` of the largest weight, each loss within
/// `tol` of itself.
template <class Run>
void expect_close(const Run& a, const Run& b, const std::string& what, double tol) {
  ASSERT_EQ(a.weights.size(), b.weights.size()) << what;
  ASSERT_EQ(a.losses.size(), b.losses.size()) << what;
  float scale = 0, diff = 0;
  for (size_t k = 0; k < a.weights.size(); ++k) {
    scale = std::max(scale, std::fabs(b.weights[k]));
    diff = std::max(diff, std::fabs(a.weights[k] - b.weights[k]));
  }
  EXPECT_LE(diff, tol * scale) << what << ": weights differ by " << diff << " (scale " << scale
                               << ")";
  for (size_t k = 0; k < a.losses.size(); ++k)
    EXPECT_NEAR(a.losses[k], b.losses[k], tol * std::fabs(b.losses[k])) << what << " step " << k;
}

}  // namespace mtk::test
