// Float32 matmul backends against float64 (matmul_check.hpp).
#include <mtk/base/error.hpp>
#include <mtk/base/runtime_options.hpp>
#include <mtk/kernels/impl/onednn_matmul.hpp>
#include <mtk/kernels/matmul_check.hpp>

#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>

namespace mtk::kernels {
namespace {

constexpr bool host_space =
    Kokkos::SpaceAccessibility<Kokkos::HostSpace, ExecSpace::memory_space>::accessible;

// Values in [-1, 1) from a counter (no state shared with other generators); every third row
// (column) repeats the first, so equal dot products sit at many positions, tails included.
std::vector<float> operand(std::int64_t rows, std::int64_t cols, bool repeat_rows,
                           std::uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) {
      const std::int64_t si = repeat_rows && i % 3 == 0 ? 0 : i;
      const std::int64_t sj = !repeat_rows && j % 3 == 0 ? 0 : j;
      std::uint64_t x = seed ^ (static_cast<std::uint64_t>(si) * 0x9E3779B97F4A7C15ull) ^
                        (static_cast<std::uint64_t>(sj) * 0xC2B2AE3D27D4EB4Full);
      x ^= x >> 31;
      x *= 0xBF58476D1CE4E5B9ull;
      x ^= x >> 29;
      v[static_cast<size_t>(i * cols + j)] =
          static_cast<float>(static_cast<double>(x >> 40) / static_cast<double>(1ull << 23) - 1.0);
    }
  return v;
}

FView to_view(const std::vector<float>& v) {
  FView d(Kokkos::view_alloc(std::string("mtk::kernels::check_fp32_matmuls operand"),
                             Kokkos::WithoutInitializing),
          v.size());
  auto h = Kokkos::create_mirror_view(d);
  std::memcpy(h.data(), v.data(), v.size() * sizeof(float));
  Kokkos::deep_copy(d, h);
  return d;
}

MatmulCheck check_one(const ExecSpace& space, Fp32Gemm path, const MatmulShape& s) {
  const std::vector<float> a = operand(s.m, s.k, true, 11), b = operand(s.k, s.n, false, 23);
  set_fp32_gemm(path);
  MatmulCheck r;
  r.path = path;
  r.backend = fp32_gemm_description();
  r.shape = s;
  const FView c = einsum(space, Shape{{"m", s.m}, {"k", s.k}}, to_view(a),
                         Shape{{"k", s.k}, {"n", s.n}}, to_view(b), Shape{{"m", s.m}, {"n", s.n}});
  auto ch = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), c);
  const double u = std::ldexp(1.0, -24);
  for (std::int64_t i = 0; i < s.m; ++i)
    for (std::int64_t j = 0; j < s.n; ++j) {
      double sum = 0, scale = 0;
      for (std::int64_t p = 0; p < s.k; ++p) {
        const double t = static_cast<double>(a[static_cast<size_t>(i * s.k + p)]) *
                         static_cast<double>(b[static_cast<size_t>(p * s.n + j)]);
        sum += t;
        scale += std::fabs(t);
      }
      const double got = ch(static_cast<size_t>(i * s.n + j));
      const double e = scale > 0 ? std::fabs(got - sum) / (u * scale) : (got == 0 ? 0 : 1e30);
      r.worst = std::max(r.worst, std::isfinite(got) ? e : 1e30);
      // Rows 3q repeat row 0 of a, columns 3q repeat column 0 of b: equal dot products.
      const std::int64_t ri = i % 3 == 0 ? 0 : i, rj = j % 3 == 0 ? 0 : j;
      if (ch(static_cast<size_t>(ri * s.n + rj)) != ch(static_cast<size_t>(i * s.n + j)))
        r.position_consistent = false;
    }
  r.correct = r.worst <= static_cast<double>(s.k) + 1.0;
  return r;
}

std::string shape_text(const MatmulShape& s) {
  return cat("[", s.m, ", ", s.k, "] x [", s.k, ", ", s.n, "]");
}

}  // namespace

std::vector<MatmulShape> standard_check_shapes() {
  return {{1, 1, 1},     {7, 5, 3},      {33, 17, 9},   {100, 16, 9},  {257, 32, 144},
          {64, 100, 63}, {130, 10, 64},  {31, 64, 100}, {96, 96, 96},  {200, 128, 257},
          {512, 64, 64}, {16, 1000, 27}, {129, 129, 1}, {48, 24, 1000}};
}

std::vector<MatmulCheck> check_fp32_matmuls(const ExecSpace& space,
                                            const std::vector<MatmulShape>& shapes) {
  std::vector<MatmulCheck> out;
  if (!host_space)
    return out;
  struct Released {
    ~Released() { reset_fp32_gemm(); }
  } released;
  std::vector<Fp32Gemm> paths{Fp32Gemm::blas};
  if (impl::onednn_available())
    paths.push_back(Fp32Gemm::onednn);
  for (Fp32Gemm path : paths)
    for (const MatmulShape& s : shapes)
      out.push_back(check_one(space, path, s));
  return out;
}

void guard_fp32_matmuls(bool print_warning) {
  if (!host_space)
    return;
  const std::string requested = runtime_options().fp32_gemm();
  const Fp32Gemm chosen = fp32_gemm();
  // The backend in use only; the other one only where that one is wrong.
  const auto first_failure = [](Fp32Gemm path) -> std::optional<MatmulCheck> {
    struct Released {
      ~Released() { reset_fp32_gemm(); }
    } released;
    for (const MatmulShape& s : standard_check_shapes())
      if (MatmulCheck c = check_one(ExecSpace(), path, s); !c.correct)
        return c;
    return std::nullopt;
  };
  const std::optional<MatmulCheck> bad = first_failure(chosen);
  if (!bad)
    return;
  const std::string what = cat(
      bad->backend, " gives wrong float32 products: ", shape_text(bad->shape), " is ", bad->worst,
      " units of the rounding bound off a float64 product (at most ", bad->shape.k + 1, ")");
  if (requested != "auto")
    fail("mtk::kernels::guard_fp32_matmuls",
         cat(what, "; MTK_FP32_GEMM=", requested, " forces it: choose the other backend"));
  const Fp32Gemm other = chosen == Fp32Gemm::blas ? Fp32Gemm::onednn : Fp32Gemm::blas;
  if ((other == Fp32Gemm::onednn && !impl::onednn_available()) || first_failure(other))
    fail("mtk::kernels::guard_fp32_matmuls",
         cat(what, "; no other float32 backend of this build is correct"));
  set_fp32_gemm(other);
  if (print_warning)
    std::fprintf(stderr, "mtk: warning: %s; using %s instead\n", what.c_str(),
                 fp32_gemm_description().c_str());
}

}  // namespace mtk::kernels
