// Contract tests of the reduction, contraction and indexing kernels (mtk_kernels.hpp) against naive
// host loops in double precision.
#include <mtk/base/error.hpp>
#include <mtk/kernels/kernels.hpp>

#include <KokkosKernels_config.h>
#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>

#include "kernel_test_util.hpp"
#include "mtk_test_util.hpp"
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using mtk::Dimension;
using mtk::ReduceFn;
using mtk::Shape;
using mtk::test::to_vector;
using mtk::test::to_view;
namespace k = mtk::kernels;
using Index = std::map<std::string, std::int64_t>;

std::vector<double> random_values(std::int64_t n, unsigned seed, double lo = -1.0,
                                  double hi = 1.0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v)
    x = static_cast<double>(static_cast<float>(dist(gen)));
  return v;
}

std::vector<double> random_ids(std::int64_t n, unsigned seed, int lo, int hi) {
  return mtk::test::random_ints(n, lo, hi, seed);
}

std::int64_t offset_of(const Shape& s, const Index& idx) {
  std::int64_t f = 0;
  for (const auto& d : s.dims())
    f = f * d.size + idx.at(d.name);
  return f;
}

// Calls f(index) for every multi-index over `dims` (none when a size is 0).
void for_each_index(const std::vector<Dimension>& dims,
                    const std::function<void(const Index&)>& f) {
  for (const auto& d : dims)
    if (d.size == 0)
      return;
  Index idx;
  for (const auto& d : dims)
    idx[d.name] = 0;
  while (true) {
    f(idx);
    int i = static_cast<int>(dims.size()) - 1;
    for (; i >= 0; --i) {
      auto& c = idx[dims[static_cast<size_t>(i)].name];
      if (++c < dims[static_cast<size_t>(i)].size)
        break;
      c = 0;
    }
    if (i < 0)
      return;
  }
}

std::vector<Dimension> union_dims(const std::vector<const Shape*>& shapes) {
  std::vector<Dimension> dims;
  std::set<std::string> seen;
  for (const Shape* s : shapes)
    for (const auto& d : s->dims())
      if (seen.insert(d.name).second)
        dims.push_back(d);
  return dims;
}

std::vector<double> ref_einsum(const Shape& as, const std::vector<double>& a, const Shape& bs,
                               const std::vector<double>& b, const Shape& os) {
  std::vector<double> out(static_cast<size_t>(os.num_elements()), 0.0);
  for_each_index(union_dims({&as, &bs, &os}), [&](const Index& idx) {
    out[static_cast<size_t>(offset_of(os, idx))] +=
        a[static_cast<size_t>(offset_of(as, idx))] * b[static_cast<size_t>(offset_of(bs, idx))];
  });
  return out;
}

// max |x - ref| / max |ref| (absolute when ref is all zeros).
double rel_error(const std::vector<double>& x, const std::vector<double>& ref) {
  EXPECT_EQ(x.size(), ref.size());
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < std::min(x.size(), ref.size()); ++i) {
    num = std::max(num, std::abs(x[i] - ref[i]));
    den = std::max(den, std::abs(ref[i]));
  }
  return den > 0 ? num / den : num;
}

void check_einsum(const Shape& as, const Shape& bs, const Shape& os, unsigned seed = 1) {
  SCOPED_TRACE(as.to_string() + " x " + bs.to_string() + " -> " + os.to_string());
  const auto a = random_values(as.num_elements(), seed);
  const auto b = random_values(bs.num_elements(), seed + 100);
  const auto out = k::einsum(mtk::ExecSpace(), as, to_view<float>(a), bs, to_view<float>(b), os);
  ASSERT_EQ(static_cast<std::int64_t>(out.extent(0)), os.num_elements());
  EXPECT_LE(rel_error(to_vector(out), ref_einsum(as, a, bs, b, os)), 1e-5);
}

template <class F>
void expect_error(F&& f, const std::vector<std::string>& fragments) {
  try {
    f();
    ADD_FAILURE() << "expected mtk::Error";
  } catch (const mtk::Error& e) {
    const std::string what = e.what();
    for (const auto& frag : fragments)
      EXPECT_NE(what.find(frag), std::string::npos) << "'" << what << "' lacks '" << frag << "'";
  }
}

