// Contractions: einsum in float32 and bfloat16, against host references.

#include <mtk/kernels/bfloat16_convert.hpp>
#include <mtk/kernels/impl/gpu_blas.hpp>

#include "kernel_contract_util.hpp"
#include <array>
#include <cstring>
#include <limits>
#include <random>

namespace {

using namespace mtk::test::contract;

// Sets the einsum in-place switch for one scope and restores the default (on) after it.
struct InPlaceScope {
  explicit InPlaceScope(bool on) { k::set_einsum_in_place(on); }
  ~InPlaceScope() { k::set_einsum_in_place(true); }
};

// Forces a float32 path for one scope and returns to the run-time option (MTK_FP32_GEMM) after.
struct Fp32PathScope {
  explicit Fp32PathScope(k::Fp32Gemm p) { k::set_fp32_gemm(p); }
  ~Fp32PathScope() { k::reset_fp32_gemm(); }
};

// ---------------------------------------------------------------- einsum

TEST(Einsum, MatmulAndTransposedOperands) {
  check_einsum({{"i", 5}, {"j", 7}}, {{"j", 7}, {"k", 3}}, {{"i", 5}, {"k", 3}});
  check_einsum({{"j", 7}, {"i", 5}}, {{"j", 7}, {"k", 3}}, {{"i", 5}, {"k", 3}});  // A^T B
  check_einsum({{"i", 5}, {"j", 7}}, {{"k", 3}, {"j", 7}}, {{"i", 5}, {"k", 3}});  // A B^T
  check_einsum({{"j", 7}, {"i", 5}}, {{"k", 3}, {"j", 7}}, {{"i", 5}, {"k", 3}});  // A^T B^T
  check_einsum({{"i", 5}, {"j", 7}}, {{"j", 7}, {"k", 3}}, {{"k", 3}, {"i", 5}});  // C^T
  check_einsum({{"j", 7}, {"i", 5}}, {{"k", 3}, {"j", 7}}, {{"k", 3}, {"i", 5}});
}

TEST(Einsum, MultiDimGroups) {
  // Several M, N and K dims, in matching and mismatching orders.
  check_einsum({{"m1", 3}, {"m2", 4}, {"k1", 5}, {"k2", 2}}, {{"k1", 5}, {"k2", 2}, {"n1", 6}},
               {{"m1", 3}, {"m2", 4}, {"n1", 6}});
  check_einsum({{"m1", 3}, {"m2", 4}, {"k1", 5}, {"k2", 2}}, {{"k2", 2}, {"k1", 5}, {"n1", 6}},
               {{"m1", 3}, {"m2", 4}, {"n1", 6}});
  check_einsum({{"k1", 5}, {"m1", 3}, {"k2", 2}, {"m2", 4}}, {{"k2", 2}, {"n1", 6}, {"k1", 5}},
               {{"n1", 6}, {"m2", 4}, {"m1", 3}});
  check_einsum({{"m1", 3}, {"k", 5}, {"m2", 4}}, {{"k", 5}, {"n1", 2}, {"n2", 3}},
               {{"m2", 4}, {"n1", 2}, {"m1", 3}, {"n2", 3}});
}

TEST(Einsum, BatchedAttention) {
  const std::int64_t B = 2, H = 3, Q = 5, K = 4, D = 6;
  const Shape q{{"b", B}, {"h", H}, {"q", Q}, {"d", D}}, kk{{"b", B}, {"h", H}, {"k", K}, {"d", D}};
  const Shape s{{"b", B}, {"h", H}, {"q", Q}, {"k", K}}, v{{"b", B}, {"h", H}, {"k", K}, {"d", D}};
  const Shape o{{"b", B}, {"h", H}, {"q", Q}, {"d", D}};
  check_einsum(q, kk, s);  // QK^T
  check_einsum(s, v, o);   // AV
  check_einsum(o, v, s);   // d scores = dO V^T
  check_einsum(s, o, v);   // dV = S^T dO
  check_einsum(s, kk, q);  // dQ = dS K
  check_einsum(s, q, kk);  // dK = dS^T Q
  // Batch dims in another order in an operand or in the output.
  check_einsum({{"h", H}, {"b", B}, {"q", Q}, {"d", D}}, kk, s);
  check_einsum(q, kk, {{"h", H}, {"b", B}, {"q", Q}, {"k", K}});
  check_einsum(q, kk, {{"b", B}, {"h", H}, {"k", K}, {"q", Q}});
  check_einsum(q, kk, {{"q", Q}, {"b", B}, {"k", K}, {"h", H}});
}

// The GPU's transposed copies (kernels::impl::device_paths: a thread per element) forced on the
// host, with operands packed (every order gemm cannot take is copied): the same results.
TEST(Einsum, DevicePathsTransposedCopies) {
  const DevicePaths device(true);
  const InPlaceScope packed(false);
  const std::int64_t B = 2, H = 3, Q = 5, K = 4, D = 6;
  const Shape q{{"b", B}, {"q", Q}, {"h", H}, {"d", D}}, kk{{"b", B}, {"h", H}, {"k", K}, {"d", D}};
  const Shape s{{"b", B}, {"h", H}, {"q", Q}, {"k", K}};
  check_einsum(q, kk, s);
  check_einsum(s, kk, q);
  check_einsum(s, q, kk);
  check_einsum({{"k1", 5}, {"m1", 3}, {"k2", 2}, {"m2", 4}}, {{"k2", 2}, {"n1", 6}, {"k1", 5}},
               {{"n1", 6}, {"m2", 4}, {"m1", 3}});
  check_einsum({{"m1", 3}, {"k", 5}, {"m2", 4}}, {{"k", 5}, {"n1", 2}, {"n2", 3}},
               {{"m2", 4}, {"n1", 2}, {"m1", 3}, {"n2", 3}});
}

TEST(Einsum, OuterProductAndOddOutputOrders) {
  check_einsum({{"i", 4}}, {{"j", 3}}, {{"i", 4}, {"j", 3}});
  check_einsum({{"i", 4}}, {{"j", 3}}, {{"j", 3}, {"i", 4}});
  check_einsum({{"b", 2}, {"i", 4}}, {{"j", 3}, {"b", 2}}, {{"j", 3}, {"b", 2}, {"i", 4}});
  check_einsum({{"b", 2}, {"i", 4}, {"j", 5}}, {{"b", 2}, {"j", 5}, {"k", 3}},
               {{"i", 4}, {"b", 2}, {"k", 3}});
  check_einsum({{"b", 2}, {"i", 4}, {"j", 5}}, {{"b", 2}, {"j", 5}, {"k", 3}},
               {{"k", 3}, {"b", 2}, {"i", 4}});
  // Dot product and scalar operands.
  check_einsum({{"i", 9}}, {{"i", 9}}, Shape{});
  check_einsum(Shape{}, {{"j", 3}}, {{"j", 3}});
  check_einsum({{"i", 4}, {"j", 3}}, {{"i", 4}, {"j", 3}}, {{"i", 4}, {"j", 3}});  // elementwise
}

TEST(Einsum, DimsSummedFromOneInput) {
  check_einsum({{"i", 4}, {"x", 3}, {"j", 5}}, {{"j", 5}, {"k", 2}, {"y", 3}},
               {{"i", 4}, {"k", 2}});
  check_einsum({{"x", 3}, {"i", 4}}, {{"k", 2}}, {{"i", 4}, {"k", 2}});
  check_einsum({{"x", 3}, {"y", 2}}, {{"z", 2}}, Shape{});
}

TEST(Einsum, TransformerContractionsAndGradients) {
  const Shape x{{"batch", 2}, {"length", 16}, {"d_model", 32}};
  const Shape w{{"d_model", 32}, {"d_ff", 64}};
  const Shape h{{"batch", 2}, {"length", 16}, {"d_ff", 64}};
  check_einsum(x, w, h);                                // h = x W
  check_einsum(h, x, {{"d_model", 32}, {"d_ff", 64}});  // dW = x^T dh
  check_einsum(x, h, {{"d_model", 32}, {"d_ff", 64}});  // same, operands swapped
  check_einsum(h, w, x);                                // dx = dh W^T
  check_einsum(w, h, x);                                // same, operands swapped
  check_einsum(x, h, {{"d_ff", 64}, {"d_model", 32}});  // dW^T
  // Multi-head projections: [b, l, d_model] x [d_model, heads, d_kv] -> [b, heads, l, d_kv].
  const Shape wq{{"d_model", 32}, {"heads", 4}, {"d_kv", 8}};
  const Shape q{{"batch", 2}, {"heads", 4}, {"length", 16}, {"d_kv", 8}};
  check_einsum(x, wq, q);
  check_einsum(q, wq, x);  // dx
  check_einsum(x, q, wq);  // dWq
  // Logits against an embedding table [vocab, d_model].
  check_einsum(x, {{"vocab", 50}, {"d_model", 32}}, {{"batch", 2}, {"length", 16}, {"vocab", 50}});
}

TEST(Einsum, LargerMatricesMatchReference) {
  check_einsum({{"m", 67}, {"k", 129}}, {{"k", 129}, {"n", 65}}, {{"m", 67}, {"n", 65}}, 7);
  check_einsum({{"k", 129}, {"m", 67}}, {{"n", 65}, {"k", 129}}, {{"n", 65}, {"m", 67}}, 8);
}

TEST(Einsum, SizeOneAndEmptyDims) {
  check_einsum({{"i", 1}, {"j", 4}}, {{"j", 4}, {"k", 3}}, {{"k", 3}, {"i", 1}});
  check_einsum({{"j", 4}, {"i", 1}}, {{"k", 1}, {"j", 4}}, {{"k", 1}, {"i", 1}});
  check_einsum({{"b", 1}, {"i", 3}, {"j", 1}}, {{"j", 1}, {"b", 1}, {"k", 2}},
               {{"k", 2}, {"i", 3}, {"b", 1}});
  // A contracted dim of size 0: zeros.
  check_einsum({{"i", 3}, {"j", 0}}, {{"j", 0}, {"k", 2}}, {{"i", 3}, {"k", 2}});
  // Empty output dims.
  check_einsum({{"i", 0}, {"j", 4}}, {{"j", 4}, {"k", 2}}, {{"i", 0}, {"k", 2}});
  check_einsum({{"b", 0}, {"i", 3}, {"j", 4}}, {{"b", 0}, {"j", 4}}, {{"b", 0}, {"i", 3}});
  // Summed-away dim of size 0.
  check_einsum({{"i", 3}, {"x", 0}}, {{"k", 2}}, {{"i", 3}, {"k", 2}});
}

TEST(Einsum, UsesTheBlasLibraryForFloat) {
#if defined(KOKKOSKERNELS_ENABLE_TPL_BLAS)
  if constexpr (!std::is_same_v<Kokkos::DefaultExecutionSpace::memory_space, Kokkos::HostSpace>) {
    GTEST_SKIP() << "host BLAS only applies to host memory";
  } else {
    // In place: the host BLAS called with leading dimensions; copying: Kokkos Kernels' gemm,
    // which dispatches to the same BLAS library.
    const Fp32PathScope blas(k::Fp32Gemm::blas);
    for (const bool in_place : {true, false}) {
      SCOPED_TRACE(in_place ? "in place" : "copying");
      const InPlaceScope scope(in_place);
      Recorder rec;
      check_einsum({{"b", 2}, {"i", 8}, {"j", 8}}, {{"b", 2}, {"k", 8}, {"j", 8}},
                   {{"b", 2}, {"k", 8}, {"i", 8}});
      EXPECT_TRUE(Recorder::saw_region(in_place ? "mtk::kernels::einsum host BLAS sgemm in place"
                                                : "KokkosBlas::gemm[TPL_BLAS,float]"));
      EXPECT_TRUE(Recorder::saw_region("mtk::kernels::einsum"));
      EXPECT_TRUE(Recorder::all_kernels_start_with("mtk::kernels::"));
    }
  }
#else
  GTEST_SKIP() << "Kokkos Kernels built without a BLAS TPL";
#endif
}

TEST(Einsum, InPlaceOperandsWithLeadingDimensions) {
#if defined(KOKKOSKERNELS_ENABLE_TPL_BLAS)
  if constexpr (!std::is_same_v<Kokkos::DefaultExecutionSpace::memory_space, Kokkos::HostSpace>) {
    GTEST_SKIP() << "host BLAS only applies to host memory";
  } else {
    // Attention as the model stores it: q, k, v and the attention output are [b, l, h, d]; logits
    // [b, h, q, k]. Per (b, h) each is a matrix with row stride h * d: no transposed copy, forward
    // and every gradient; both paths agree with the reference.
    const Shape q{{"b", 2}, {"q", 5}, {"h", 3}, {"d", 4}},
        kk{{"b", 2}, {"k", 6}, {"h", 3}, {"d", 4}};
    const Shape s{{"b", 2}, {"h", 3}, {"q", 5}, {"k", 6}};
    const std::vector<std::vector<Shape>> cases = {{q, kk, s}, {s, kk, q}, {s, q, kk},
                                                   {q, s, kk}, {kk, q, s}, {kk, s, q}};
    const Fp32PathScope blas(k::Fp32Gemm::blas);
    for (const auto& c : cases) {
      for (const bool in_place : {true, false}) {
        const InPlaceScope scope(in_place);
        Recorder rec;
        check_einsum(c[0], c[1], c[2]);
        if (!in_place)
          continue;
        for (const auto& name : Recorder::kernels())
          EXPECT_EQ(name.rfind("mtk::kernels::", 0), std::string::npos)
              << c[0].to_string() << " x " << c[1].to_string() << " -> " << c[2].to_string()
              << " ran " << name;
      }
    }
  }
#else
  GTEST_SKIP() << "Kokkos Kernels built without a BLAS TPL";
#endif
}

TEST(Einsum, InPlaceAndCopyingPathsAgreeOnEveryOrder) {
  // Every memory order of a batched product with two-dim groups (b1, b2 batch; m1, m2; n; k1, k2),
  // some orders in place, some partly, some copied: both paths against the reference.
  const std::vector<Dimension> ad = {{"b1", 2}, {"m1", 3}, {"k1", 4}, {"m2", 2}, {"k2", 3}};
  const std::vector<Dimension> bd = {{"k1", 4}, {"b1", 2}, {"n", 5}, {"k2", 3}};
  const std::vector<Dimension> od = {{"b1", 2}, {"m1", 3}, {"m2", 2}, {"n", 5}};
  std::mt19937 rng(7);
  for (int trial = 0; trial < 40; ++trial) {
    auto a = ad, b = bd, o = od;
    std::shuffle(a.begin(), a.end(), rng);
    std::shuffle(b.begin(), b.end(), rng);
    std::shuffle(o.begin(), o.end(), rng);
    for (const bool in_place : {true, false}) {
      SCOPED_TRACE(in_place ? "in place" : "copying");
      const InPlaceScope scope(in_place);
      check_einsum(Shape(a), Shape(b), Shape(o), static_cast<unsigned>(trial));
    }
  }
}

TEST(Einsum, NoCopiesWhenOrdersFitGemm) {
  // Operands in [batch][M][K] / [batch][K][M] and [batch][K][N] / [batch][N][K] order and outputs
  // in [batch][M][N] / [batch][N][M] order are used in place: no transpose kernel runs.
  const Shape x{{"b", 2}, {"l", 3}, {"d", 4}}, w{{"d", 4}, {"f", 5}},
      h{{"b", 2}, {"l", 3}, {"f", 5}};
  const Shape q{{"b", 2}, {"h", 2}, {"q", 3}, {"d", 4}}, kk{{"b", 2}, {"h", 2}, {"k", 5}, {"d", 4}};
  const Shape s{{"b", 2}, {"h", 2}, {"q", 3}, {"k", 5}};
  const std::vector<std::vector<Shape>> cases = {
      {x, w, h},  {h, x, w},  {x, h, {{"f", 5}, {"d", 4}}},
      {h, w, x},  {w, h, x},  {q, kk, s},
      {s, kk, q}, {s, q, kk}, {q, kk, {{"b", 2}, {"h", 2}, {"k", 5}, {"q", 3}}}};
  for (const auto& c : cases) {
    Recorder rec;
    check_einsum(c[0], c[1], c[2]);
    for (const auto& name : Recorder::kernels())
      if (name != "mtk::kernels::einsum batch addresses") {  // cuBLAS in place: pointers, no copy
        EXPECT_EQ(name.rfind("mtk::kernels::", 0), std::string::npos)
            << c[0].to_string() << " x " << c[1].to_string() << " -> " << c[2].to_string()
            << " ran " << name;
      }
  }
}

// A small output in another order than its operands' (a convolution's filter gradient,
// [positions, c_out] x [positions, c_in, taps] -> [taps, c_in, c_out]): the product reads the
// operands where they lie and only the output is permuted, never a transposed copy of an operand.
std::vector<std::uint64_t>& copy_bytes() {
  static std::vector<std::uint64_t> v;
  return v;
}

TEST(Einsum, SmallOutputPermutedInsteadOfItsOperands) {
  const Shape dy{{"d", 8}, {"h", 8}, {"w", 8}, {"c1", 3}};
  const Shape patches{{"d", 8}, {"h", 8}, {"w", 8}, {"c0", 2}, {"t", 27}};
  const std::vector<Shape> outs = {Shape{{"t", 27}, {"c0", 2}, {"c1", 3}},
                                   Shape{{"c0", 2}, {"t", 27}, {"c1", 3}},
                                   Shape{{"c1", 3}, {"t", 27}, {"c0", 2}}};
  for (const Shape& out : outs)
    for (const bool in_place : {true, false}) {
      SCOPED_TRACE(out.to_string() + (in_place ? " in place" : " copying"));
      const InPlaceScope scope(in_place);
      copy_bytes().clear();
      Kokkos::Tools::Experimental::set_allocate_data_callback(
          [](Kokkos::Profiling::SpaceHandle, const char* label, const void*, std::uint64_t size) {
            if (std::string(label) == "mtk::kernels::einsum transposed copy")
              copy_bytes().push_back(size);
          });
      check_einsum(dy, patches, out);
      Kokkos::Tools::Experimental::set_allocate_data_callback(nullptr);
      if (in_place && k::host_blas_name().find("no BLAS") == std::string::npos) {
        for (const std::uint64_t bytes : copy_bytes())
          EXPECT_LE(bytes, static_cast<std::uint64_t>(out.num_elements()) * sizeof(float));
      }
    }
}

// ---------------------------------------------------------------- bfloat16 einsum

std::vector<double> rounded_bf16(std::vector<double> v) {
  for (auto& x : v)
    x = static_cast<double>(k::round_to_bfloat16(static_cast<float>(x)));
  return v;
}

// Forces a bf16 path for one test and restores automatic selection after it.
struct Bf16PathScope {
  explicit Bf16PathScope(k::Bf16Gemm p) { k::set_bf16_gemm(p); }
  ~Bf16PathScope() { k::set_bf16_gemm(k::Bf16Gemm::automatic); }
};

// The bf16 operand the contract defines (docs/models.md): x summed in float32 over its dims that
// neither `other` nor `out` has, then rounded to bf16. `s` becomes the kept shape.
std::vector<double> bf16_operand(Shape& s, const std::vector<double>& x, const Shape& other,
                                 const Shape& out) {
  std::vector<Dimension> keep;
  for (const auto& d : s.dims())
    if (other.contains(d.name) || out.contains(d.name))
      keep.push_back(d);
  const Shape kept(keep);
  std::vector<float> sums(static_cast<size_t>(kept.num_elements()), 0.0f);
  for_each_index(s.dims(), [&](const Index& idx) {
    sums[static_cast<size_t>(offset_of(kept, idx))] +=
        static_cast<float>(x[static_cast<size_t>(offset_of(s, idx))]);
  });
  s = kept;
  return rounded_bf16(std::vector<double>(sums.begin(), sums.end()));
}

// bf16 einsum against a double reference of the contract (presum in float32, operands rounded to
// bf16 once, exact products): only float32 summation error remains. Also checks that rounding
// happened: the result is measurably away from the float32 reference.
void check_einsum_bf16(const Shape& as, const Shape& bs, const Shape& os, unsigned seed = 1) {
  SCOPED_TRACE(as.to_string() + " x " + bs.to_string() + " -> " + os.to_string());
  const auto a = random_values(as.num_elements(), seed);
  const auto b = random_values(bs.num_elements(), seed + 100);
  const auto out = to_vector(k::einsum(mtk::ExecSpace(), as, to_view<float>(a), bs,
                                       to_view<float>(b), os, mtk::Precision::bfloat16));
  ASSERT_EQ(static_cast<std::int64_t>(out.size()), os.num_elements());
  Shape ar = as, br = bs;
  const auto a16 = bf16_operand(ar, a, bs, os);
  const auto b16 = bf16_operand(br, b, as, os);
  EXPECT_LE(rel_error(out, ref_einsum(ar, a16, br, b16, os)), 1e-5);
  const auto fp32_ref = ref_einsum(as, a, bs, b, os);
  if (std::any_of(fp32_ref.begin(), fp32_ref.end(), [](double v) { return v != 0.0; })) {
    EXPECT_GE(rel_error(out, fp32_ref), 1e-4) << "operands not rounded";
  }
}

void bf16_cases() {
  check_einsum_bf16({{"i", 5}, {"j", 7}}, {{"j", 7}, {"k", 3}}, {{"i", 5}, {"k", 3}});
  check_einsum_bf16({{"j", 7}, {"i", 5}}, {{"k", 3}, {"j", 7}}, {{"i", 5}, {"k", 3}});
  check_einsum_bf16({{"i", 5}, {"j", 7}}, {{"j", 7}, {"k", 3}}, {{"k", 3}, {"i", 5}});  // C^T
  check_einsum_bf16({{"j", 7}, {"i", 5}}, {{"k", 3}, {"j", 7}}, {{"k", 3}, {"i", 5}});
  check_einsum_bf16({{"k1", 5}, {"m1", 3}, {"k2", 2}, {"m2", 4}}, {{"k2", 2}, {"n1", 6}, {"k1", 5}},
                    {{"n1", 6}, {"m2", 4}, {"m1", 3}});
  const Shape q{{"b", 2}, {"h", 3}, {"q", 5}, {"d", 6}}, kk{{"b", 2}, {"h", 3}, {"k", 4}, {"d", 6}};
  const Shape s{{"b", 2}, {"h", 3}, {"q", 5}, {"k", 4}};
  check_einsum_bf16(q, kk, s);                                         // batched QK^T
  check_einsum_bf16(s, kk, q);                                         // batched dS K
  check_einsum_bf16(s, q, kk);                                         // batched dS^T Q
  check_einsum_bf16(q, kk, {{"b", 2}, {"h", 3}, {"k", 4}, {"q", 5}});  // batched, swapped out
  check_einsum_bf16(q, kk, {{"q", 5}, {"b", 2}, {"k", 4}, {"h", 3}});  // transposed out
  check_einsum_bf16({{"i", 4}, {"j", 3}}, {{"i", 4}, {"j", 3}}, {{"i", 4}, {"j", 3}});
  check_einsum_bf16({{"i", 4}, {"x", 3}, {"j", 5}}, {{"j", 5}, {"k", 2}, {"y", 3}},
                    {{"i", 4}, {"k", 2}});
  const Shape x{{"batch", 2}, {"length", 16}, {"d_model", 32}};
  const Shape w{{"d_model", 32}, {"d_ff", 64}}, h{{"batch", 2}, {"length", 16}, {"d_ff", 64}};
  check_einsum_bf16(x, w, h);
  check_einsum_bf16(h, x, {{"d_model", 32}, {"d_ff", 64}});
  check_einsum_bf16(h, w, x);
  check_einsum_bf16({{"m", 67}, {"k", 129}}, {{"n", 65}, {"k", 129}}, {{"n", 65}, {"m", 67}}, 7);
  check_einsum_bf16({{"i", 3}, {"j", 0}}, {{"j", 0}, {"k", 2}}, {{"i", 3}, {"k", 2}});
}

TEST(EinsumBf16, RoundsToNearestEven) {
  EXPECT_EQ(k::round_to_bfloat16(1.0f), 1.0f);
  EXPECT_EQ(k::round_to_bfloat16(1.0f + 0x1p-8f), 1.0f);                // tie: to even
  EXPECT_EQ(k::round_to_bfloat16(1.0f + 3 * 0x1p-8f), 1.0f + 0x1p-6f);  // tie: to even
  EXPECT_EQ(k::round_to_bfloat16(1.0f + 0x1p-8f + 0x1p-20f), 1.0f + 0x1p-7f);
  EXPECT_EQ(k::round_to_bfloat16(-2.5f), -2.5f);
  EXPECT_EQ(k::to_bfloat16_bits(1.0f), 0x3f80);
  EXPECT_TRUE(std::isnan(k::round_to_bfloat16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(k::round_to_bfloat16(std::numeric_limits<float>::infinity()),
            std::numeric_limits<float>::infinity());
  EXPECT_EQ(k::round_to_bfloat16(std::numeric_limits<float>::max()),
            std::numeric_limits<float>::infinity());
}

// The bulk conversions give the scalar rounding's bits on every ISA this CPU can run (each one
// forced in turn), on rounding ties, NaN payloads, infinities, overflow, subnormals and random bit
// patterns, at a length that ends inside a block and inside a vector.
TEST(EinsumBf16, BulkConversionsGiveTheScalarBitsOnEveryIsa) {
  std::vector<std::uint32_t> patterns = {0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu,
                                         0x3f808000u, 0x3f818000u, 0x3f807fffu, 0x7f7fffffu,
                                         0xff7fffffu, 0x7f800000u, 0xff800000u, 0x7f800001u,
                                         0xffc12345u, 0x7fbfffffu, 0x7fff8000u, 0x0000ffffu};
  std::mt19937 gen(7);
  while (patterns.size() < 3 * (1u << 14) + 37)
    patterns.push_back(static_cast<std::uint32_t>(gen()));
  const auto n = static_cast<std::int64_t>(patterns.size());
  std::vector<float> x(patterns.size());
  std::memcpy(x.data(), patterns.data(), x.size() * sizeof(float));
  const Kokkos::View<float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> xv(x.data(), x.size());
  const k::FView host_x = Kokkos::create_mirror_view_and_copy(mtk::MemSpace(), xv);  // on device
  const mtk::ExecSpace space;
  int ran = 0;
  for (k::Bf16ConvertIsa isa :
       {k::Bf16ConvertIsa::baseline, k::Bf16ConvertIsa::avx2, k::Bf16ConvertIsa::avx512bw}) {
    if (!k::bf16_convert_isa_available(isa)) {
      std::printf("%s conversions: not on this CPU or build\n",
                  k::bf16_convert_isa_name(isa).c_str());
      continue;
    }
    k::force_bf16_convert_isa(isa);
    Kokkos::View<std::uint16_t*> bits("bits", x.size());
    k::FView rounded("rounded", x.size()), in_place("in place", x.size());
    Kokkos::deep_copy(in_place, host_x);
    k::convert_to_bfloat16_bits(space, "test", host_x.data(), bits.data(), n);
    k::round_values_to_bfloat16(space, "test", host_x.data(), rounded.data(), n);
    k::round_values_to_bfloat16(space, "test", in_place.data(), in_place.data(), n);
    space.fence();
    k::reset_bf16_convert_isa();
    const auto b = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), bits);
    const auto r = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), rounded);
    const auto ip = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), in_place);
    int bad = 0;
    for (std::int64_t i = 0; i < n && bad < 5; ++i) {
      const float want = k::round_to_bfloat16(x[i]);
      const bool same = std::memcmp(&want, &r(i), 4) == 0 && std::memcmp(&want, &ip(i), 4) == 0 &&
                        b(i) == k::to_bfloat16_bits(x[i]);
      if (!same)
        ++bad;
      EXPECT_TRUE(same) << k::bf16_convert_isa_name(isa) << " at " << i << ": pattern 0x"
                        << std::hex << patterns[i] << " gives bits 0x" << b(i) << ", want 0x"
                        << k::to_bfloat16_bits(x[i]);
    }
    ++ran;
  }
  EXPECT_GE(ran, 1);
  EXPECT_TRUE(k::bf16_convert_isa_available(k::bf16_convert_isa()));
  std::printf("bulk bf16 conversions run with %s here\n",
              k::bf16_convert_isa_name(k::bf16_convert_isa()).c_str());
}

