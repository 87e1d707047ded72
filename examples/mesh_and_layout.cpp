// A named processor mesh over all ranks and the layout of a few tensors on it: which mesh dim
// splits which tensor dim, the slice each processor holds and where it starts.
//   mpiexec -n 2 mtk-example-mesh-and-layout

#include <mtk/mtk.hpp>

#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  mtk::Environment env(argc, argv);
  const mtk::Communicator world = mtk::Communicator::world();
  // One mesh dim "batch" over every rank; the `model` rule is inactive on a mesh without `model`.
  const mtk::Mesh mesh(mtk::MeshShape::parse("batch:" + std::to_string(world.size())), world);
  const mtk::LayoutRules rules = mtk::LayoutRules::parse("batch:batch;d_ff:model");

  const std::vector<mtk::Shape> shapes = {
      {{"batch", 8}, {"d_model", 16}},                 // activations: split over batch
      {{"d_model", 16}, {"d_ff", 64}},                 // weights: whole on every processor
      {{"batch", 8}, {"length", 4}, {"vocab", 100}}};  // logits
  bool ok = true;
  for (const auto& shape : shapes) {
    const mtk::TensorLayout layout(shape, rules, mesh.shape(), "example");
    const auto origin = layout.slice_origin(mesh.coordinates());
    // Every processor's slice has the same shape; together the distinct slices cover the tensor.
    const std::int64_t slices = shape.num_elements() / layout.slice_shape().num_elements();
    std::int64_t distinct = 1;
    for (int a : layout.split_axes())
      distinct *= mesh.shape()[a].size;
    ok = ok && slices == distinct;
    if (mesh.rank() == world.size() - 1)
      std::printf("%s on %s: slice %s starting at batch %lld\n", layout.to_string().c_str(),
                  mesh.shape().to_string().c_str(), layout.slice_shape().to_string().c_str(),
                  static_cast<long long>(origin[0]));
  }
  ok = world.min(ok ? 1 : 0) == 1;
  if (mesh.rank() == 0)
    std::printf("mesh and layout: %s\n", ok ? "OK" : "MISMATCH");
  return ok ? 0 : 1;
}