// Records Kokkos region names and kernel labels while alive.
struct Recorder {
  static std::vector<std::string>& regions() {
    static std::vector<std::string> r;
    return r;
  }
  static std::vector<std::string>& kernels() {
    static std::vector<std::string> r;
    return r;
  }
  Recorder() {
    regions().clear();
    kernels().clear();
    Kokkos::Tools::Experimental::set_push_region_callback(
        [](const char* name) { regions().emplace_back(name); });
    Kokkos::Tools::Experimental::set_begin_parallel_for_callback(
        [](const char* name, std::uint32_t, std::uint64_t*) { kernels().emplace_back(name); });
    Kokkos::Tools::Experimental::set_begin_parallel_reduce_callback(
        [](const char* name, std::uint32_t, std::uint64_t*) { kernels().emplace_back(name); });
  }
  ~Recorder() {
    Kokkos::Tools::Experimental::set_push_region_callback(nullptr);
    Kokkos::Tools::Experimental::set_begin_parallel_for_callback(nullptr);
    Kokkos::Tools::Experimental::set_begin_parallel_reduce_callback(nullptr);
  }
  static bool saw_region(const std::string& s) {
    return std::find(regions().begin(), regions().end(), s) != regions().end();
  }
  static bool all_kernels_start_with(const std::string& prefix) {
    for (const auto& n : kernels())
      if (n.rfind(prefix, 0) != 0 && n.rfind("Kokkos::", 0) != 0)
        return false;
    return true;
  }
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
  if (!std::is_same_v<Kokkos::DefaultExecutionSpace::memory_space, Kokkos::HostSpace>)
    GTEST_SKIP() << "host BLAS only applies to host memory";
  Recorder rec;
  check_einsum({{"b", 2}, {"i", 8}, {"j", 8}}, {{"b", 2}, {"k", 8}, {"j", 8}},
               {{"b", 2}, {"k", 8}, {"i", 8}});
  EXPECT_TRUE(Recorder::saw_region("KokkosBlas::gemm[TPL_BLAS,float]"));
  EXPECT_TRUE(Recorder::saw_region("mtk::kernels::einsum"));
  EXPECT_TRUE(Recorder::all_kernels_start_with("mtk::kernels::"));
#else
  GTEST_SKIP() << "Kokkos Kernels built without a BLAS TPL";
#endif
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
      EXPECT_EQ(name.rfind("mtk::kernels::", 0), std::string::npos)
          << c[0].to_string() << " x " << c[1].to_string() << " -> " << c[2].to_string() << " ran "
          << name;
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

// bf16 einsum against the double reference of the bf16-rounded operands: only float32 summation
// error remains (bf16 x bf16 products are exact in float32). Also checks that rounding happened:
// the result is measurably away from the float32 reference.
void check_einsum_bf16(const Shape& as, const Shape& bs, const Shape& os, unsigned seed = 1) {
  SCOPED_TRACE(as.to_string() + " x " + bs.to_string() + " -> " + os.to_string());
  const auto a = random_values(as.num_elements(), seed);
  const auto b = random_values(bs.num_elements(), seed + 100);
  const auto out = to_vector(k::einsum(mtk::ExecSpace(), as, to_view<float>(a), bs,
                                       to_view<float>(b), os, mtk::Precision::bfloat16));
  ASSERT_EQ(static_cast<std::int64_t>(out.size()), os.num_elements());
  EXPECT_LE(rel_error(out, ref_einsum(as, rounded_bf16(a), bs, rounded_bf16(b), os)), 1e-5);
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

TEST(EinsumBf16, AutomaticPathSaysWhatItDoes) {
  Bf16PathScope scope(k::Bf16Gemm::automatic);
  const std::string d = k::bf16_gemm_description();
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

// ---------------------------------------------------------------- reduce

template <class T>
void check_reduce_all(ReduceFn fn, const Shape& in, const std::vector<double>& x) {
  // Every subset of dims, in in-order and in reversed order.
  const int r = in.rank();
  for (int mask = 0; mask < (1 << r); ++mask) {
    std::vector<Dimension> kept;
    for (int i = 0; i < r; ++i)
      if (mask & (1 << i))
        kept.push_back(in[i]);
    for (int rev = 0; rev < 2; ++rev) {
      if (rev)
        std::reverse(kept.begin(), kept.end());
      const Shape out(kept);
      SCOPED_TRACE(std::string(mtk::reduce_name(fn)) + " " + in.to_string() + " -> " +
                   out.to_string());
      const double init = fn == ReduceFn::sum   ? 0.0
                          : fn == ReduceFn::max ? -std::numeric_limits<double>::infinity()
                                                : std::numeric_limits<double>::infinity();
      std::vector<double> ref(static_cast<size_t>(out.num_elements()), init);
      for_each_index(in.dims(), [&](const Index& idx) {
        double& o = ref[static_cast<size_t>(offset_of(out, idx))];
        const double v = x[static_cast<size_t>(offset_of(in, idx))];
        o = fn == ReduceFn::sum ? o + v : fn == ReduceFn::max ? std::max(o, v) : std::min(o, v);
      });
      const auto got = to_vector(k::reduce<T>(mtk::ExecSpace(), fn, in, to_view<T>(x), out));
      if (fn == ReduceFn::sum && std::is_floating_point_v<T>) {
        EXPECT_LE(rel_error(got, ref), 1e-6);
      } else {
        EXPECT_EQ(got, ref);
      }
    }
  }
}

TEST(Reduce, EverySubsetOfDimsEveryFunction) {
  const Shape in{{"a", 3}, {"b", 4}, {"c", 5}, {"d", 2}};
  const auto x = random_values(in.num_elements(), 11);
  for (ReduceFn fn : {ReduceFn::sum, ReduceFn::max, ReduceFn::min})
    check_reduce_all<float>(fn, in, x);
  const auto ids = random_ids(in.num_elements(), 12, -50, 50);
  for (ReduceFn fn : {ReduceFn::sum, ReduceFn::max, ReduceFn::min})
    check_reduce_all<std::int32_t>(fn, in, ids);
}

TEST(Reduce, SizeOneDimsAndPermutations) {
  const Shape in{{"a", 1}, {"b", 4}, {"c", 1}, {"d", 3}, {"e", 2}};
  const auto x = random_values(in.num_elements(), 13);
  for (ReduceFn fn : {ReduceFn::sum, ReduceFn::max})
    check_reduce_all<float>(fn, in, x);
}

TEST(Reduce, HighRankCollapsesNeighbouringDims) {
  // Rank 10 exceeds the kernels' index rank, but neighbouring dims that stay neighbours merge.
  std::vector<Dimension> dims;
  for (int i = 0; i < 10; ++i)
    dims.push_back({"d" + std::to_string(i), 2});
  const Shape in(dims);
  const auto x = random_values(in.num_elements(), 15);
  for (const Shape& out : {Shape(std::vector<Dimension>(dims.begin() + 3, dims.end())),
                           Shape(std::vector<Dimension>(dims.begin(), dims.begin() + 4)),
                           Shape{dims[5], dims[6], dims[0], dims[1], dims[2]}}) {
    SCOPED_TRACE(out.to_string());
    std::vector<double> ref(static_cast<size_t>(out.num_elements()), 0.0);
    for_each_index(in.dims(), [&](const Index& idx) {
      ref[static_cast<size_t>(offset_of(out, idx))] += x[static_cast<size_t>(offset_of(in, idx))];
    });
    EXPECT_LE(rel_error(to_vector(k::reduce<float>(mtk::ExecSpace(), ReduceFn::sum, in,
                                                   to_view<float>(x), out)),
                        ref),
              1e-6);
  }
}

TEST(Reduce, EmptyDims) {
  const Shape in{{"a", 3}, {"b", 0}};
  const auto empty = to_view<float>({});
  EXPECT_EQ(to_vector(k::reduce<float>(mtk::ExecSpace(), ReduceFn::sum, in, empty, {{"a", 3}})),
            std::vector<double>(3, 0.0));
  EXPECT_EQ(to_vector(k::reduce<float>(mtk::ExecSpace(), ReduceFn::max, in, empty, {{"a", 3}})),
            std::vector<double>(3, -std::numeric_limits<double>::infinity()));
  EXPECT_EQ(k::reduce<float>(mtk::ExecSpace(), ReduceFn::sum, in, empty, {{"b", 0}}).extent(0), 0u);
}

TEST(Reduce, LargeFullSum) {
  const Shape in{{"a", 1000}, {"b", 300}};
  const auto x = random_values(in.num_elements(), 14, 0.0, 1.0);
  double ref = 0;
  for (double v : x)
    ref += v;
  EXPECT_LE(rel_error(to_vector(k::reduce<float>(mtk::ExecSpace(), ReduceFn::sum, in,
                                                 to_view<float>(x), Shape{})),
                      {ref}),
            1e-6);
}

TEST(Reduce, Errors) {
  const Shape in{{"a", 3}, {"b", 4}};
  const auto x = to_view<float>(random_values(12, 1));
  expect_error(
      [&] {
        k::reduce<float>(mtk::ExecSpace(), ReduceFn::sum, in, x, {{"c", 3}});
      },
      {"mtk::kernels::reduce", "'c'", "[c=3]", "[a=3, b=4]"});
  expect_error(
      [&] {
        k::reduce<float>(mtk::ExecSpace(), ReduceFn::sum, in, x, {{"a", 2}});
      },
      {"mtk::kernels::reduce", "'a'", "[a=2]", "[a=3, b=4]"});
  expect_error(
      [&] {
        k::reduce<float>(mtk::ExecSpace(), ReduceFn::sum, {{"a", 5}}, x, Shape{});
      },
      {"mtk::kernels::reduce", "12 elements", "[a=5]"});
}

// ---------------------------------------------------------------- softmax

// mtk::Around with the offset of element i of row `row`.
struct Around : mtk::Around {
  using mtk::Around::Around;
  size_t at(std::int64_t row, std::int64_t i) const {
    return static_cast<size_t>((row / inner) * n * inner + row % inner + i * inner);
  }
  std::int64_t rows() const { return outer * inner; }
};

std::vector<double> ref_softmax(const Shape& s, const std::vector<double>& x, int dim, bool log) {
  const Around a(s, dim);
  std::vector<double> y(x.size());
  for (std::int64_t r = 0; r < a.rows(); ++r) {
    double m = -std::numeric_limits<double>::infinity(), sum = 0;
    for (std::int64_t i = 0; i < a.n; ++i)
      m = std::max(m, x[a.at(r, i)]);
    for (std::int64_t i = 0; i < a.n; ++i)
      sum += std::exp(x[a.at(r, i)] - m);
    for (std::int64_t i = 0; i < a.n; ++i)
      y[a.at(r, i)] = log ? x[a.at(r, i)] - m - std::log(sum) : std::exp(x[a.at(r, i)] - m) / sum;
  }
  return y;
}

TEST(Softmax, MatchesReferenceAlongEveryDim) {
  const Shape s{{"a", 3}, {"b", 7}, {"c", 4}};
  for (double scale : {1.0, 100.0}) {  // 100: exp would overflow without the max shift
    auto x = random_values(s.num_elements(), 21);
    for (auto& v : x)
      v *= scale;
    for (int dim = 0; dim < 3; ++dim)
      for (bool log : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "dim " << dim << " log " << log << " scale " << scale);
        const auto got = to_vector(k::softmax(mtk::ExecSpace(), s, to_view<float>(x), dim, log));
        const auto ref = ref_softmax(s, x, dim, log);
        for (size_t i = 0; i < ref.size(); ++i) {
          ASSERT_TRUE(std::isfinite(got[i]));
          EXPECT_NEAR(got[i], ref[i], 1e-5 * std::max(1.0, std::abs(ref[i])));
        }
      }
  }
}

TEST(Softmax, LongRows) {
  const Shape s{{"rows", 3}, {"vocab", 5000}};
  const auto x = random_values(s.num_elements(), 22, -20, 20);
  for (bool log : {false, true}) {
    const auto got = to_vector(k::softmax(mtk::ExecSpace(), s, to_view<float>(x), 1, log));
    const auto ref = ref_softmax(s, x, 1, log);
    for (size_t i = 0; i < ref.size(); ++i)
      EXPECT_NEAR(got[i], ref[i], log ? 1e-4 : 1e-5 * std::max(1e-3, ref[i]));
  }
}

TEST(Softmax, GradientMatchesFiniteDifferences) {
  // L(x) = sum(w * f(x)) with f = softmax or log-softmax along dim; dL/dx = softmax_grad(y, w).
  const Shape s{{"a", 2}, {"b", 5}, {"c", 3}};
  const auto x = random_values(s.num_elements(), 31, -2, 2);
  const auto w = random_values(s.num_elements(), 32);
  for (int dim = 0; dim < 3; ++dim)
    for (bool log : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "dim " << dim << " log " << log);
      const auto y = k::softmax(mtk::ExecSpace(), s, to_view<float>(x), dim, log);
      const auto dx =
          to_vector(k::softmax_grad(mtk::ExecSpace(), s, y, to_view<float>(w), dim, log));
      auto loss = [&](const std::vector<double>& xx) {
        const auto f = ref_softmax(s, xx, dim, log);
        double l = 0;
        for (size_t i = 0; i < f.size(); ++i)
          l += w[i] * f[i];
        return l;
      };
      const double h = 1e-5;
      for (size_t i = 0; i < x.size(); ++i) {
        auto xp = x, xm = x;
        xp[i] += h;
        xm[i] -= h;
        EXPECT_NEAR(dx[i], (loss(xp) - loss(xm)) / (2 * h), 2e-5) << "element " << i;
      }
    }
}

TEST(Softmax, LabelsAndErrors) {
  const Shape s{{"a", 2}, {"b", 3}};
  const auto x = to_view<float>(random_values(6, 1));
  {
    Recorder rec;
    k::softmax(mtk::ExecSpace(), s, x, 1, false);
    k::softmax(mtk::ExecSpace(), s, x, 0, true);
    k::softmax_grad(mtk::ExecSpace(), s, x, x, 1, false);
    EXPECT_TRUE(std::count(Recorder::kernels().begin(), Recorder::kernels().end(),
                           "mtk::kernels::softmax") >= 1);
    EXPECT_TRUE(std::count(Recorder::kernels().begin(), Recorder::kernels().end(),
                           "mtk::kernels::log_softmax") >= 1);
    EXPECT_TRUE(Recorder::all_kernels_start_with("mtk::kernels::"));
  }
  expect_error([&] { k::softmax(mtk::ExecSpace(), s, x, 2, false); },
               {"mtk::kernels::softmax", "[a=2, b=3]"});
  expect_error([&] { k::softmax(mtk::ExecSpace(), s, x, -1, true); },
               {"mtk::kernels::softmax", "[a=2, b=3]"});
  expect_error(
      [&] {
        k::softmax(mtk::ExecSpace(), {{"a", 4}}, x, 0, false);
      },
      {"mtk::kernels::softmax", "6 elements", "[a=4]"});
  expect_error(
      [&] {
        k::softmax_grad(mtk::ExecSpace(), s, x, to_view<float>({1, 2}), 0, false);
      },
      {"mtk::kernels::softmax_grad", "2 elements", "[a=2, b=3]"});
}

// ---------------------------------------------------------------- cumsum, top_1

TEST(Cumsum, InclusiveAndExclusiveAlongEveryDim) {
  const Shape s{{"a", 3}, {"b", 4}, {"c", 5}};
  const auto x = random_values(s.num_elements(), 41);
  for (int dim = 0; dim < 3; ++dim)
    for (bool exclusive : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "dim " << dim << " exclusive " << exclusive);
      const Around a(s, dim);
      std::vector<double> ref(x.size());
      for (std::int64_t r = 0; r < a.rows(); ++r) {
        double acc = 0;
        for (std::int64_t i = 0; i < a.n; ++i) {
          if (!exclusive)
            acc += x[a.at(r, i)];
          ref[a.at(r, i)] = acc;
          if (exclusive)
            acc += x[a.at(r, i)];
        }
      }
      const auto got = to_vector(k::cumsum(mtk::ExecSpace(), s, to_view<float>(x), dim, exclusive));
      for (size_t i = 0; i < ref.size(); ++i)
        EXPECT_NEAR(got[i], ref[i], 1e-6);
    }
  expect_error([&] { k::cumsum(mtk::ExecSpace(), s, to_view<float>(x), -1, false); },
               {"mtk::kernels::cumsum"});
}

