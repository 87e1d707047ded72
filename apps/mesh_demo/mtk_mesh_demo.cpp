// mtk-mesh-demo: builds a named processor mesh, prints each rank's coordinates and checks two
// collectives against their closed forms.
//   mpiexec -n 4 mtk-mesh-demo --mesh "batch:2;model:2"

#include <mtk/app/app_main.hpp>
#include <mtk/base/error.hpp>
#include <mtk/parallel/collectives.hpp>
#include <mtk/parallel/environment.hpp>
#include <mtk/parallel/layout.hpp>
#include <mtk/parallel/mesh.hpp>

#include "cli.hpp"
#include <cstdio>
#include <string>
#include <vector>

namespace {

int run(const mtk::Communicator& world, const std::vector<std::string>& args) {
  std::string mesh_text = "all:" + std::to_string(world.size());
  CLI::App app{
      "Builds a named processor mesh, prints each rank's coordinates and checks two\n"
      "collectives against their closed forms.",
      "mtk-mesh-demo"};
  mtk::cli::configure(app);
  app.add_option("--mesh", mesh_text, "The mesh, e.g. \"batch:2;model:2\" (default all:RANKS)")
      ->type_name("M");
  if (const int status = mtk::cli::parse(app, args, world.rank() == 0); status >= 0)
    return status;
  const mtk::Mesh mesh(mtk::MeshShape::parse(mesh_text), world);
  if (mesh.rank() == 0)
    std::printf("MTK mesh demo: mesh %s on %d ranks, %s\n", mesh.shape().to_string().c_str(),
                mesh.size(), mtk::kokkos_description());

  // Each rank's coordinates, printed by rank 0 in rank order.
  std::vector<int> all(static_cast<size_t>(mesh.size() * mesh.ndims()));
  mesh.comm().allgather_into(mesh.coordinates().data(), all.data(),
                             static_cast<size_t>(mesh.ndims()));
  if (mesh.rank() == 0)
    for (int r = 0; r < mesh.size(); ++r) {
      std::string coords;
      for (int a = 0; a < mesh.ndims(); ++a)
        coords += (a ? ", " : "") + mesh.shape()[a].name + "=" +
                  std::to_string(all[static_cast<size_t>(r * mesh.ndims() + a)]);
      std::printf("  rank %d: (%s)\n", r, coords.c_str());
    }

  // A [batch=8, d_model=4] tensor laid out batch-split over the first mesh dim; sum over it.
  const std::string first = mesh.shape()[0].name;
  const mtk::Shape shape{{"batch", 8 * mesh.shape()[0].size}, {"d_model", 4}};
  const mtk::TensorLayout layout(shape, mtk::LayoutRules::parse("batch:" + first), mesh.shape(),
                                 "x");
  const mtk::Shape local = layout.slice_shape();
  Kokkos::View<double*> x("x", static_cast<size_t>(local.num_elements()));
  const auto origin = layout.slice_origin(mesh.coordinates());
  const std::int64_t row0 = origin[0], cols = local[1].size;
  Kokkos::parallel_for(
      "mtk_mesh_demo::fill", x.extent(0), KOKKOS_LAMBDA(std::size_t k) {
        x(k) = static_cast<double>(row0 + static_cast<std::int64_t>(k) / cols);
      });
  mtk::allreduce<double>(mesh, {0}, x, mtk::ReduceOp::sum);
  auto gathered = mtk::allconcat<double>(mesh, 0, local, 0, x);
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), x);
  // Element [0,0] on each rank sums row p*8 over the P slices: 8 * P * (P - 1) / 2.
  const double P = static_cast<double>(mesh.shape()[0].size);
  const double want = 8.0 * P * (P - 1.0) / 2.0;
  if (mesh.rank() == 0) {
    std::printf("allreduce over '%s' of %s sliced %s: element [0,0] = %g (expected %g)\n",
                first.c_str(), shape.to_string().c_str(), local.to_string().c_str(), host(0), want);
    std::printf("allconcat over '%s': %zu elements (expected %lld)\n", first.c_str(),
                gathered.extent(0), static_cast<long long>(shape.num_elements()));
  }
  const bool ok = mesh.comm().min(
      host(0) == want && static_cast<std::int64_t>(gathered.extent(0)) == shape.num_elements());
  if (mesh.rank() == 0)
    std::printf("%s\n", ok ? "mesh demo: OK" : "mesh demo: MISMATCH");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return mtk::app_main(argc, argv, {"mtk-mesh-demo", /*every_rank_reports=*/true}, run);
}