TEST(EinsumBf16, EmulatedMatchesReference) {
  Bf16PathScope scope(k::Bf16Gemm::emulate);
  EXPECT_EQ(k::bf16_gemm(), k::Bf16Gemm::emulate);
  EXPECT_TRUE(k::bf16_gemm_is_emulated());
  bf16_cases();
}

TEST(EinsumBf16, OneDnnMatchesReference) {
  if (!std::is_same_v<Kokkos::DefaultExecutionSpace::memory_space, Kokkos::HostSpace>)
    GTEST_SKIP() << "oneDNN runs on host memory only";
  try {
    k::set_bf16_gemm(k::Bf16Gemm::onednn);
  } catch (const mtk::Error& e) {
    GTEST_SKIP() << e.what();
  }
  Bf16PathScope scope(k::Bf16Gemm::onednn);
  EXPECT_EQ(k::bf16_gemm(), k::Bf16Gemm::onednn);
  // Where oneDNN has no bf16 matmul (2.x on CPUs without avx512_core) the forced path runs its
  // f32 matmul on the rounded operands: the same primitive shapes and strides, tested here.
  EXPECT_NE(k::bf16_gemm_description().find("oneDNN"), std::string::npos)
      << k::bf16_gemm_description();
  std::printf("bf16 path: %s\n", k::bf16_gemm_description().c_str());
  bf16_cases();
  Recorder rec;  // the products ran in oneDNN, not in Kokkos Kernels' gemm
  check_einsum_bf16({{"b", 2}, {"i", 8}, {"j", 8}}, {{"b", 2}, {"k", 8}, {"j", 8}},
                    {{"b", 2}, {"k", 8}, {"i", 8}});
  EXPECT_TRUE(Recorder::saw_region("mtk::kernels::einsum"));
  for (const auto& r : Recorder::regions())
    EXPECT_NE(r.rfind("KokkosBlas::gemm", 0), 0u) << r;
}

