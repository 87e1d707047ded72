#include <mtk/base/error.hpp>
#include <mtk/decode/weights.hpp>
#include <mtk/nn/decoding_graphs.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstdint>
#include <set>

namespace mtk::decode {

std::vector<std::string> copy_weights(Program& source, Program& target) {
  const char* where = "mtk::decode::copy_weights";
  const std::vector<std::string> held = source.variable_names();
  const std::set<std::string> have(held.begin(), held.end());
  std::vector<std::string> names;
  for (const auto& name : target.variable_names()) {
    if (nn::is_decoding_state(name))
      continue;
    const TensorLayout& to = target.variable_layout(name);
    if (!have.count(name))
      fail(where, cat("weight '", name, "' ", to.shape().to_string(),
                      " of the decoding program is not a variable of the source program"));
    const TensorLayout& from = source.variable_layout(name);
    if (from.shape() != to.shape())
      fail(where, cat("weight '", name, "': the source holds ", from.shape().to_string(),
                      ", the decoding program needs ", to.shape().to_string()));
    names.push_back(name);
  }
  for (const auto& name : names) {
    const TensorLayout& to = target.variable_layout(name);
    const TensorLayout& from = source.variable_layout(name);
    Kokkos::View<float*> dst = target.variable_slice(name);
    if (from.to_string() == to.to_string() && from.mesh().to_string() == to.mesh().to_string()) {
      Kokkos::deep_copy(dst, source.variable_slice_float32(name));  // bf16 master: widened
      continue;
    }
    // Another layout: this rank's block of the gathered value.
    const HostTensor global = source.variable_value(name);
    const Shape local = to.slice_shape();
    const auto origin = to.slice_origin(target.mesh().coordinates());
    const Shape& shape = to.shape();
    auto host = Kokkos::create_mirror_view(dst);
    const float* g = global.data<float>();
    std::vector<std::int64_t> idx(static_cast<size_t>(local.rank()), 0);
    for (std::int64_t e = 0; e < local.num_elements(); ++e) {
      std::int64_t rest = e, flat = 0;
      for (int d = local.rank() - 1; d >= 0; --d) {
        idx[static_cast<size_t>(d)] = rest % local[d].size;
        rest /= local[d].size;
      }
      for (int d = 0; d < shape.rank(); ++d)
        flat = flat * shape[d].size + origin[static_cast<size_t>(d)] + idx[static_cast<size_t>(d)];
      host(e) = g[flat];
    }
    Kokkos::deep_copy(dst, host);
  }
  return names;
}

}  // namespace mtk::decode
