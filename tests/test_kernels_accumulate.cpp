// Contractions that add into their destination (kernels::einsum_accumulate, gemm beta = 1 /
// oneDNN's sum post-op): against einsum then an add on the same path, on every backend (the host
// BLAS in place, the packed KokkosBlas gemm, oneDNN f32; bf16 emulated, through oneDNN and, on
// GPUs, through cuBLAS), with operands read in place through strides (attention's per-head
// matrices), results written in out's order, as its transpose, or in neither (added apart), and
// the elementwise special cases.
// Bitwise where the gemm adds the sum after the whole dot product (the BLAS up to K = 64 here and
// 256 measured, oneDNN's brgemm kernels at any K); otherwise within float32 reassociation (a BLAS
// that splits K adds each block's part into the sum in turn; oneDNN's jit gemm, held to AVX2 in
// test_kernels_accumulate_avx2, starts the dot product from the sum).

#include <mtk/kernels/einsum_accumulate.hpp>
#include <mtk/kernels/impl/gpu_blas.hpp>
#include <mtk/kernels/impl/onednn_matmul.hpp>

#include "kernel_contract_util.hpp"
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

using namespace mtk::test::contract;

struct Path {
  std::string name;
  mtk::Precision precision;
  std::function<void()> set;
  /// Adds the sum after a short dot product (K <= 64): the BLAS, oneDNN's brgemm kernels; not
  /// oneDNN's jit gemm (AVX2), which starts the dot product from the sum.
  bool short_k_bitwise = true;
  /// Also for any K (oneDNN's brgemm kernels sum each element's K before adding the sum).
  bool one_pass = false;
};

bool onednn_brgemm(const std::string& impl) {
  return impl.rfind("brg", 0) == 0;
}

// Every path a contraction can take on this build and CPU; restored to the options after each.
std::vector<Path> paths() {
  using P = mtk::Precision;
  std::vector<Path> v;
  v.push_back({"fp32 host BLAS in place", P::float32, [] {
                 k::set_fp32_gemm(k::Fp32Gemm::blas);
                 k::set_einsum_in_place(true);
               }});
  v.push_back({"fp32 packed KokkosBlas gemm", P::float32, [] {
                 k::set_fp32_gemm(k::Fp32Gemm::blas);
                 k::set_einsum_in_place(false);
               }});
  v.push_back({"bf16 emulated", P::bfloat16, [] {
                 k::set_bf16_gemm(k::Bf16Gemm::emulate);
                 k::set_fp32_gemm(k::Fp32Gemm::blas);
                 k::set_einsum_in_place(true);
               }});
  v.push_back({"bf16 emulated, packed", P::bfloat16, [] {
                 k::set_bf16_gemm(k::Bf16Gemm::emulate);
                 k::set_fp32_gemm(k::Fp32Gemm::blas);
                 k::set_einsum_in_place(false);
               }});
  if (mtk::kernels::impl::onednn_available()) {
    namespace impl = mtk::kernels::impl;
    const bool f32 = onednn_brgemm(impl::onednn_f32_impl());
    const bool bf16 = onednn_brgemm(impl::onednn_bf16_impl());
    v.push_back(
        {"fp32 oneDNN", P::float32, [] { k::set_fp32_gemm(k::Fp32Gemm::onednn); }, f32, f32});
    v.push_back(
        {"bf16 oneDNN", P::bfloat16, [] { k::set_bf16_gemm(k::Bf16Gemm::onednn); }, bf16, bf16});
  }
  // The GPU BLAS may split K and add each part's product into the sum in turn: within
  // reassociation.
  if (mtk::kernels::impl::gpu_blas_available())
    v.push_back({"bf16 GPU BLAS", P::bfloat16, [] { k::set_bf16_gemm(k::Bf16Gemm::gpu_blas); },
                 false, false});
  return v;
}

struct PathScope {
  explicit PathScope(const Path& p) { p.set(); }
  ~PathScope() {
    k::reset_fp32_gemm();
    k::reset_bf16_gemm();
    k::set_einsum_in_place(true);
  }
};

std::vector<float> floats(const k::FView& v) {
  std::vector<float> out(v.extent(0));
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  if (!out.empty())
    std::memcpy(out.data(), h.data(), out.size() * sizeof(float));
  return out;
}

// einsum_accumulate(a, b -> into) against into + einsum(a, b) on the path now chosen: bitwise
// when `bitwise`, else within float32 reassociation of the sum's scale.
// Returns how many elements differ from into + einsum(a, b).
int check(const Path& path, const Shape& as, const Shape& bs, const Shape& os, bool bitwise,
          unsigned seed = 1) {
  SCOPED_TRACE(path.name + ": " + as.to_string() + " x " + bs.to_string() + " + " + os.to_string());
  const auto a = to_view<float>(random_values(as.num_elements(), seed));
  const auto b = to_view<float>(random_values(bs.num_elements(), seed + 1));
  const auto sum = random_values(os.num_elements(), seed + 2, -4.0, 4.0);
  const mtk::ExecSpace space;
  const auto product = floats(k::einsum(space, as, a, bs, b, os, path.precision));
  const auto into = to_view<float>(sum);
  const float* before = into.data();
  k::einsum_accumulate(space, as, a, bs, b, os, into, path.precision);
  EXPECT_EQ(into.data(), before);
  const auto got = floats(into);
  EXPECT_EQ(got.size(), product.size());
  if (got.size() != product.size())
    return -1;
  int differ = 0;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float want = static_cast<float>(sum[i]) + product[i];
    differ += got[i] != want;
    worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want));
  }
  if (bitwise)
    EXPECT_EQ(differ, 0) << "of " << got.size() << " differ, worst by " << worst;
  else
    EXPECT_LE(worst, 1e-5 * (4.0 + static_cast<double>(as.num_elements()) / os.num_elements()))
        << differ << " of " << got.size() << " differ";
  return differ;
}

