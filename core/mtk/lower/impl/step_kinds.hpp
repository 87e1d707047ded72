#pragma once
// The lowering's own step kinds, one definition each for all the lowering's sources (inline: one
// OpDef, so StepKind comparisons hold across them). An alias names a buffer again; the allreduce of
// a partial sum is costed as communication (Counters::comm_bytes), not as kernel work; a relayout
// copies.

#include <mtk/graph/op_def.hpp>

namespace mtk::lowering_kinds {

inline constexpr auto alias_step =
    make_op_kind<NoAttrs>("alias", {FlopClass::none, true, false, true}, nullptr);
inline constexpr auto allreduce_step =
    make_op_kind<NoAttrs>("allreduce", {FlopClass::none, true}, nullptr);
inline constexpr auto relayout_step =
    make_op_kind<NoAttrs>("relayout", {FlopClass::none, false}, nullptr);
inline constexpr auto reduce_scatter_step =
    make_op_kind<NoAttrs>("reduce_scatter", {FlopClass::none, false}, nullptr);

}  // namespace mtk::lowering_kinds
