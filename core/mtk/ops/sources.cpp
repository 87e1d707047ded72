// Source ops: variable, placeholder, constant, range, random_uniform, random_normal (+ dropout).
#include <mtk/base/error.hpp>
#include <mtk/kernels/bfloat16_storage.hpp>
// make_op_kind names gradient<A> (defined there) also for ops without a gradient.
#include <mtk/graph/gradient_context.hpp>
#include <mtk/kernels/elementwise.hpp>
#include <mtk/kernels/random.hpp>
#include <mtk/lower/lowering_context.hpp>
#include <mtk/ops/elementwise.hpp>
#include <mtk/ops/impl/builder_checks.hpp>
#include <mtk/ops/sources.hpp>

namespace mtk {
namespace {

using namespace ops_impl;

// ------------------------------------------------------------------------------ variable
// VariableAttrs (mtk/graph/graph.hpp): the graph lists trainable variables.

Program::Buffer initial_value(Lowering& l, const Operation& o, const Initializer& init, int t) {
  const auto& lay = l.layout(t);
  const Shape ls = lay.slice_shape();
  const auto origin = lay.slice_origin(l.coords());
  const ExecSpace& space = l.space();
  const std::uint64_t seed = kernels::hash_name(o.name) ^ (init.seed * 0x9E3779B97F4A7C15ull);
  if (l.dry())
    return {};  // analysis only: no storage
  if (l.dtype(t) == DType::int32)
    return kernels::fill<std::int32_t>(
        space, ls.num_elements(),
        static_cast<std::int32_t>(init.kind == Initializer::Kind::ones       ? 1
                                  : init.kind == Initializer::Kind::constant ? init.a
                                                                             : 0));
  switch (init.kind) {
    case Initializer::Kind::zeros:
      return kernels::fill<float>(space, ls.num_elements(), 0.f);
    case Initializer::Kind::ones:
      return kernels::fill<float>(space, ls.num_elements(), 1.f);
    case Initializer::Kind::constant:
      return kernels::fill<float>(space, ls.num_elements(), init.a);
    case Initializer::Kind::uniform:
      return kernels::random_uniform(space, lay.shape(), ls, origin, seed, init.a, init.b);
    case Initializer::Kind::normal:
    case Initializer::Kind::truncated_normal:
      return kernels::random_normal(space, lay.shape(), ls, origin, seed, init.a, init.b,
                                    init.kind == Initializer::Kind::truncated_normal);
  }
  return {};
}

void lower_variable(Lowering& l, const VariableAttrs& attrs) {
  const Operation& o = l.op();
  const int t = o.outputs[0];
  if (attrs.storage != DType::bfloat16) {
    l.add_variable(t, o.name, initial_value(l, o, attrs.init, t));
    return;
  }
  // Stored as bf16 (Mesh-TF's master dtype), read as a float32 tensor (its slice dtype): the
  // initial values rounded once, and a step that widens the storage where the variable is read.
  Program::Buffer init = initial_value(l, o, attrs.init, t);
  if (!init.empty())
    init = kernels::narrow_bfloat16(l.space(), init.view<float>());
  l.add_variable(t, o.name, init, DType::bfloat16);
  const Program::Buffer* storage = l.variable_storage(t);
  l.add_step(cat("read bfloat16 variable '", o.name, "'"), {}, {t},
             [storage, t](Buffers& b, const ExecSpace& space) {
               b[static_cast<size_t>(t)] =
                   kernels::widen_bfloat16(space, storage->view<std::uint16_t>());
             });
}

constexpr auto variable_op = make_op_kind<VariableAttrs>("variable", {FlopClass::none},
                                                         lower_variable, nullptr, nullptr, true);

// --------------------------------------------------------------------------- placeholder
void lower_placeholder(Lowering& l, const NoAttrs&) {
  l.add_placeholder(l.op().outputs[0]);
}

constexpr auto placeholder_op =
    make_op_kind<NoAttrs>("placeholder", {FlopClass::none}, lower_placeholder);

// ------------------------------------------------------------------------------ constant
struct ConstantAttrs {
  double value = 0.0;
};

void lower_constant(Lowering& l, const ConstantAttrs& attrs) {
  const int t = l.op().outputs[0];
  const std::int64_t n = l.local(t).num_elements();
  const double v = attrs.value;
  l.add_typed_step(l.label(), {}, t, l.dtype(t),
                   [n, v](auto e, const Buffers&, const ExecSpace& space) {
                     using T = decltype(e);
                     return kernels::fill<T>(space, n, static_cast<T>(v));
                   });
}

constexpr auto constant_op =
    make_op_kind<ConstantAttrs>("constant", {FlopClass::none}, lower_constant);

// --------------------------------------------------------------------------------- range
void lower_range(Lowering& l, const NoAttrs&) {
  const int t = l.op().outputs[0];
  const Shape ls = l.local(t);
  const std::int64_t origin = l.layout(t).slice_origin(l.coords())[0];
  l.add_typed_step(l.label(), {}, t, l.dtype(t),
                   [ls, origin](auto e, const Buffers&, const ExecSpace& space) {
                     return kernels::range<decltype(e)>(space, ls, 0, origin);
                   });
}

constexpr auto range_op = make_op_kind<NoAttrs>("range", {FlopClass::none}, lower_range);

// ----------------------------------------------------------------------- random values
struct RandomAttrs {
  std::uint64_t seed = 0;
  double a = 0.0;  ///< low or mean
  double b = 1.0;  ///< high or stddev
};

void lower_random(Lowering& l, const RandomAttrs& at, bool uniform) {
  const Operation& o = l.op();
  const int t = o.outputs[0];
  const Shape gs = l.layout(t).shape(), ls = l.local(t);
  const auto origin = l.layout(t).slice_origin(l.coords());
  const Program* p = l.program();
  l.add_step(
      l.label(), {}, {t},
      [=](Buffers& b, const ExecSpace& space) {
        // Fresh values every run, identical on every mesh: mix the run counter into the seed.
        const std::uint64_t s =
            at.seed * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(p->step());
        b[static_cast<size_t>(t)] =
            uniform ? kernels::random_uniform(space, gs, ls, origin, s, static_cast<float>(at.a),
                                              static_cast<float>(at.b))
                    : kernels::random_normal(space, gs, ls, origin, s, static_cast<float>(at.a),
                                             static_cast<float>(at.b), false);
      },
      static_cast<double>(ls.num_elements()));
}

void lower_random_uniform(Lowering& l, const RandomAttrs& attrs) {
  lower_random(l, attrs, true);
}
void lower_random_normal(Lowering& l, const RandomAttrs& attrs) {
  lower_random(l, attrs, false);
}

constexpr auto random_uniform_op =
    make_op_kind<RandomAttrs>("random_uniform", {FlopClass::random}, lower_random_uniform);
constexpr auto random_normal_op =
    make_op_kind<RandomAttrs>("random_normal", {FlopClass::random}, lower_random_normal);

// bfloat16 is a storage type (VariableAttrs::storage), never the type of a graph tensor.
void require_compute_dtype(DType dtype, const char* where, const std::string& name) {
  if (dtype == DType::bfloat16)
    fail(where, cat("'", name, "': bfloat16 is a storage type of variables, not a tensor type; ",
                    "make a float32 variable and Graph::set_variable_storage(name, bfloat16)"));
}

}  // namespace

Tensor variable(Graph& g, const std::string& name, const Shape& shape, const Initializer& init,
                bool trainable, DType dtype) {
  require_compute_dtype(dtype, "mtk::variable", name);
  return g.add_named_op1(variable_op, name, {}, shape, dtype, VariableAttrs{init, trainable});
}

Tensor placeholder(Graph& g, const std::string& name, const Shape& shape, DType dtype) {
  require_compute_dtype(dtype, "mtk::placeholder", name);
  return g.add_named_op1(placeholder_op, name, {}, shape, dtype);
}

Tensor constant(Graph& g, const Shape& shape, double value, DType dtype) {
  return g.add_op1(constant_op, {}, shape, dtype, ConstantAttrs{value});
}

Tensor range(Graph& g, const Dimension& dim, DType dtype) {
  return g.add_op1(range_op, {}, Shape{dim}, dtype);
}

Tensor random_uniform(Graph& g, const Shape& shape, std::uint64_t seed, double low, double high) {
  return g.add_op1(random_uniform_op, {}, shape, DType::float32, RandomAttrs{seed, low, high});
}

Tensor random_normal(Graph& g, const Shape& shape, std::uint64_t seed, double mean, double stddev) {
  return g.add_op1(random_normal_op, {}, shape, DType::float32, RandomAttrs{seed, mean, stddev});
}

Tensor dropout(const Tensor& x, double rate, std::uint64_t seed) {
  if (rate <= 0.0)
    return x;
  if (rate >= 1.0)
    fail("mtk::dropout", cat("rate ", rate, " must be below 1 for ", describe(x)));
  Tensor u = random_uniform(x.graph(), x.shape(), seed);
  Tensor keep = compare(CompareFn::greater_equal, u, constant(x.graph(), Shape(), rate));
  return multiply(multiply(x, keep), 1.0 / (1.0 - rate));
}

}  // namespace mtk
