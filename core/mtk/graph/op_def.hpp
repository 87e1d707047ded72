#pragma once
// What defines an op kind, in one place: its name, its traits, its gradient and its lowering, and
// the type of its attributes. Each op family file in core/mtk/ops/ defines its OpKinds beside its
// builders (make_op_kind); operations point to them, and lowered steps carry them (StepKind), so
// counters, the cost model and the layout search read an op's traits, never its name.

#include <mtk/base/precision.hpp>

#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace mtk {

class GradientContext;  // mtk/graph/gradient_context.hpp
class Lowering;         // mtk/lower/lowering_context.hpp
struct Operation;

/// What an op's kernel steps count their FLOPs as (Counters::flops). `einsum` FLOPs are the
/// model's matrix products (MFU); the rest are elementwise-class work.
enum class FlopClass {
  none,
  einsum,
  elementwise,
  reduce,
  softmax,
  gather,
  optimizer,
  random,
  assign
};
const char* to_string(FlopClass c);

/// What the cost model and the layout search know about an op kind without lowering it.
struct OpTraits {
  FlopClass flops = FlopClass::none;
  /// Its steps run no kernel: they give a buffer another name (reshape, stop_gradient) or move
  /// data that is costed as communication (an allreduce).
  bool free = false;
  /// Its steps are a split halo exchange's (packing, transfer, placing or folding the strips):
  /// the cost model's and bench_spatial's halo time (not the local copies of an unsplit dim).
  bool halo = false;
  /// Its steps give their output their input's buffer under another name (reshape, alias,
  /// stop_gradient): the same values, one buffer.
  bool rename = false;
};

/// The attributes of an op kind that has none.
struct NoAttrs {};

/// An op kind with its type erased: what Graph, Lowering and autodiff call. Made by
/// make_op_kind() as the first member of an OpKind<Attrs>.
struct OpDef {
  const char* name;  ///< the kind's name in labels and explain(): "einsum", "softmax", ...
  OpTraits traits;
  /// Adds the gradients of the inputs given the gradient of output 0; null: no gradient flows.
  void (*gradient)(const OpDef& self, GradientContext& ctx) = nullptr;
  /// Emits the op's steps for one rank (the current op is lowering.op()); null for the
  /// lowering's own step kinds (alias, allreduce, relayout).
  void (*lower)(const OpDef& self, Lowering& lowering) = nullptr;
  /// The dims of `op` whose split the op cannot lower (it needs them whole); null: none.
  std::vector<std::string> (*unsplittable)(const OpDef& self, const Operation& op) = nullptr;
  /// Variables: named exactly as asked (unique among variables) and listed by Graph.
  bool is_variable = false;
};

/// Which recomputation segment an op belongs to (TransformerConfig::recompute): the forward ops of
/// a segment (backward = false) have their outputs dropped after the forward and computed again,
/// by the same steps, right before the first step of the segment's gradient ops (backward = true);
/// mtk/lower/recompute.hpp. segment < 0: none. A forward op with replay = false keeps its outputs:
/// in a segment that replays only its norms, the other ops belong to it so that the norms'
/// outputs are read by the segment's steps only.
struct RecomputeTag {
  int segment = -1;
  bool backward = false;
  bool replay = true;
};

/// One node of the graph: an op kind, its tensors and its attributes (read through the kind:
/// OpKind<A>::attrs, so the attribute type is fixed by the kind at build time).
struct Operation {
  const OpDef* def = nullptr;
  std::string name;
  std::vector<int> inputs;                 ///< tensor ids
  std::vector<int> outputs;                ///< tensor ids
  std::shared_ptr<const void> attributes;  ///< an A of def's OpKind<A>; null for NoAttrs
  /// The graph's contraction precision when the op was added: autodiff builds the op's gradient
  /// in it, so a bf16 model's backward contractions are bf16 too.
  Precision precision = Precision::float32;
  /// The graph's recomputation segment when the op was added (Graph::recompute_tag()).
  RecomputeTag recompute;

  const char* kind() const { return def->name; }
  bool is(const OpDef& d) const { return def == &d; }
};

[[noreturn]] void fail_op_kind(const Operation& op, const char* expected);

/// An op kind whose attributes are an `Attrs` (a struct the op family defines, NoAttrs if none):
/// builders pass an Attrs to Graph::add_op, gradient and lowering functions receive one.
template <class Attrs>
struct OpKind {
  using Gradient = void (*)(GradientContext&, const Attrs&);
  using Lower = void (*)(Lowering&, const Attrs&);
  using Unsplittable = std::vector<std::string> (*)(const Attrs&);

  OpDef def;  // first member: the erased entry points cast back to the OpKind
  Gradient gradient = nullptr;
  Lower lower = nullptr;
  Unsplittable unsplittable = nullptr;

  /// The attributes of `op`, which must be of this kind.
  const Attrs& attrs(const Operation& op) const {
    if (op.def != &def)
      fail_op_kind(op, def.name);
    if constexpr (std::is_same_v<Attrs, NoAttrs>) {
      static const NoAttrs none;
      return none;
    } else {
      return *static_cast<const Attrs*>(op.attributes.get());
    }
  }
  bool is(const Operation& op) const { return op.def == &def; }
};

namespace op_kind_impl {
template <class A>
const OpKind<A>& of(const OpDef& d) {
  return *reinterpret_cast<const OpKind<A>*>(&d);  // def is OpKind<A>'s first member
}
template <class A>
const A& attrs(const OpDef& d, const Operation& op) {
  return of<A>(d).attrs(op);
}
template <class A>
void gradient(const OpDef& d, GradientContext& c);  // defined in gradient_context.hpp
template <class A>
void lower(const OpDef& d, Lowering& l);  // defined in lowering_context.hpp
template <class A>
std::vector<std::string> unsplittable(const OpDef& d, const Operation& op) {
  return of<A>(d).unsplittable(attrs<A>(d, op));
}
}  // namespace op_kind_impl

/// The OpKind of an op family: `name` written once, here.
template <class Attrs>
constexpr OpKind<Attrs> make_op_kind(const char* name, OpTraits traits,
                                     typename OpKind<Attrs>::Lower lower,
                                     typename OpKind<Attrs>::Gradient gradient = nullptr,
                                     typename OpKind<Attrs>::Unsplittable unsplittable = nullptr,
                                     bool is_variable = false) {
  return OpKind<Attrs>{
      OpDef{name, traits, gradient ? &op_kind_impl::gradient<Attrs> : nullptr,
            lower ? &op_kind_impl::lower<Attrs> : nullptr,
            unsplittable ? &op_kind_impl::unsplittable<Attrs> : nullptr, is_variable},
      gradient, lower, unsplittable};
}

/// The kind of a lowered step (Program::Step, Counters): the op kind it lowers, or one of the
/// lowering's own kinds (alias, allreduce of a partial sum, relayout). Ordered by name, so
/// counters print in a stable order.
class StepKind {
 public:
  StepKind(const OpDef& def) : def_(&def) {}  // NOLINT: every OpDef is a step kind
  const OpDef& def() const { return *def_; }
  const char* name() const { return def_->name; }
  const OpTraits& traits() const { return def_->traits; }
  friend bool operator==(StepKind a, StepKind b) { return a.def_ == b.def_; }
  friend bool operator!=(StepKind a, StepKind b) { return a.def_ != b.def_; }
  friend bool operator<(StepKind a, StepKind b) {
    const int c = std::strcmp(a.name(), b.name());
    return c != 0 ? c < 0 : a.def_ < b.def_;
  }

 private:
  const OpDef* def_;
};

}  // namespace mtk
