// impl/onednn_matmul.hpp in a build without oneDNN (kernels/onednn_matmul.cpp is the real one):
// nothing available, and a forced oneDNN path fails naming the build option.
#include <mtk/base/error.hpp>
#include <mtk/kernels/impl/onednn_matmul.hpp>

namespace mtk::kernels::impl {

bool onednn_available() {
  return false;
}

std::string onednn_bf16_impl() {
  return "";
}

bool onednn_has_bf16() {
  return false;
}

std::string onednn_f32_impl() {
  return "";
}

std::string onednn_matmul_impl(const StridedMatmul&) {
  return "";
}

void onednn_matmul(const StridedMatmul&, const void*, const void*, float*) {
  fail("mtk::kernels::einsum", "this MTK was built without oneDNN (MTK_ENABLE_ONEDNN)");
}

}  // namespace mtk::kernels::impl
