// bench_einsum: every matrix-product backend MTK links, on the contractions of the standard
// benchmark Transformer (d_model 512, d_ff 2048, 8 heads of 64, vocab 32000, 8 sequences of 256 =
// 2048 tokens) and their gradients, against a raw KokkosBlas::gemm on the same matrices. First the
// ceilings: each backend on a 2048^3 product (kernels/matmul_ceiling.hpp), one JSON object each,
//   {"bench":"matmul_ceiling","backend":...,"dtype":...,"gflops":...}
// then one object per case and path (fp32 through the host BLAS, fp32 through oneDNN, fp32 as
// `auto` chooses, bf16 as `auto` chooses):
//   {"bench":"einsum","case":...,"path":...,"gflops":...,"gflops_raw_gemm":...,"ratio":...}
// and, where oneDNN has a native bf16 matmul, its rate alone on the same matrices already in bf16
// (the library's rate for the case, without MTK's conversions and arrangement):
//   {"bench":"einsum_raw_bf16","case":...,"impl":...,"gflops":...,"ms":...}
// Run with OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 (one core). Options: --reps N (default 5; the
// best counts), --ceiling-size N (default 2048).
#include <mtk/kernels/bfloat16_convert.hpp>
#include <mtk/kernels/impl/gpu_blas.hpp>
#include <mtk/kernels/impl/onednn_matmul.hpp>
#include <mtk/kernels/kernels.hpp>
#include <mtk/parallel/environment.hpp>

#include <KokkosBlas3_gemm.hpp>
#include <Kokkos_Core.hpp>