// An operand held only as its kept bf16 copy (Bf16Copies::values_gone: the logits' gradient
// written as bits alone over its float32 buffer) gives the product of its bf16 values on every
// path: oneDNN's bf16 matmul reads the copy where the operand lies; a presum, a transposed copy,
// an elementwise case or another body gets the values widened back from it.
TEST(EinsumBf16, AnOperandHeldAsItsBitsAloneGivesItsBf16Product) {
  std::vector<k::Bf16Gemm> paths{k::Bf16Gemm::emulate};
  try {
    k::set_bf16_gemm(k::Bf16Gemm::onednn);
    paths.push_back(k::Bf16Gemm::onednn);
  } catch (const mtk::Error&) {
  }
  k::set_bf16_gemm(k::Bf16Gemm::automatic);
  const mtk::ExecSpace space;
  const Shape x{{"batch", 2}, {"length", 16}, {"vocab", 40}}, w{{"vocab", 40}, {"d_model", 8}};
  const Shape h{{"batch", 2}, {"length", 16}, {"d_model", 8}}, dw{{"vocab", 40}, {"d_model", 8}};
  const Shape xt{{"vocab", 40}, {"batch", 2}, {"length", 16}}, s{{"batch", 2}, {"vocab", 40}};
  const std::vector<std::array<Shape, 3>> cases{
      {x, w, h},                                                 // in place
      {x, h, dw},                                                // in place, transposed
      {xt, {{"batch", 2}, {"d_model", 8}, {"length", 16}}, dw},  // a transposed copy of b
      {x, w, {{"length", 16}, {"d_model", 8}}},                  // batch summed first in a
      {x, {{"batch", 2}, {"length", 16}, {"vocab", 40}}, x},     // elementwise
      {x, s, x}};                                                // broadcast multiply
  for (const auto path : paths) {
    Bf16PathScope scope(path);
    for (size_t c = 0; c < cases.size(); ++c) {
      const auto& [as, bs, os] = cases[c];
      for (const bool second : {false, true}) {
        SCOPED_TRACE(k::bf16_gemm_description() + ": " + as.to_string() + " x " + bs.to_string() +
                     " -> " + os.to_string() + (second ? ", b as bits" : ", a as bits"));
        const Shape& gone_shape = second ? bs : as;
        const auto a = random_values(as.num_elements(), 5), b = random_values(bs.num_elements(), 6);
        const auto values = rounded_bf16(second ? b : a);  // what the copy holds
        // Reference: the operand given as its bf16 values.
        const auto av = to_view<float>(second ? a : values),
                   bv = to_view<float>(second ? values : b);
        const auto want = to_vector(k::einsum(space, as, av, bs, bv, os, mtk::Precision::bfloat16));
        // The operand's buffer holds NaN now; only its kept copy holds the values.
        std::vector<double> nan(static_cast<size_t>(gone_shape.num_elements()),
                                std::numeric_limits<double>::quiet_NaN());
        const auto gone = to_view<float>(nan);
        const auto n = static_cast<std::int64_t>(gone.extent(0));
        Kokkos::View<std::uint16_t*> bits("bits", gone.extent(0));
        const auto value_view = to_view<float>(values);
        k::convert_to_bfloat16_bits(space, "bits", value_view.data(), bits.data(), n);
        space.fence();
        k::Bf16Copies copies;
        copies.keep(gone.data(), n, bits, true);
        EXPECT_TRUE(copies.values_gone(gone.data(), n));
        EXPECT_EQ(copies.bytes(), 0) << "bits in their source's storage are not held twice";
        const k::Bf16Reuse reuse{&copies, false, false};
        const auto got = to_vector(k::einsum(space, as, second ? to_view<float>(a) : gone, bs,
                                             second ? gone : to_view<float>(b), os,
                                             mtk::Precision::bfloat16, &reuse));
        EXPECT_EQ(got, want);
        // oneDNN's bf16 matmul read the copy itself where the operand lies in place.
        if (path == k::Bf16Gemm::onednn && k::bf16_copies_used() &&
            (c < 2 || (c == 2 && !second))) {
          EXPECT_EQ(copies.hits(), 1);
        }
      }
    }
  }
}