TEST(Top1, MaxAndFirstPosition) {
  const Shape s{{"a", 3}, {"b", 4}, {"c", 5}};
  auto x = random_ids(s.num_elements(), 51, 0, 3);  // many ties
  for (int dim = 0; dim < 3; ++dim) {
    SCOPED_TRACE(::testing::Message() << "dim " << dim);
    const Around a(s, dim);
    k::FView values;
    k::IView indices;
    k::top_1(mtk::ExecSpace(), s, to_view<float>(x), dim, values, indices);
    const auto v = to_vector(values), ix = to_vector(indices);
    ASSERT_EQ(static_cast<std::int64_t>(v.size()), a.rows());
    for (std::int64_t r = 0; r < a.rows(); ++r) {
      std::int64_t best = 0;
      for (std::int64_t i = 1; i < a.n; ++i)
        if (x[a.at(r, i)] > x[a.at(r, best)])
          best = i;
      EXPECT_EQ(v[static_cast<size_t>(r)], x[a.at(r, best)]);
      EXPECT_EQ(ix[static_cast<size_t>(r)], best);
    }
  }
}

// ---------------------------------------------------------------- indexing

TEST(OneHot, WithOrigin) {
  const Shape ids_shape{{"b", 3}, {"l", 4}};
  const auto ids = random_ids(ids_shape.num_elements(), 61, -1, 12);
  const std::int64_t origin = 5;
  for (int dim = 0; dim < 3; ++dim) {
    std::vector<Dimension> dims = ids_shape.dims();
    dims.insert(dims.begin() + dim, Dimension{"vocab", 4});
    const Shape out(dims);
    SCOPED_TRACE(out.to_string());
    const auto got = to_vector(k::one_hot(mtk::ExecSpace(), ids_shape, to_view<std::int32_t>(ids),
                                          out, dim, origin, 2.f, -1.f));
    std::vector<double> ref(static_cast<size_t>(out.num_elements()));
    for_each_index(out.dims(), [&](const Index& idx) {
      const double id = ids[static_cast<size_t>(offset_of(ids_shape, idx))];
      ref[static_cast<size_t>(offset_of(out, idx))] = id == origin + idx.at("vocab") ? 2.0 : -1.0;
    });
    EXPECT_EQ(got, ref);
  }
  expect_error(
      [&] {
        k::one_hot(mtk::ExecSpace(), ids_shape, to_view<std::int32_t>(ids), {{"b", 3}, {"v", 2}}, 1,
                   0, 1.f, 0.f);
      },
      {"mtk::kernels::one_hot", "[b=3, l=4]", "[b=3, v=2]"});
}

