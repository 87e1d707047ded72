#include "precision_line.hpp"

#include <mtk/base/dtype.hpp>
#include <mtk/base/error.hpp>
#include <mtk/kernels/einsum.hpp>

#include "say.hpp"

namespace mtk::app {

std::string precision_line(const nn::TransformerConfig& model,
                           const config::OptimizerSettings& optimizer) {
  const bool bf16 = model.contraction_precision() == Precision::bfloat16;
  if (!bf16 && optimizer.variable_dtype == DType::float32 && optimizer.slot_dtype == DType::float32)
    return "";
  const std::string compute =
      bf16 ? cat("bfloat16 (", kernels::bf16_gemm_description(), ")") : std::string("float32");
  const char* rounding =
      optimizer.variable_rounding == Rounding::stochastic ? " (stochastic rounding)" : "";
  return cat("precision: compute ", compute, ", variables ", dtype_name(optimizer.variable_dtype),
             rounding, ", optimizer slots ", dtype_name(optimizer.slot_dtype));
}

void say_precision(const std::string& tool, const nn::TransformerConfig& model,
                   const config::OptimizerSettings& optimizer) {
  const std::string line = precision_line(model, optimizer);
  if (!line.empty())
    say(cat("  ", line, "\n"));
  if (model.contraction_precision() == Precision::bfloat16 && kernels::bf16_gemm_is_emulated())
    say(cat(tool,
            ": warning: bfloat16 is emulated on this CPU (no avx512_bf16/amx), slower than "
            "float32\n"));
}

}  // namespace mtk::app
