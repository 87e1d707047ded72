#include <mtk/base/error.hpp>
#include <mtk/cost/kind_key.hpp>

#include <algorithm>

namespace mtk::cost {

const std::vector<std::string>& step_kind_names() {
  // Every make_op_kind name in core/ (tests/config/test_strict_config.cpp checks this list
  // against the sources): a kind added there is added here.
  // clang-format off
  static const std::vector<std::string> kinds = {
      "adafactor_apply", "adafactor_second_moment", "adam_update", "alias", "allgather_start",
      "allgather_wait", "allreduce", "allreduce_start", "allreduce_wait", "assign", "binary",
      "broadcast", "cast", "compare", "concat", "constant", "cumsum", "einsum",
      "einsum_accumulate", "extract_patches", "fold_patches", "gather", "halo_copy",
      "halo_exchange", "halo_reduce", "halo_start", "layer_norm", "layer_norm_grad", "load_bf16",
      "log_softmax", "one_hot", "pad", "placeholder", "random_normal", "random_uniform", "range",
      "reduce", "reduce_scatter", "relayout", "reshape", "scatter_add", "scatter_add_into",
      "shift", "slice", "softmax", "softmax_cross_entropy", "softmax_cross_entropy_grad",
      "softmax_grad", "stop_gradient", "store_bf16", "top_1", "unary", "variable", "where",
      "zero_gather", "zero_view"};
  // clang-format on
  return kinds;
}

KindKey KindKey::named(const std::string& name) {
  const auto& known = step_kind_names();
  if (!std::binary_search(known.begin(), known.end(), name)) {
    std::string list;
    for (const auto& k : known)
      list += (list.empty() ? "" : ", ") + k;
    fail("mtk::cost::KindKey::named",
         cat("no step kind is named '", name, "' (known: ", list, ")"));
  }
  return KindKey(name);
}

}  // namespace mtk::cost
