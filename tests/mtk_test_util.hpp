#pragma once
// Helpers shared by MTK's tests: the meshes to try at a given rank count, slices of global
// reference tensors, random inputs.

#include <mtk/parallel/layout.hpp>
#include <mtk/parallel/mesh.hpp>

#include <Kokkos_Core.hpp>
#include <mpi.h>

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace mtk::test {

inline int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

/// Meshes of exactly `n` processors: 1-D, 2-D (both orientations) and, for 8, 3-D.
inline std::vector<MeshShape> meshes_of_size(int n) {
  std::vector<std::string> texts;
  switch (n) {
    case 1:
      texts = {"x:1", "a:1;b:1"};
      break;
    case 2:
      texts = {"x:2", "a:1;b:2", "a:2;b:1"};
      break;
    case 4:
      texts = {"x:4", "a:2;b:2", "a:4;b:1"};
      break;
    case 8:
      texts = {"x:8", "a:4;b:2", "a:2;b:4", "a:2;b:2;c:2"};
      break;
    default:
      texts = {"x:" + std::to_string(n)};
  }
  std::vector<MeshShape> out;
  for (const auto& t : texts)
    out.push_back(MeshShape::parse(t));
  return out;
}

/// Every subset of the mesh's axes (including the empty one).
inline std::vector<std::vector<int>> axis_subsets(int ndims) {
  std::vector<std::vector<int>> out;
  for (int mask = 0; mask < (1 << ndims); ++mask) {
    std::vector<int> s;
    for (int a = 0; a < ndims; ++a)
      if (mask & (1 << a))
        s.push_back(a);
    out.push_back(s);
  }
  return out;
}

/// Row-major flat index of global element at multi-index `idx`.
inline std::int64_t flat_index(const Shape& shape, const std::vector<std::int64_t>& idx) {
  std::int64_t f = 0;
  for (int i = 0; i < shape.rank(); ++i)
    f = f * shape[i].size + idx[static_cast<size_t>(i)];
  return f;
}

/// The slice of the global tensor `value(global flat index)` held at `coordinates` under `layout`.
inline std::vector<double> slice_of(const TensorLayout& layout, const std::vector<int>& coordinates,
                                    const std::function<double(std::int64_t)>& value) {
  const Shape local = layout.slice_shape();
  const auto origin = layout.slice_origin(coordinates);
  std::vector<double> out(static_cast<size_t>(local.num_elements()));
  std::vector<std::int64_t> idx(static_cast<size_t>(local.rank()), 0);
  for (std::int64_t k = 0; k < local.num_elements(); ++k) {
    std::int64_t rest = k;
    for (int i = local.rank() - 1; i >= 0; --i) {
      idx[static_cast<size_t>(i)] = rest % local[i].size + origin[static_cast<size_t>(i)];
      rest /= local[i].size;
    }
    out[static_cast<size_t>(k)] = value(flat_index(layout.shape(), idx));
  }
  return out;
}

/// n values drawn from N(0, 1) with `seed`: the layer inputs of a test.
inline std::vector<float> normal_values(std::int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> out(static_cast<size_t>(n));
  for (auto& v : out)
    v = normal(rng);
  return out;
}

template <class T>
Kokkos::View<T*> to_view(const std::vector<double>& values, const std::string& label = "test") {
  Kokkos::View<T*> v(label, values.size());
  auto h = Kokkos::create_mirror_view(v);
  for (size_t i = 0; i < values.size(); ++i)
    h(i) = static_cast<T>(values[i]);
  Kokkos::deep_copy(v, h);
  return v;
}

template <class T>
std::vector<double> to_vector(const Kokkos::View<T*>& v) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  std::vector<double> out(h.extent(0));
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<double>(h(i));
  return out;
}

}  // namespace mtk::test