#include "../apps/common/cli.hpp"
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace {

using mtk::Shape;
namespace k = mtk::kernels;
using Mat = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::MemoryUnmanaged>;
using CMat = Kokkos::View<const float**, Kokkos::LayoutRight, Kokkos::MemoryUnmanaged>;

struct Case {
  std::string name;
  Shape a, b, out;
  // The equivalent raw computation: nb gemms C[M][N] = op(A) op(B) over the operands' own buffers.
  std::int64_t nb, m, n, kk;
  char ta, tb;
};

k::FView filled(std::int64_t n, unsigned seed) {
  k::FView v(std::string("bench::operand"), static_cast<size_t>(n));
  auto h = Kokkos::create_mirror_view(v);
  std::uint32_t s = seed * 2654435761u + 1u;
  for (std::int64_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    h(static_cast<size_t>(i)) = static_cast<float>(s >> 8) / static_cast<float>(1u << 24) - 0.5f;
  }
  Kokkos::deep_copy(v, h);
  return v;
}

// The kernel set OpenBLAS chose ("Haswell", "SkylakeX", ...; OPENBLAS_CORETYPE overrides it),
// "cuBLAS" / "rocBLAS" on a GPU, or "unknown" when the BLAS library is not OpenBLAS.
std::string blas_core() {
  if (k::impl::gpu_blas_available())
    return k::impl::gpu_blas_vendor();
  using Fn = char* (*)();
  auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  return fn ? std::string(fn()) : std::string("unknown");
}

double seconds(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  Kokkos::fence();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double best_of(int reps, const std::function<void()>& f) {
  double best = std::numeric_limits<double>::infinity();
  f();  // warm-up: primitives, buffers
  for (int r = 0; r < reps; ++r)
    best = std::min(best, seconds(f));
  return best;
}

// The case as one batched gemm description (row-major, nb contiguous entries).
k::impl::BatchedGemm batched(const Case& c) {
  k::impl::BatchedGemm g;
  g.ta = c.ta, g.tb = c.tb;
  g.nb = c.nb, g.m = c.m, g.n = c.n, g.k = c.kk;
  return g;
}

// The library's bf16 matmul alone (oneDNN's, or the GPU BLAS's on a GPU) on the case's matrices (nb
// contiguous entries, as the raw gemm reads them), converted to bf16 beforehand.
void run_raw_bf16(const Case& c, const k::FView& a, const k::FView& b, int reps) {
  const bool gpu_blas = k::impl::gpu_blas_available();
  if (!gpu_blas && (!k::impl::onednn_available() || !k::impl::onednn_has_bf16() ||
                    !Kokkos::SpaceAccessibility<Kokkos::HostSpace, mtk::MemSpace>::accessible))
    return;
  using Bits = Kokkos::View<std::uint16_t*>;
  const Bits a16("bench::a16", a.extent(0)), b16("bench::b16", b.extent(0));
  const mtk::ExecSpace space;
  k::convert_to_bfloat16_bits(space, "bench::a16", a.data(), a16.data(), std::int64_t(a.extent(0)));
  k::convert_to_bfloat16_bits(space, "bench::b16", b.data(), b16.data(), std::int64_t(b.extent(0)));
  const k::FView out("bench::c_bf16", static_cast<size_t>(c.nb * c.m * c.n));
  k::impl::StridedMatmul p;
  p.bf16 = true;
  p.batch_rank = 1;
  p.batch[0] = c.nb;
  p.m = c.m, p.n = c.n, p.k = c.kk;
  // Row-major op(A) [M][K] and op(B) [K][N]: 'T' reads the stored matrix transposed.
  p.a_strides[0] = c.m * c.kk, p.b_strides[0] = c.kk * c.n, p.c_strides[0] = c.m * c.n;
  p.a_strides[1] = c.ta == 'N' ? c.kk : 1, p.a_strides[2] = c.ta == 'N' ? 1 : c.m;
  p.b_strides[1] = c.tb == 'N' ? c.n : 1, p.b_strides[2] = c.tb == 'N' ? 1 : c.kk;
  p.c_strides[1] = c.n, p.c_strides[2] = 1;
  const std::string impl = gpu_blas ? k::impl::gpu_blas_name() : k::impl::onednn_matmul_impl(p);
  if (impl.empty())
    return;
  const double t = best_of(reps, [&] {
    if (gpu_blas)
      k::impl::gpu_blas_gemm_bf16(space, batched(c), a16.data(), b16.data(), out.data());
    else
      k::impl::onednn_matmul(p, a16.data(), b16.data(), out.data());
  });
  const double flops = 2.0 * static_cast<double>(c.nb * c.m) * static_cast<double>(c.n * c.kk);
  std::printf(
      "{\"bench\":\"einsum_raw_bf16\",\"case\":\"%s\",\"impl\":\"%s\","
      "\"gflops\":%.2f,\"ms\":%.3f}\n",
      c.name.c_str(), impl.c_str(), flops / t * 1e-9, t * 1e3);
  std::fflush(stdout);
}

// One path of the einsum: a float32 path forced, or `auto`, in a precision.
struct Path {
  const char* name;
  mtk::Precision precision;
  int fp32;  // -1: auto, else a k::Fp32Gemm
};

void run_case(const Case& c, int reps, const std::string& core) {
  const k::FView a = filled(c.a.num_elements(), 1), b = filled(c.b.num_elements(), 2);
  k::FView c_raw(std::string("bench::c_raw"), static_cast<size_t>(c.nb * c.m * c.n));
  const char ta[2] = {c.ta, 0}, tb[2] = {c.tb, 0};
  const int m = static_cast<int>(c.m), n = static_cast<int>(c.n), kk = static_cast<int>(c.kk);
  auto raw = [&] {
    if constexpr (k::impl::gpu_blas_available()) {  // the batch in one call, as einsum makes it
      k::impl::gpu_blas_gemm(mtk::ExecSpace(), batched(c), a.data(), b.data(), c_raw.data());
    } else {
      for (std::int64_t i = 0; i < c.nb; ++i) {
        const CMat ai(a.data() + i * c.m * c.kk, c.ta == 'N' ? m : kk, c.ta == 'N' ? kk : m);
        const CMat bi(b.data() + i * c.kk * c.n, c.tb == 'N' ? kk : n, c.tb == 'N' ? n : kk);
        const Mat ci(c_raw.data() + i * c.m * c.n, m, n);
        KokkosBlas::gemm(ta, tb, 1.0f, ai, bi, 0.0f, ci);
      }
    }
  };
  const double t_raw = best_of(reps, raw);
  const double flops = 2.0 * static_cast<double>(k::einsum_macs(c.a, c.b, c.out));
  const std::string shape = c.a.to_string() + " x " + c.b.to_string() + " -> " + c.out.to_string();
  const std::vector<Path> paths = {{"fp32_blas", mtk::Precision::float32, 2},
                                   {"fp32_onednn", mtk::Precision::float32, 1},
                                   {"fp32_auto", mtk::Precision::float32, -1},
                                   {"bf16_auto", mtk::Precision::bfloat16, -1}};
  for (const auto& p : paths) {
    try {
      if (p.fp32 >= 0)
        k::set_fp32_gemm(p.fp32 == 1 ? k::Fp32Gemm::onednn : k::Fp32Gemm::blas);
      else
        k::reset_fp32_gemm();
    } catch (const mtk::Error&) {
      continue;  // no oneDNN in this build
    }
    k::FView out;
    const double t = best_of(
        reps, [&] { out = k::einsum(mtk::ExecSpace(), c.a, a, c.b, b, c.out, p.precision); });
    const double g = flops / t * 1e-9, g_raw = flops / t_raw * 1e-9;
    std::printf(
        "{\"bench\":\"einsum\",\"case\":\"%s\",\"path\":\"%s\",\"shape\":\"%s\","
        "\"gflops\":%.2f,\"gflops_raw_gemm\":%.2f,\"ratio\":%.3f,\"ms\":%.3f,"
        "\"ms_raw_gemm\":%.3f,\"blas_core\":\"%s\"}\n",
        c.name.c_str(), p.name, shape.c_str(), g, g_raw, g / g_raw, t * 1e3, t_raw * 1e3,
        core.c_str());
    std::fflush(stdout);
  }
  k::reset_fp32_gemm();
  run_raw_bf16(c, a, b, reps);
}

}  // namespace

int main(int argc, char** argv) {
  mtk::Environment env(argc, argv);
  CLI::App app{"Every matmul backend on the standard Transformer's contractions (JSON).",
               "bench_einsum"};
  mtk::cli::configure(app);
  int reps = 5;
  std::int64_t ceiling_n = k::matmul_ceiling_size();
  app.add_option("--reps", reps, "timed repetitions per measurement; the best counts")
      ->check(mtk::cli::integer_in(1, 1000));
  app.add_option("--ceiling-size", ceiling_n, "n of the n^3 product the ceilings are measured on")
      ->check(mtk::cli::integer_in(64, 16384));
  if (const int status = mtk::cli::parse(app, {argv + 1, argv + argc}, true); status >= 0)
    return status;
  if (!std::getenv("OPENBLAS_NUM_THREADS"))
    std::fprintf(stderr, "bench_einsum: OPENBLAS_NUM_THREADS is unset; run with =1\n");
  for (const auto& r : k::measure_matmul_rates(mtk::ExecSpace(), ceiling_n, reps))
    std::printf(
        "{\"bench\":\"matmul_ceiling\",\"backend\":\"%s\",\"dtype\":\"%s\","
        "\"n\":%lld,\"gflops\":%.2f}\n",
        r.backend.c_str(), mtk::precision_name(r.precision), static_cast<long long>(ceiling_n),
        r.gflops);
  std::printf("{\"bench\":\"paths\",\"fp32_auto\":\"%s\",\"bf16_auto\":\"%s\"}\n",
              k::fp32_gemm_description().c_str(), k::bf16_gemm_description().c_str());
  std::fflush(stdout);

  const std::int64_t B = 8, L = 256, D = 512, F = 2048, H = 8, KV = 64, V = 32000;
  const std::int64_t T = B * L;
  const Shape x{{"batch", B}, {"length", L}, {"d_model", D}};
  const Shape hid{{"batch", B}, {"length", L}, {"d_ff", F}};
  const Shape w_in{{"d_model", D}, {"d_ff", F}}, w_out{{"d_ff", F}, {"d_model", D}};
  const Shape q{{"batch", B}, {"heads", H}, {"length", L}, {"d_kv", KV}};
  const Shape kv{{"batch", B}, {"heads", H}, {"memory_length", L}, {"d_kv", KV}};
  const Shape s{{"batch", B}, {"heads", H}, {"length", L}, {"memory_length", L}};
  const Shape emb{{"vocab", V}, {"d_model", D}}, logits{{"batch", B}, {"length", L}, {"vocab", V}};

  const std::vector<Case> cases = {
      // Feed-forward in: [2048 tokens, 512] x [512, 2048] and its gradients.
      {"ffn_in", x, w_in, hid, 1, T, F, D, 'N', 'N'},
      {"ffn_in_grad_w", x, hid, w_in, 1, D, F, T, 'T', 'N'},  // dW = X^T dY
      {"ffn_in_grad_x", hid, w_in, x, 1, T, D, F, 'N', 'T'},  // dX = dY W^T
      // Feed-forward out: [2048, 2048] x [2048, 512] and its gradients.
      {"ffn_out", hid, w_out, x, 1, T, D, F, 'N', 'N'},
      {"ffn_out_grad_w", hid, x, w_out, 1, F, D, T, 'T', 'N'},  // dW = H^T dY
      {"ffn_out_grad_x", x, w_out, hid, 1, T, F, D, 'N', 'T'},  // dH = dY W^T
      // Attention, per (batch, head): S = Q K^T, O = S V, and the gradients.
      {"attn_qk", q, kv, s, B * H, L, L, KV, 'N', 'T'},
      {"attn_av", s, kv, q, B * H, L, KV, L, 'N', 'N'},
      {"attn_grad_s", q, kv, s, B * H, L, L, KV, 'N', 'T'},  // dS = dO V^T
      {"attn_grad_v", s, q, kv, B * H, L, KV, L, 'T', 'N'},  // dV = S^T dO
      {"attn_grad_q", s, kv, q, B * H, L, KV, L, 'N', 'N'},  // dQ = dS K
      {"attn_grad_k", s, q, kv, B * H, L, KV, L, 'T', 'N'},  // dK = dS^T Q
      // Logits against the embedding [vocab, d_model] and their gradients.
      {"logits", x, emb, logits, 1, T, V, D, 'N', 'T'},
      {"logits_grad_emb", logits, x, emb, 1, V, D, T, 'T', 'N'},  // dE = dL^T X
      {"logits_grad_x", logits, emb, x, 1, T, D, V, 'N', 'N'},    // dX = dL E
  };
  const std::string core = blas_core();
  for (const auto& c : cases)
    run_case(c, reps, core);
  return 0;
}
