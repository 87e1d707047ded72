#include <mtk/base/error.hpp>
#include <mtk/base/name_pairs.hpp>
#include <mtk/parallel/mesh_shape.hpp>

#include <cerrno>
#include <cstdlib>

namespace mtk {

MeshShape::MeshShape(std::vector<Dimension> dims) {
  for (const auto& d : dims) {
    if (!is_valid_name(d.name))
      fail("mtk::MeshShape", cat("invalid mesh dimension name '", d.name, "'"));
    if (d.size < 1)
      fail("mtk::MeshShape", cat("mesh dimension '", d.name, "' has size ", d.size,
                                 "; every mesh dimension needs size >= 1"));
  }
  try {
    shape_ = Shape(std::move(dims));
  } catch (const Error& e) {
    fail("mtk::MeshShape", e.what());
  }
}

MeshShape MeshShape::parse(const std::string& text) {
  std::vector<Dimension> dims;
  for (const auto& [name, value] : parse_name_pairs(text, "mtk::MeshShape::parse")) {
    char* end = nullptr;
    errno = 0;
    long long size = std::strtoll(value.c_str(), &end, 10);
    if (errno != 0 || end == value.c_str() || *end != '\0' || size < 1)
      fail("mtk::MeshShape::parse", cat("size '", value, "' of mesh dimension '", name, "' in \"",
                                        text, "\" is not a positive integer"));
    dims.push_back({name, size});
  }
  if (dims.empty())
    fail("mtk::MeshShape::parse",
         cat("\"", text, "\" names no mesh dimension (e.g. \"batch:4;model:2\")"));
  return MeshShape(std::move(dims));
}

int MeshShape::axis(const std::string& name) const {
  int i = index_of(name);
  if (i < 0)
    fail("mtk::MeshShape::axis", cat("no mesh dimension '", name, "' in mesh ", to_string()));
  return i;
}

std::vector<int> MeshShape::coordinates_of(int pnum) const {
  if (pnum < 0 || pnum >= num_processors())
    fail("mtk::MeshShape::coordinates_of",
         cat("processor ", pnum, " outside mesh ", to_string(), " of ", num_processors()));
  std::vector<int> c(static_cast<size_t>(ndims()));
  for (int i = ndims() - 1; i >= 0; --i) {
    int n = static_cast<int>(dims()[static_cast<size_t>(i)].size);
    c[static_cast<size_t>(i)] = pnum % n;
    pnum /= n;
  }
  return c;
}

int MeshShape::pnum_of(const std::vector<int>& coordinates) const {
  if (static_cast<int>(coordinates.size()) != ndims())
    fail("mtk::MeshShape::pnum_of", cat(coordinates.size(), " coordinates for mesh ", to_string()));
  int p = 0;
  for (int i = 0; i < ndims(); ++i) {
    int n = static_cast<int>(dims()[static_cast<size_t>(i)].size);
    int c = coordinates[static_cast<size_t>(i)];
    if (c < 0 || c >= n)
      fail("mtk::MeshShape::pnum_of", cat("coordinate ", c, " outside mesh dimension '",
                                          dims()[static_cast<size_t>(i)].name, "' of size ", n));
    p = p * n + c;
  }
  return p;
}

std::string MeshShape::to_string() const {
  std::string s;
  for (const auto& d : dims())
    s += (s.empty() ? "" : ";") + d.name + ":" + std::to_string(d.size);
  return s;
}

}  // namespace mtk
