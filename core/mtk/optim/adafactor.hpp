#pragma once
// Adafactor (Shazeer & Stern 2018) as Mesh-TensorFlow defines it: factored second moments for
// matrices, update clipping, parameter-relative step sizes, no momentum by default.

#include <mtk/optim/optimizer.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace mtk::optim {

struct AdafactorOptions {
  double beta1 = 0.0;           ///< momentum of the clipped, scaled update; 0 keeps no first moment
  double decay_exponent = 0.8;  ///< decay rate 1 - (step + 1)^-0.8
  double clipping_threshold = 1.0;  ///< update clipping on RMS(update)
  double epsilon1 = 1e-30;
  double epsilon2 = 1e-3;
  bool parameter_scaling = true;
  bool factored = true;
  std::int64_t min_dim_size_to_factor = 128;
  /// One fused kernel for the unfactored second moment and one for clipping, scaling, momentum
  /// and the parameter update (ops/optimizer_updates.hpp); false builds the same formula from
  /// elementwise ops (the reference the fused kernels are tested against).
  bool fused = true;
};

class Adafactor : public Optimizer {
 public:
  explicit Adafactor(AdafactorOptions o = {}) : o_(o) {}
  void apply(const std::vector<Tensor>& vars, const std::vector<Tensor>& grads, const Tensor& step,
             const Tensor& lr) override;
  /// The two dims Adafactor factors for `shape` (the two largest, both >= min size), or {} if
  /// it keeps a full second moment.
  std::vector<std::string> factored_dims(const Shape& shape) const;

 private:
  AdafactorOptions o_;
};

}  // namespace mtk::optim