TEST(Gather, WithOriginAndOddOutputOrder) {
  const Shape ids_shape{{"b", 2}, {"l", 5}};
  const auto ids = random_ids(ids_shape.num_elements(), 71, 0, 12);
  const std::int64_t origin = 4;  // this slice holds vocab ids [4, 10)
  for (int table_dim = 0; table_dim < 2; ++table_dim) {
    const Shape table_shape =
        table_dim == 0 ? Shape{{"vocab", 6}, {"d", 3}} : Shape{{"d", 3}, {"vocab", 6}};
    const auto table = random_values(table_shape.num_elements(), 72);
    for (const Shape& out :
         {Shape{{"b", 2}, {"l", 5}, {"d", 3}}, Shape{{"d", 3}, {"l", 5}, {"b", 2}},
          Shape{{"l", 5}, {"d", 3}, {"b", 2}}}) {
      SCOPED_TRACE(table_shape.to_string() + " -> " + out.to_string());
      const auto got =
          to_vector(k::gather(mtk::ExecSpace(), table_shape, to_view<float>(table), table_dim,
                              origin, ids_shape, to_view<std::int32_t>(ids), out));
      std::vector<double> ref(static_cast<size_t>(out.num_elements()), 0.0);
      for_each_index(out.dims(), [&](const Index& idx) {
        const auto id =
            static_cast<std::int64_t>(ids[static_cast<size_t>(offset_of(ids_shape, idx))]);
        if (id < origin || id >= origin + 6)
          return;
        Index t = idx;
        t["vocab"] = id - origin;
        ref[static_cast<size_t>(offset_of(out, idx))] =
            table[static_cast<size_t>(offset_of(table_shape, t))];
      });
      EXPECT_EQ(got, ref);
    }
  }
}

