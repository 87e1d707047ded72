// float32 contractions through oneDNN's matmul with operands in place, and the automatic choice
// between it and the host BLAS (the tests in test_kernels_contract run on whichever path this CPU
// takes; ctest also runs them with MTK_FP32_GEMM=blas and =onednn forced).

#include <mtk/kernels/matmul_check.hpp>

#include "kernel_contract_util.hpp"
#include <cstdlib>
#include <random>

namespace {

using namespace mtk::test::contract;

struct Fp32PathScope {
  explicit Fp32PathScope(k::Fp32Gemm p) { k::set_fp32_gemm(p); }
  ~Fp32PathScope() { k::reset_fp32_gemm(); }
};

// True (and the oneDNN path forced) where this build and memory space can run it.
bool force_onednn() {
  if (!std::is_same_v<Kokkos::DefaultExecutionSpace::memory_space, Kokkos::HostSpace>)
    return false;
  try {
    k::set_fp32_gemm(k::Fp32Gemm::onednn);
  } catch (const mtk::Error&) {
    return false;
  }
  return true;
}

TEST(EinsumFp32, OneDnnReadsAttentionOperandsInPlace) {
  if (!force_onednn())
    GTEST_SKIP() << "no oneDNN in this build or not host memory";
  const Fp32PathScope scope(k::Fp32Gemm::onednn);
  // q, k [b, l, h, d] per (b, h) matrices with row stride h * d; logits [b, h, q, k]; forward and
  // gradients, each one matmul with no copy kernel.
  const Shape q{{"b", 2}, {"q", 5}, {"h", 3}, {"d", 4}}, kk{{"b", 2}, {"k", 6}, {"h", 3}, {"d", 4}};
  const Shape s{{"b", 2}, {"h", 3}, {"q", 5}, {"k", 6}};
  for (const auto& c : std::vector<std::vector<Shape>>{
           {q, kk, s}, {s, kk, q}, {s, q, kk}, {q, s, kk}, {kk, q, s}, {kk, s, q}}) {
    Recorder rec;
    check_einsum(c[0], c[1], c[2]);
    EXPECT_TRUE(Recorder::saw_region("mtk::kernels::einsum oneDNN matmul"))
        << c[0].to_string() << " x " << c[1].to_string() << " -> " << c[2].to_string() << " "
        << k::fp32_gemm_description();
    for (const auto& name : Recorder::kernels())
      EXPECT_EQ(name.rfind("mtk::kernels::", 0), std::string::npos)
          << c[0].to_string() << " x " << c[1].to_string() << " -> " << c[2].to_string() << " ran "
          << name;
  }
}

TEST(EinsumFp32, OneDnnMatchesReferenceOnEveryOrder) {
  if (!force_onednn())
    GTEST_SKIP() << "no oneDNN in this build or not host memory";
  const Fp32PathScope scope(k::Fp32Gemm::onednn);
  // Every memory order of a product with two-dim groups: in place, partly, or copied.
  const std::vector<Dimension> ad = {{"b1", 2}, {"m1", 3}, {"k1", 4}, {"m2", 2}, {"k2", 3}};
  const std::vector<Dimension> bd = {{"k1", 4}, {"b1", 2}, {"n", 5}, {"k2", 3}};
  const std::vector<Dimension> od = {{"b1", 2}, {"m1", 3}, {"m2", 2}, {"n", 5}};
  std::mt19937 rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    auto a = ad, b = bd, o = od;
    std::shuffle(a.begin(), a.end(), rng);
    std::shuffle(b.begin(), b.end(), rng);
    std::shuffle(o.begin(), o.end(), rng);
    check_einsum(Shape(a), Shape(b), Shape(o), static_cast<unsigned>(trial));
  }
  // Size-one dims (arbitrary strides), a transposed output, larger matrices, a batch of one.
  check_einsum({{"b", 1}, {"i", 3}, {"j", 1}}, {{"j", 1}, {"b", 1}, {"k", 2}},
               {{"k", 2}, {"i", 3}, {"b", 1}});
  check_einsum({{"i", 1}, {"j", 4}}, {{"j", 4}, {"k", 3}}, {{"k", 3}, {"i", 1}});
  check_einsum({{"k", 129}, {"m", 67}}, {{"n", 65}, {"k", 129}}, {{"n", 65}, {"m", 67}}, 8);
  check_einsum({{"m", 67}, {"k", 129}}, {{"k", 129}, {"n", 65}}, {{"m", 67}, {"n", 65}}, 7);
  const Shape x{{"batch", 2}, {"length", 16}, {"d_model", 32}}, w{{"d_model", 32}, {"d_ff", 64}};
  const Shape h{{"batch", 2}, {"length", 16}, {"d_ff", 64}};
  check_einsum(x, w, h);
  check_einsum(h, x, {{"d_model", 32}, {"d_ff", 64}});
  check_einsum(h, w, x);
  check_einsum(x, {{"vocab", 50}, {"d_model", 32}}, {{"batch", 2}, {"length", 16}, {"vocab", 50}});
}

std::vector<std::uint64_t>& copy_allocations() {
  static std::vector<std::uint64_t> sizes;
  return sizes;
}

