// oneDNN's matmul primitive on host memory (impl/onednn_matmul.hpp).
#include <mtk/base/error.hpp>
#include <mtk/base/exec_space.hpp>
#include <mtk/kernels/impl/onednn_matmul.hpp>

#include <algorithm>
#include <cstdlib>
#include <dlfcn.h>
#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

namespace mtk::kernels::impl {
namespace {

using dt = dnnl::memory::data_type;
using Dims = dnnl::memory::dims;

// oneDNN runs its kernels on OpenMP threads, as many as omp_get_max_threads() (every core of the
// node unless OMP_NUM_THREADS says otherwise): with one rank per core that oversubscribes the node
// and a small product costs milliseconds of thread wake-ups. Unless the user set OMP_NUM_THREADS,
// oneDNN gets the threads of MTK's execution space (Serial: 1), as the host BLAS does through
// OPENBLAS_NUM_THREADS. The OpenMP runtime is oneDNN's own; looked up, so MTK needs no -fopenmp.
void match_threads_to_execution_space() {
  const char* set = std::getenv("OMP_NUM_THREADS");
  if (set && *set)
    return;
  using SetThreads = void (*)(int);
  if (auto fn = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads")))
    fn(std::max(1, static_cast<int>(ExecSpace().concurrency())));
}

dnnl::engine& cpu_engine() {
  static dnnl::engine e = [] {
    match_threads_to_execution_space();
    return dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return e;
}

struct Descs {
  dnnl::memory::desc a, b, c;
};

// Extent-1 dims take the outermost stride: their stride is arbitrary, and oneDNN rejects strides
// that would make dims overlap.
Dims strides_of(const std::int64_t* s, const Dims& dims) {
  std::int64_t outer = 1;
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] > 1)
      outer = std::max<std::int64_t>(outer, s[i] * dims[i]);
  Dims out(s, s + dims.size());
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] == 1)
      out[i] = outer;
  return out;
}

Descs descs(const StridedMatmul& p) {
  Dims batch(p.batch, p.batch + p.batch_rank);
  auto with = [&](std::int64_t r, std::int64_t c) {
    Dims d = batch;
    d.push_back(r);
    d.push_back(c);
    return d;
  };
  const dt operand = p.bf16 ? dt::bf16 : dt::f32;
  const Dims ad = with(p.m, p.k), bd = with(p.k, p.n), cd = with(p.m, p.n);
  return {dnnl::memory::desc(ad, operand, strides_of(p.a_strides, ad)),
          dnnl::memory::desc(bd, operand, strides_of(p.b_strides, bd)),
          dnnl::memory::desc(cd, dt::f32, strides_of(p.c_strides, cd))};
}

// One product's primitive (null where oneDNN cannot describe or run it) and its implementation.
struct Entry {
  std::unique_ptr<dnnl::matmul> primitive;
  std::unique_ptr<Descs> d;
  std::string impl;
};

std::vector<std::int64_t> key_of(const StridedMatmul& p) {
  std::vector<std::int64_t> key{p.bf16 ? 1 : 0, p.accumulate ? 1 : 0, p.batch_rank, p.m, p.n, p.k};
  const int r = p.batch_rank + 2;
  key.insert(key.end(), p.batch, p.batch + p.batch_rank);
  for (const std::int64_t* s : {p.a_strides, p.b_strides, p.c_strides})
    key.insert(key.end(), s, s + r);
  return key;
}

Entry make_entry(const StridedMatmul& p) {
  Entry e;
  try {
    e.d = std::make_unique<Descs>(descs(p));
    dnnl::primitive_attr attr;
    if (p.accumulate) {  // dst = a b + dst, the sum added to the finished product
      dnnl::post_ops ops;
      ops.append_sum(1.0f);
      attr.set_post_ops(ops);
    }
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(e.d->a, e.d->b, e.d->c), attr, cpu_engine());
    e.impl = pd.impl_info_str();
    e.primitive = std::make_unique<dnnl::matmul>(pd);
  } catch (const dnnl::error&) {
    e.primitive.reset();
    e.impl.clear();
  }
  return e;
}

// Primitives by dims and strides; entries are never removed, so references stay valid.
const Entry& entry(const StridedMatmul& p) {
  static std::mutex mutex;
  static std::map<std::vector<std::int64_t>, Entry> cache;
  const auto key = key_of(p);
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(key);
  if (it == cache.end())
    it = cache.emplace(key, make_entry(p)).first;
  return it->second;
}

StridedMatmul square(bool bf16) {
  StridedMatmul p;
  p.bf16 = bf16;
  p.m = p.n = p.k = 256;
  for (std::int64_t* s : {p.a_strides, p.b_strides, p.c_strides}) {
    s[0] = 256;
    s[1] = 1;
  }
  return p;
}

}  // namespace

bool onednn_available() {
  return true;
}

std::string onednn_bf16_impl() {
  static const std::string impl = [] {
    const std::string s = onednn_matmul_impl(square(true));
    return s.empty() ? std::string("none: no bf16 matmul on this CPU") : s;
  }();
  return impl;
}

bool onednn_has_bf16() {
  return onednn_bf16_impl().rfind("none", 0) != 0;
}

std::string onednn_f32_impl() {
  static const std::string impl = onednn_matmul_impl(square(false));
  return impl;
}

std::string onednn_matmul_impl(const StridedMatmul& p) {
  return entry(p).impl;
}

void onednn_matmul(const StridedMatmul& p, const void* a, const void* b, float* c) {
  const Entry& e = entry(p);
  if (!e.primitive)
    fail("mtk::kernels::einsum",
         cat("oneDNN has no ", p.bf16 ? "bf16" : "f32", " matmul for batch rank ", p.batch_rank,
             ", M ", p.m, ", N ", p.n, ", K ", p.k, " with these strides"));
  dnnl::engine& eng = cpu_engine();
  // oneDNN takes void*; the sources are only read.
  dnnl::memory am(e.d->a, eng, const_cast<void*>(a)), bm(e.d->b, eng, const_cast<void*>(b)),
      cm(e.d->c, eng, c);
  thread_local dnnl::stream stream(eng);
  e.primitive->execute(stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
  stream.wait();
}

}  // namespace mtk::kernels::impl
