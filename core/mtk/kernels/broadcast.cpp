// Broadcasting by name: the plans of impl/broadcast.hpp.
#include <mtk/kernels/impl/broadcast.hpp>

namespace mtk::kernels::broadcast_impl {

Plan plan_operand(const Shape& out, const Shape& in, const char* where) {
  Plan p;
  p.map = map_by_name(out, in, where);
  p.n = in.num_elements();
  if (in == out) {
    p.access = Access::direct;
    return p;
  }
  const int shift = out.rank() - in.rank();
  bool suffix = shift >= 0, prefix = shift >= 0;
  for (int i = 0; suffix && i < in.rank(); ++i)
    suffix = in[i] == out[i + shift];
  for (int i = 0; prefix && i < in.rank(); ++i)
    prefix = in[i] == out[i];
  if (suffix) {
    p.access = Access::modulo;
  } else if (prefix && p.n > 0) {
    p.access = Access::divide;
    p.n = out.num_elements() / p.n;  // outputs per operand element
  } else {
    p.access = Access::mapped;
    // Leading dims of `in` lead `out`, its remaining dims end `out` (e.g. an attention bias
    // [batch, length, memory] added to logits [batch, heads, length, memory]).
    for (int a = 1; a < in.rank(); ++a) {
      bool ok = true;
      for (int i = 0; ok && i < a; ++i)
        ok = in[i] == out[i];
      const int tail = in.rank() - a;
      for (int i = 0; ok && i < tail; ++i)
        ok = in[a + i] == out[out.rank() - tail + i];
      if (!ok)
        continue;
      std::int64_t inner = 1, period = 1;
      for (int i = a; i < in.rank(); ++i)
        inner *= in[i].size;
      for (int i = a; i < out.rank(); ++i)
        period *= out[i].size;
      if (inner == 0 || period == 0)
        break;
      p.access = Access::block;
      p.n = inner;
      p.period = period;
      break;
    }
  }
  return p;
}

Run trailing_run(const Plan& pa, const Plan& pb) {
  Run run;
  const IndexMap& ma = pa.map;
  int mode[2] = {-1, -1};           // -1 undecided, 0 constant, 1 contiguous
  std::int64_t expect[2] = {1, 1};  // a contiguous operand's next stride
  int i = ma.rank - 1;
  for (; i >= 0; --i) {
    const std::int64_t ext = ma.extent[i];
    if (ext == 1)
      continue;
    int next_mode[2];
    bool ok = true;
    for (int o = 0; o < 2 && ok; ++o) {
      const std::int64_t st = (o == 0 ? pa : pb).map.stride[i];
      next_mode[o] = mode[o];
      if (mode[o] == -1)
        next_mode[o] = st == 0 ? 0 : (st == 1 ? 1 : -2);
      ok = next_mode[o] == 0 ? st == 0 : (next_mode[o] == 1 && st == expect[o]);
    }
    if (!ok)
      break;
    for (int o = 0; o < 2; ++o) {
      mode[o] = next_mode[o];
      if (mode[o] == 1)
        expect[o] *= ext;
    }
    run.len *= ext;
  }
  run.step_a = mode[0] == 0 ? 0 : 1;
  run.step_b = mode[1] == 0 ? 0 : 1;
  if (i >= 0) {  // the dim that ends the run: a fixed stride per operand along it
    run.outer = ma.extent[i];
    run.outer_a = pa.map.stride[i];
    run.outer_b = pb.map.stride[i];
  }
  return run;
}

}  // namespace mtk::kernels::broadcast_impl