// The GPU BLAS's bf16 matmul (cuBLAS, rocBLAS; GPU builds): the same contract as every other path;
// elsewhere asking for it is a clear error.
TEST(EinsumBf16, GpuBlasMatchesReference) {
  try {
    k::set_bf16_gemm(k::Bf16Gemm::gpu_blas);
  } catch (const mtk::Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuBLAS"), std::string::npos) << e.what();
    k::set_bf16_gemm(k::Bf16Gemm::automatic);
    GTEST_SKIP() << e.what();
  }
  Bf16PathScope scope(k::Bf16Gemm::gpu_blas);
  EXPECT_EQ(k::bf16_gemm(), k::Bf16Gemm::gpu_blas);
  EXPECT_FALSE(k::bf16_gemm_is_emulated());
  EXPECT_FALSE(k::bf16_copies_used());
  EXPECT_NE(k::bf16_gemm_description().find(mtk::kernels::impl::gpu_blas_vendor()),
            std::string::npos)
      << k::bf16_gemm_description();
  std::printf("bf16 path: %s\n", k::bf16_gemm_description().c_str());
  bf16_cases();
}

TEST(EinsumBf16, AutomaticPathSaysWhatItDoes) {
  Bf16PathScope scope(k::Bf16Gemm::automatic);
  const std::string d = k::bf16_gemm_description();
  std::printf("bf16 path (automatic): %s\n", d.c_str());
  // Set by the ctest that holds oneDNN to AVX2: the forced non-native path must be the one taken
  // (on the host: a GPU build multiplies on the tensor cores whatever the CPU has).
  const char* expect = std::getenv("MTK_TEST_EXPECT_NATIVE_BF16");
  if (expect && std::string(expect) == "0" && k::bf16_gemm() != k::Bf16Gemm::gpu_blas) {
    EXPECT_EQ(k::bf16_gemm(), k::Bf16Gemm::emulate) << d;
    EXPECT_TRUE(k::bf16_gemm_is_emulated()) << d;
  }
  if (k::bf16_gemm() == k::Bf16Gemm::emulate) {
    EXPECT_NE(d.find("slower than fp32"), std::string::npos) << d;
  } else {
    EXPECT_FALSE(k::bf16_gemm_is_emulated()) << d;
  }
  // float32 stays float32 whatever the bf16 path.
  check_einsum({{"i", 5}, {"j", 7}}, {{"j", 7}, {"k", 3}}, {{"i", 5}, {"k", 3}});
}