TEST(ScatterAdd, WithOriginAccumulatesDuplicates) {
  const Shape ids_shape{{"b", 3}, {"l", 7}};
  const auto ids = random_ids(ids_shape.num_elements(), 81, 0, 9);  // many duplicates
  const std::int64_t origin = 3;
  for (int table_dim = 0; table_dim < 2; ++table_dim) {
    const Shape table_shape =
        table_dim == 0 ? Shape{{"vocab", 4}, {"d", 2}} : Shape{{"d", 2}, {"vocab", 4}};
    for (const Shape& upd :
         {Shape{{"b", 3}, {"l", 7}, {"d", 2}}, Shape{{"d", 2}, {"l", 7}, {"b", 3}}}) {
      SCOPED_TRACE(table_shape.to_string() + " <- " + upd.to_string());
      const auto u = random_values(upd.num_elements(), 82);
      const auto got =
          to_vector(k::scatter_add(mtk::ExecSpace(), ids_shape, to_view<std::int32_t>(ids), upd,
                                   to_view<float>(u), table_shape, table_dim, origin));
      std::vector<double> ref(static_cast<size_t>(table_shape.num_elements()), 0.0);
      for_each_index(upd.dims(), [&](const Index& idx) {
        const auto id =
            static_cast<std::int64_t>(ids[static_cast<size_t>(offset_of(ids_shape, idx))]);
        if (id < origin || id >= origin + 4)
          return;
        Index t = idx;
        t["vocab"] = id - origin;
        ref[static_cast<size_t>(offset_of(table_shape, t))] +=
            u[static_cast<size_t>(offset_of(upd, idx))];
      });
      EXPECT_LE(rel_error(got, ref), 1e-6);
    }
  }
}