// What the cost model charges an einsum for besides its gemm (kernels::einsum_moved_bytes) is
// what the body copies: 8 bytes (a read and a write) per element of every transposed copy it
// allocates, on the BLAS and on oneDNN, for every memory order of a product with two-dim groups.
TEST(EinsumFp32, MovedBytesAreTheCopiesItMakes) {
  if (k::host_blas_name().find("no BLAS") != std::string::npos)
    GTEST_SKIP() << "no host BLAS: the packed body copies every operand";
  const std::vector<Dimension> ad = {{"b1", 2}, {"m1", 3}, {"k1", 4}, {"m2", 2}, {"k2", 3}};
  const std::vector<Dimension> bd = {{"k1", 4}, {"b1", 2}, {"n", 5}, {"k2", 3}};
  const std::vector<Dimension> od = {{"b1", 2}, {"m1", 3}, {"m2", 2}, {"n", 5}};
  const bool onednn = force_onednn();
  k::reset_fp32_gemm();
  std::mt19937 rng(5);
  int copying = 0, in_place = 0;
  for (const k::Fp32Gemm path : {k::Fp32Gemm::blas, k::Fp32Gemm::onednn}) {
    if (path == k::Fp32Gemm::onednn && !onednn)
      continue;
    const Fp32PathScope scope(path);
    for (int trial = 0; trial < 40; ++trial) {
      auto a = ad, b = bd, o = od;
      std::shuffle(a.begin(), a.end(), rng);
      std::shuffle(b.begin(), b.end(), rng);
      std::shuffle(o.begin(), o.end(), rng);
      const Shape as(a), bs(b), os(o);
      SCOPED_TRACE(as.to_string() + " x " + bs.to_string() + " -> " + os.to_string());
      copy_allocations().clear();
      Kokkos::Tools::Experimental::set_allocate_data_callback(
          [](Kokkos::Profiling::SpaceHandle, const char* label, const void*, std::uint64_t size) {
            if (std::string(label) == "mtk::kernels::einsum transposed copy")
              copy_allocations().push_back(size);
          });
      k::einsum(mtk::ExecSpace(), as, to_view<float>(random_values(as.num_elements(), 1)), bs,
                to_view<float>(random_values(bs.num_elements(), 2)), os);
      Kokkos::Tools::Experimental::set_allocate_data_callback(nullptr);
      std::int64_t copied = 0;
      for (const std::uint64_t bytes : copy_allocations())
        copied += static_cast<std::int64_t>(bytes);
      EXPECT_EQ(k::einsum_moved_bytes(as, bs, os), 2 * copied);
      (copied > 0 ? copying : in_place) += 1;
    }
  }
  EXPECT_GT(copying, 0);
  EXPECT_GT(in_place, 0);
}

TEST(EinsumFp32, BlasAndOneDnnAgree) {
  if (!force_onednn())
    GTEST_SKIP() << "no oneDNN in this build or not host memory";
  const Shape x{{"batch", 4}, {"length", 32}, {"d_model", 64}}, w{{"d_model", 64}, {"d_ff", 96}};
  const Shape h{{"batch", 4}, {"length", 32}, {"d_ff", 96}};
  const auto xv = random_values(x.num_elements(), 3), wv = random_values(w.num_elements(), 4);
  auto run = [&](k::Fp32Gemm path) {
    const Fp32PathScope scope(path);
    return to_vector(k::einsum(mtk::ExecSpace(), x, to_view<float>(xv), w, to_view<float>(wv), h));
  };
  const auto blas = run(k::Fp32Gemm::blas), onednn = run(k::Fp32Gemm::onednn);
  EXPECT_LE(rel_error(blas, onednn), 1e-6);  // the same products, summed in another order
}

TEST(EinsumFp32, AutomaticSaysWhatItRuns) {
  k::reset_fp32_gemm();
  const std::string d = k::fp32_gemm_description();
  std::printf("fp32 path (automatic or MTK_FP32_GEMM): %s\n", d.c_str());
  if (k::fp32_gemm() == k::Fp32Gemm::onednn) {
    EXPECT_NE(d.find("oneDNN f32 matmul"), std::string::npos) << d;
  }
  // Set by the ctest that holds oneDNN to AVX2: no brgemm kernels, so automatic takes the BLAS.
  const char* expect = std::getenv("MTK_TEST_EXPECT_NATIVE_BF16");
  const char* forced = std::getenv("MTK_FP32_GEMM");
  if (expect && std::string(expect) == "0" && !(forced && *forced)) {
    EXPECT_EQ(k::fp32_gemm(), k::Fp32Gemm::blas) << d;
  }
  EXPECT_NE(k::host_blas_name().size(), 0u);
}

// Every float32 backend this build has is correct on the guard's shapes: within the rounding
// bound k u sum|a b| of a float64 product (any summation order, blocking or FMA). Whether equal
// dot products come out equal at every position is the library's affair and only printed
// (OpenBLAS's Haswell/Zen kernels: no; docs/numerics.md). The guard then keeps `auto`'s choice.
TEST(EinsumFp32, EveryBackendIsWithinTheRoundingBound) {
  const auto checks = k::check_fp32_matmuls(mtk::ExecSpace(), k::standard_check_shapes());
  ASSERT_FALSE(checks.empty());
  for (const auto& c : checks) {
    EXPECT_TRUE(c.correct) << c.backend << " [" << c.shape.m << ", " << c.shape.k << "] x ["
                           << c.shape.k << ", " << c.shape.n << "]: " << c.worst;
    EXPECT_LE(c.worst, static_cast<double>(c.shape.k) + 1.0);
    if (!c.position_consistent)
      std::printf("position-dependent rounding: %s on [%ld, %ld] x [%ld, %ld]\n", c.backend.c_str(),
                  static_cast<long>(c.shape.m), static_cast<long>(c.shape.k),
                  static_cast<long>(c.shape.k), static_cast<long>(c.shape.n));
  }
  const k::Fp32Gemm before = k::fp32_gemm();
  k::guard_fp32_matmuls(false);
  EXPECT_EQ(k::fp32_gemm(), before);
}

}  // namespace