void cases(const Path& p) {
  const bool bw = p.short_k_bitwise;
  // Result in out's order, as its transpose (swapped), and in neither (added apart).
  check(p, {{"i", 5}, {"j", 7}}, {{"j", 7}, {"k", 3}}, {{"i", 5}, {"k", 3}}, bw);
  check(p, {{"j", 7}, {"i", 5}}, {{"k", 3}, {"j", 7}}, {{"i", 5}, {"k", 3}}, bw);
  check(p, {{"i", 5}, {"j", 7}}, {{"j", 7}, {"k", 3}}, {{"k", 3}, {"i", 5}}, bw);
  check(p, {{"b", 2}, {"i", 4}, {"j", 5}}, {{"b", 2}, {"j", 5}, {"k", 3}},
        {{"k", 3}, {"b", 2}, {"i", 4}}, bw);
  // Attention: operands and result read and written in place with leading dims per (b, h).
  const Shape q{{"b", 2}, {"q", 5}, {"h", 3}, {"d", 6}}, kk{{"b", 2}, {"k", 4}, {"h", 3}, {"d", 6}};
  check(p, q, kk, {{"b", 2}, {"h", 3}, {"q", 5}, {"k", 4}}, bw);
  check(p, {{"b", 2}, {"h", 3}, {"q", 5}, {"k", 4}}, kk, q, bw);
  // A weight's gradient over a slice's tokens: [d_model, vocab] += x^T dlogits.
  const Shape x{{"batch", 2}, {"length", 16}, {"d_model", 32}};
  const Shape dl{{"batch", 2}, {"length", 16}, {"vocab", 48}};
  check(p, dl, x, {{"d_model", 32}, {"vocab", 48}}, bw);
  check(p, x, dl, {{"vocab", 48}, {"d_model", 32}}, bw);
  // Elementwise special cases and a presummed dim.
  check(p, {{"i", 4}, {"j", 3}}, {{"i", 4}, {"j", 3}}, {{"i", 4}, {"j", 3}}, bw);
  check(p, {{"i", 9}}, {{"i", 9}}, Shape{}, bw);
  check(p, {{"i", 4}, {"x", 3}, {"j", 5}}, {{"j", 5}, {"k", 2}}, {{"i", 4}, {"k", 2}}, bw);
  check(p, {{"i", 3}, {"j", 0}}, {{"j", 0}, {"k", 2}}, {{"i", 3}, {"k", 2}}, bw);
  // Long K (a slice's tokens): BLAS kernels sum K in blocks (OpenBLAS's Haswell/SkylakeX sgemm:
  // bitwise up to K = 256 here, not at 512), each added into the sum in turn; oneDNN's brgemm
  // adds the sum after the whole dot product.
  for (const std::int64_t t : {256, 512, 2048}) {
    const int differ = check(p, {{"t", t}, {"m", 64}}, {{"t", t}, {"n", 40}},
                             {{"n", 40}, {"m", 64}}, p.one_pass, 9);
    std::printf("%s, K = %lld: %s\n", p.name.c_str(), static_cast<long long>(t),
                differ == 0 ? "bitwise" : "within float32 reassociation");
  }
}

}  // namespace

TEST(EinsumAccumulate, AddsIntoTheSumOnEveryPath) {
  for (const Path& p : paths()) {
    const PathScope scope(p);
    cases(p);
  }
}

TEST(EinsumAccumulate, ChecksTheSum) {
  const Shape as{{"i", 2}, {"j", 3}}, bs{{"j", 3}, {"k", 4}}, os{{"i", 2}, {"k", 4}};
  const auto a = to_view<float>(random_values(6, 1)), b = to_view<float>(random_values(12, 2));
  const auto wrong = to_view<float>(random_values(7, 3));
  expect_error(
      [&] { k::einsum_accumulate(mtk::ExecSpace(), as, a, bs, b, os, wrong); },
      {"mtk::kernels::einsum_accumulate", "'into' holds 7 elements", "[i=2, k=4]", "has 8"});
}

// scatter_add_into: bitwise the scatter then the add, rows no id hits left alone, on the host's
// contiguous-row layout (an embedding's [vocab, d_model]) and a strided one.
TEST(ScatterAddInto, AddsIntoTheSum) {
  const Shape ids_s{{"batch", 4}, {"length", 8}};
  for (const bool d_last : {true, false}) {
    const Shape upd_s = d_last ? Shape{{"batch", 4}, {"length", 8}, {"d", 16}}
                               : Shape{{"d", 16}, {"batch", 4}, {"length", 8}};
    const Shape tab{{"vocab", 32}, {"d", 16}};
    std::vector<double> ids(32);
    for (size_t i = 0; i < ids.size(); ++i)
      ids[i] = static_cast<double>((i * 5) % 32 / 2);  // ids 0..15 hit, 16..31 not
    const auto u = to_view<float>(random_values(upd_s.num_elements(), 3));
    const auto sum = random_values(tab.num_elements(), 4);
    const auto idv = to_view<std::int32_t>(ids);
    const mtk::ExecSpace space;
    const auto scattered = floats(k::scatter_add(space, ids_s, idv, upd_s, u, tab, 0, 0));
    const auto into = to_view<float>(sum);
    k::scatter_add_into(space, ids_s, idv, upd_s, u, tab, 0, 0, into);
    const auto got = floats(into);
    int differ = 0;
    for (size_t i = 0; i < got.size(); ++i)
      differ += got[i] != static_cast<float>(sum[i]) + scattered[i];
    EXPECT_EQ(differ, 0) << (d_last ? "d last" : "d first");
  }
}