// scatter_add sums each table element's contributions in the updates' element order, from 0, in
// float: bitwise what a serial loop gives, on any backend and thread count (issue 15, item 6: with
// float atomics a threaded backend added in thread order). Values of very different magnitudes
// make any other order round differently; a few ids take most positions.
std::vector<float> sequential_scatter_add(const Shape& ids_shape, const std::vector<double>& ids,
                                          const Shape& upd, const std::vector<double>& u,
                                          const Shape& table_shape, std::int64_t origin,
                                          std::int64_t id_size) {
  std::vector<float> ref(static_cast<size_t>(table_shape.num_elements()), 0.f);
  for_each_index(upd.dims(), [&](const Index& idx) {  // row-major over upd: its element order
    const auto id = static_cast<std::int64_t>(ids[static_cast<size_t>(offset_of(ids_shape, idx))]);
    if (id < origin || id >= origin + id_size)
      return;
    Index t = idx;
    t["vocab"] = id - origin;
    ref[static_cast<size_t>(offset_of(table_shape, t))] +=
        static_cast<float>(u[static_cast<size_t>(offset_of(upd, idx))]);
  });
  return ref;
}

std::vector<double> adversarial_values(std::int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> exponent(-24, 24), sign(0, 1);
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v)
    x = static_cast<double>(
        static_cast<float>((sign(gen) ? -1 : 1) * mant(gen) * std::ldexp(1.0, exponent(gen))));
  return v;
}

