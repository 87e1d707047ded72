// oneDNN's matmul primitive for bfloat16 contractions on the host (impl/onednn_matmul.hpp).
#include <mtk/base/error.hpp>
#include <mtk/kernels/bfloat16.hpp>
#include <mtk/kernels/impl/onednn_matmul.hpp>

#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>
#include <vector>

namespace mtk::kernels::impl {
namespace {

using dt = dnnl::memory::data_type;
using Dims = dnnl::memory::dims;

dnnl::engine& cpu_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

struct Descs {
  dnnl::memory::desc a, b, c;
};

// [nb, M, K] / [nb, K, N] / [nb, M, N] with the strides of the row-major operands.
Descs descs(bool ta, bool tb, std::int64_t nb, std::int64_t m, std::int64_t n, std::int64_t k,
            dt operand_type) {
  const Dims a_strides = ta ? Dims{m * k, 1, m} : Dims{m * k, k, 1};
  const Dims b_strides = tb ? Dims{k * n, 1, k} : Dims{k * n, n, 1};
  return {dnnl::memory::desc({nb, m, k}, operand_type, a_strides),
          dnnl::memory::desc({nb, k, n}, operand_type, b_strides),
          dnnl::memory::desc({nb, m, n}, dt::f32, Dims{m * n, n, 1})};
}

dnnl::matmul::primitive_desc primitive_desc(const Descs& d) {
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(d.a, d.b, d.c), cpu_engine());
}

using Key = std::tuple<bool, bool, std::int64_t, std::int64_t, std::int64_t, std::int64_t>;

struct State {
  std::mutex mutex;
  std::map<Key, dnnl::matmul> primitives;
  std::vector<std::uint16_t> a_bf16, b_bf16;  // reused conversion buffers
};

State& state() {
  static State s;
  return s;
}

void to_bf16(const float* x, std::int64_t n, std::vector<std::uint16_t>& out) {
  out.resize(static_cast<size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    out[static_cast<size_t>(i)] = to_bfloat16_bits(x[i]);
}

}  // namespace

bool onednn_available() {
  return true;
}

std::string onednn_bf16_impl() {
  static const std::string impl = [] {
    try {
      return std::string(
          primitive_desc(descs(false, false, 1, 256, 256, 256, dt::bf16)).impl_info_str());
    } catch (const dnnl::error& e) {
      return std::string("none: no bf16 matmul on this CPU (") + e.what() + ")";
    }
  }();
  return impl;
}

bool onednn_has_bf16() {
  return onednn_bf16_impl().rfind("none", 0) != 0;
}

void onednn_bf16_matmul(const float* a, bool ta, const float* b, bool tb, float* c, std::int64_t nb,
                        std::int64_t m, std::int64_t n, std::int64_t k) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  // Without a bf16 matmul on this CPU (oneDNN 2.x wants avx512_core for bf16) a forced oneDNN path
  // multiplies in f32: the callers' operands are bf16 values already, so only sum order differs.
  const bool bf16 = onednn_has_bf16();
  const Descs d = descs(ta, tb, nb, m, n, k, bf16 ? dt::bf16 : dt::f32);
  const Key key{ta, tb, nb, m, n, k};
  auto it = s.primitives.find(key);
  if (it == s.primitives.end()) {
    try {
      it = s.primitives.emplace(key, dnnl::matmul(primitive_desc(d))).first;
    } catch (const dnnl::error& e) {
      fail("mtk::kernels::einsum", cat("oneDNN has no bf16 matmul for batch ", nb, ", M ", m,
                                       ", N ", n, ", K ", k, ": ", e.what()));
    }
  }
  void* ap = const_cast<float*>(a);  // oneDNN takes void*; sources are only read
  void* bp = const_cast<float*>(b);
  if (bf16) {
    to_bf16(a, nb * m * k, s.a_bf16);
    to_bf16(b, nb * k * n, s.b_bf16);
    ap = s.a_bf16.data();
    bp = s.b_bf16.data();
  }
  dnnl::engine& e = cpu_engine();
  dnnl::memory am(d.a, e, ap), bm(d.b, e, bp), cm(d.c, e, c);
  dnnl::stream stream(e);
  it->second.execute(stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
  stream.wait();
}

}  // namespace mtk::kernels::impl