TEST(Einsum, SingleOperandSumsAndReorders) {
  const Shape a{{"i", 3}, {"j", 4}, {"k", 5}};
  const auto x = random_values(a.num_elements(), 3);
  for (const Shape& out :
       {Shape{{"k", 5}, {"i", 3}}, Shape{{"j", 4}}, Shape{}, Shape{{"k", 5}, {"j", 4}, {"i", 3}},
        Shape{{"i", 3}, {"j", 4}, {"k", 5}}}) {
    SCOPED_TRACE(out.to_string());
    std::vector<double> ref(static_cast<size_t>(out.num_elements()), 0.0);
    for_each_index(a.dims(), [&](const Index& idx) {
      ref[static_cast<size_t>(offset_of(out, idx))] += x[static_cast<size_t>(offset_of(a, idx))];
    });
    EXPECT_LE(rel_error(to_vector(k::einsum(mtk::ExecSpace(), a, to_view<float>(x), out)), ref),
              1e-6);
  }
}

TEST(Einsum, Macs) {
  EXPECT_EQ(k::einsum_macs({{"i", 3}, {"j", 4}}, {{"j", 4}, {"k", 5}}, {{"i", 3}, {"k", 5}}), 60);
  EXPECT_EQ(k::einsum_macs({{"b", 2}, {"i", 3}}, {{"b", 2}, {"i", 3}}, {{"b", 2}}), 6);
  EXPECT_EQ(k::einsum_macs({{"i", 3}}, {{"k", 5}}, {{"k", 5}, {"i", 3}}), 15);
}

