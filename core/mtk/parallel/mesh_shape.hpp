#pragma once
// The named shape of the processor mesh.

#include <mtk/base/shape.hpp>

#include <string>
#include <vector>

namespace mtk {

/// Named mesh dimensions, e.g. batch:4;model:2. Every size is >= 1.
class MeshShape {
 public:
  MeshShape() = default;
  /// Throws on empty or repeated names, or a size < 1.
  explicit MeshShape(std::vector<Dimension> dims);

  /// Parses "batch:4;model:2" (whitespace ignored, trailing ';' allowed).
  static MeshShape parse(const std::string& text);

  int ndims() const { return shape_.rank(); }
  /// Number of processors.
  int num_processors() const { return static_cast<int>(shape_.num_elements()); }
  const std::vector<Dimension>& dims() const { return shape_.dims(); }
  const Dimension& operator[](int i) const { return shape_[i]; }
  /// Position of mesh dim `name`, or -1.
  int index_of(const std::string& name) const { return shape_.index_of(name); }
  /// Position of mesh dim `name`; throws listing the mesh when absent.
  int axis(const std::string& name) const;
  /// Row-major coordinates of processor `pnum` and back.
  std::vector<int> coordinates_of(int pnum) const;
  int pnum_of(const std::vector<int>& coordinates) const;

  /// "batch:4;model:2" (parse() reads it back).
  std::string to_string() const;

  friend bool operator==(const MeshShape& a, const MeshShape& b) { return a.shape_ == b.shape_; }
  friend bool operator!=(const MeshShape& a, const MeshShape& b) { return !(a == b); }

 private:
  Shape shape_;
};

}  // namespace mtk