std::vector<double> skewed_ids(std::int64_t n, unsigned seed, int vocab) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> any(-2, vocab + 1), coin(0, 3);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v)
    x = coin(gen) == 0 ? any(gen) : coin(gen) % 2;  // 3/4 of them are id 0 or 1
  return v;
}

TEST(ScatterAdd, SumsEachRowInUpdateOrderBitwise) {
  const std::int64_t origin = 1, id_size = 6;
  const Shape ids_shape{{"b", 5}, {"l", 9}};
  const auto ids = skewed_ids(ids_shape.num_elements(), 7, 8);
  for (int table_dim = 0; table_dim < 2; ++table_dim) {
    const Shape table_shape =
        table_dim == 0 ? Shape{{"vocab", id_size}, {"d", 3}} : Shape{{"d", 3}, {"vocab", id_size}};
    for (const Shape& upd :
         {Shape{{"b", 5}, {"l", 9}, {"d", 3}}, Shape{{"d", 3}, {"l", 9}, {"b", 5}},
          Shape{{"l", 9}, {"d", 3}, {"b", 5}}}) {
      SCOPED_TRACE(table_shape.to_string() + " <- " + upd.to_string());
      const auto u = adversarial_values(upd.num_elements(), 11);
      const auto got =
          to_vector(k::scatter_add(mtk::ExecSpace(), ids_shape, to_view<std::int32_t>(ids), upd,
                                   to_view<float>(u), table_shape, table_dim, origin));
      const auto ref = sequential_scatter_add(ids_shape, ids, upd, u, table_shape, origin, id_size);
      ASSERT_EQ(got.size(), ref.size());
      for (size_t i = 0; i < ref.size(); ++i)
        EXPECT_EQ(static_cast<float>(got[i]), ref[i]) << "table element " << i;
    }
  }
}