TEST(Einsum, Errors) {
  const Shape a{{"i", 3}, {"j", 4}}, b{{"j", 5}, {"k", 2}};
  const auto av = to_view<float>(random_values(12, 1)), bv = to_view<float>(random_values(10, 2));
  expect_error(
      [&] {
        k::einsum(mtk::ExecSpace(), a, av, b, bv, {{"i", 3}, {"k", 2}});
      },
      {"mtk::kernels::einsum", "'j'", "[i=3, j=4]", "[j=5, k=2]"});
  const Shape b2{{"j", 4}, {"k", 2}};
  const auto b2v = to_view<float>(random_values(8, 2));
  expect_error(
      [&] {
        k::einsum(mtk::ExecSpace(), a, av, b2, b2v, {{"i", 3}, {"z", 2}});
      },
      {"mtk::kernels::einsum", "'z'", "[i=3, z=2]"});
  expect_error(
      [&] {
        k::einsum(mtk::ExecSpace(), a, av, b2, b2v, {{"i", 3}, {"k", 7}});
      },
      {"mtk::kernels::einsum", "'k'", "[i=3, k=7]"});
  expect_error(
      [&] {
        k::einsum(mtk::ExecSpace(), a, bv, b2, b2v, {{"i", 3}, {"k", 2}});
      },
      {"mtk::kernels::einsum", "10 elements", "[i=3, j=4]"});
  expect_error(
      [&] {
        k::einsum(mtk::ExecSpace(), a, av, {{"q", 3}});
      },
      {"mtk::kernels::einsum", "'q'"});
  expect_error([&] { k::einsum_macs(a, b, {{"i", 3}}); }, {"mtk::kernels::einsum_macs", "'j'"});
}

}  // namespace
