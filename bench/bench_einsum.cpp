// bench_einsum: mtk::kernels::einsum against a raw KokkosBlas::gemm on the same matrices, for the
// contractions of the standard benchmark Transformer (d_model 512, d_ff 2048, 8 heads of 64,
// 8 sequences of 256 = 2048 tokens) and their gradients. Prints one JSON object per case:
//   {"bench":"einsum","case":...,"shape":...,"gflops_mtk":...,"gflops_raw_gemm":...,"ratio":...}
// Run with OPENBLAS_NUM_THREADS=1 (the BLAS library reads it when it loads). Optional arguments:
// the number of timed repetitions (default 7; the best one counts).
#include <mtk/kernels/kernels.hpp>
#include <mtk/parallel/environment.hpp>

#include <KokkosBlas3_gemm.hpp>
#include <Kokkos_Core.hpp>

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

// The kernel set OpenBLAS chose ("Haswell", "SkylakeX", ...; OPENBLAS_CORETYPE overrides it), or
// "unknown" when the BLAS library is not OpenBLAS.
std::string blas_core() {
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

void run_case(const Case& c, int reps, const std::string& core) {
  const k::FView a = filled(c.a.num_elements(), 1), b = filled(c.b.num_elements(), 2);
  k::FView c_raw(std::string("bench::c_raw"), static_cast<size_t>(c.nb * c.m * c.n));
  const char ta[2] = {c.ta, 0}, tb[2] = {c.tb, 0};
  const int m = static_cast<int>(c.m), n = static_cast<int>(c.n), kk = static_cast<int>(c.kk);

  auto raw = [&] {
    for (std::int64_t i = 0; i < c.nb; ++i) {
      const CMat ai(a.data() + i * c.m * c.kk, c.ta == 'N' ? m : kk, c.ta == 'N' ? kk : m);
      const CMat bi(b.data() + i * c.kk * c.n, c.tb == 'N' ? kk : n, c.tb == 'N' ? n : kk);
      const Mat ci(c_raw.data() + i * c.m * c.n, m, n);
      KokkosBlas::gemm(ta, tb, 1.0f, ai, bi, 0.0f, ci);
    }
  };
  k::FView out;
  auto mtk = [&] { out = k::einsum(mtk::ExecSpace(), c.a, a, c.b, b, c.out); };
  // Warm-up, then alternate the two so that load from other processes hits both alike.
  seconds(raw);
  seconds(mtk);
  double t_raw = std::numeric_limits<double>::infinity(), t_mtk = t_raw;
  for (int r = 0; r < reps; ++r) {
    t_raw = std::min(t_raw, seconds(raw));
    t_mtk = std::min(t_mtk, seconds(mtk));
  }

  const double flops = 2.0 * static_cast<double>(k::einsum_macs(c.a, c.b, c.out));
  const double g_mtk = flops / t_mtk * 1e-9, g_raw = flops / t_raw * 1e-9;
  const std::string shape = c.a.to_string() + " x " + c.b.to_string() + " -> " + c.out.to_string();
  std::printf(
      "{\"bench\":\"einsum\",\"case\":\"%s\",\"shape\":\"%s\",\"gflops_mtk\":%.2f,"
      "\"gflops_raw_gemm\":%.2f,\"ratio\":%.3f,\"ms_mtk\":%.3f,\"ms_raw_gemm\":%.3f,"
      "\"blas_core\":\"%s\"}\n",
      c.name.c_str(), shape.c_str(), g_mtk, g_raw, g_mtk / g_raw, t_mtk * 1e3, t_raw * 1e3,
      core.c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  mtk::Environment env(argc, argv);
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 7;
  if (!std::getenv("OPENBLAS_NUM_THREADS"))
    std::fprintf(stderr, "bench_einsum: OPENBLAS_NUM_THREADS is unset; run with =1\n");

  const std::int64_t B = 8, L = 256, D = 512, F = 2048, H = 8, KV = 64;
  const std::int64_t T = B * L;
  const Shape x{{"batch", B}, {"length", L}, {"d_model", D}};
  const Shape hid{{"batch", B}, {"length", L}, {"d_ff", F}};
  const Shape w_in{{"d_model", D}, {"d_ff", F}}, w_out{{"d_ff", F}, {"d_model", D}};
  const Shape q{{"batch", B}, {"heads", H}, {"length", L}, {"d_kv", KV}};
  const Shape kv{{"batch", B}, {"heads", H}, {"memory_length", L}, {"d_kv", KV}};
  const Shape s{{"batch", B}, {"heads", H}, {"length", L}, {"memory_length", L}};

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
  };
  const std::string core = blas_core();
  for (const auto& c : cases)
    run_case(c, reps, core);
  return 0;
}