// Large enough for every thread of a threaded backend to take part; repeated, every run must
// equal the serial sum bitwise (15 of 30 embedding-gradient repeats differed with 2 OpenMP
// threads and float atomics). On a serial backend one run checks the order.
TEST(ScatterAdd, RepeatedRunsEqualTheSerialSumBitwise) {
  const std::int64_t vocab = 40;
  const Shape ids_shape{{"b", 16}, {"l", 128}};
  const Shape table_shape{{"vocab", vocab}, {"d", 32}};
  const Shape upd{{"b", 16}, {"l", 128}, {"d", 32}};
  const auto ids = skewed_ids(ids_shape.num_elements(), 3, static_cast<int>(vocab) - 1);
  const auto u = adversarial_values(upd.num_elements(), 5);
  const auto ref = sequential_scatter_add(ids_shape, ids, upd, u, table_shape, 0, vocab);
  const auto idv = to_view<std::int32_t>(ids);
  const auto uv = to_view<float>(u);
  const int repeats = mtk::ExecSpace().concurrency() > 1 ? 30 : 1;
  for (int r = 0; r < repeats; ++r) {
    const auto got =
        to_vector(k::scatter_add(mtk::ExecSpace(), ids_shape, idv, upd, uv, table_shape, 0, 0));
    ASSERT_EQ(got.size(), ref.size());
    int differ = 0;
    for (size_t i = 0; i < ref.size(); ++i)
      differ += static_cast<float>(got[i]) != ref[i];
    ASSERT_EQ(differ, 0) << "run " << r << " of " << repeats << " on "
                         << mtk::ExecSpace().concurrency() << " threads";
  }
}

TEST(Indexing, Errors) {
  const Shape ids_shape{{"b", 2}};
  const auto ids = to_view<std::int32_t>({0, 1});
  const Shape table_shape{{"vocab", 4}, {"d", 3}};
  const auto table = to_view<float>(random_values(12, 1));
  expect_error(
      [&] {
        k::gather(mtk::ExecSpace(), table_shape, table, 0, 0, ids_shape, ids, {{"b", 2}});
      },
      {"mtk::kernels::gather", "'d'", "[vocab=4, d=3]", "[b=2]"});
  expect_error(
      [&] {
        k::gather(mtk::ExecSpace(), table_shape, table, 0, 0, ids_shape, ids, {{"b", 2}, {"d", 4}});
      },
      {"mtk::kernels::gather", "'d'", "[b=2, d=4]"});
  expect_error(
      [&] {
        k::gather(mtk::ExecSpace(), table_shape, table, 2, 0, ids_shape, ids, {{"b", 2}, {"d", 3}});
      },
      {"mtk::kernels::gather", "[vocab=4, d=3]"});
  expect_error(
      [&] {
        k::scatter_add(mtk::ExecSpace(), ids_shape, ids, {{"b", 2}, {"d", 3}}, table, table_shape,
                       0, 0);
      },
      {"mtk::kernels::scatter_add", "12 elements", "[b=2, d=3]"});
}

}  // namespace
