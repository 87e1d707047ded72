// Layouts change where work happens, never the result: one small graph (an einsum, a relu and a
// sum) lowered data-parallel, model-parallel and on one processor gives the same values.
//   mpiexec -n 2 mtk-example-einsum-layouts

#include <mtk/mtk.hpp>

#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace {

struct Model {
  mtk::Graph graph;
  mtk::Tensor x, hidden, total;
};

// x[batch, d_model] -> relu(x . w)[batch, d_ff] -> sum.
void build(Model& m, std::int64_t batch) {
  const mtk::Dimension b{"batch", batch}, d{"d_model", 8}, f{"d_ff", 16};
  m.x = mtk::placeholder(m.graph, "x", mtk::Shape({b, d}));
  const mtk::Tensor w = mtk::variable(m.graph, "w", mtk::Shape({d, f}),
                                      mtk::Initializer::normal(0.5f, 0.0f, /*seed=*/7));
  m.hidden = mtk::relu(mtk::einsum({m.x, w}, mtk::Shape({b, f})));
  m.total = mtk::reduce_sum(m.hidden);
}

std::vector<float> run(const mtk::Mesh& mesh, const std::string& layout, std::int64_t batch,
                       std::vector<float>* hidden) {
  Model m;
  build(m, batch);
  auto program = mtk::lower(m.graph, mesh, mtk::LayoutRules::parse(layout));
  std::vector<float> x(static_cast<size_t>(batch * 8));
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::sin(0.37f * static_cast<float>(i));
  const auto out =
      program->run({{m.x.id(), mtk::HostTensor::floats(m.x.shape(), x)}}, {m.hidden, m.total});
  *hidden = out[0].values<float>();
  return out[1].values<float>();
}

}  // namespace

int main(int argc, char** argv) {
  mtk::Environment env(argc, argv);
  const mtk::Communicator world = mtk::Communicator::world();
  const int n = world.size();
  const std::int64_t batch = 4 * n;
  std::vector<float> h1, hd, hm;
  const mtk::Mesh one(mtk::MeshShape::parse("all:1"), world.split(world.rank()));
  const float t1 = run(one, "", batch, &h1)[0];
  const mtk::Mesh data(mtk::MeshShape::parse("batch:" + std::to_string(n)), world);
  const float td = run(data, "batch:batch", batch, &hd)[0];
  const mtk::Mesh model(mtk::MeshShape::parse("model:" + std::to_string(n)), world);
  const float tm = run(model, "d_ff:model", batch, &hm)[0];

  // Data parallel computes each row as one processor would; model parallel splits the sum.
  bool ok = hd == h1 && std::fabs(tm - t1) <= 1e-5f * std::fabs(t1) && hm.size() == h1.size();
  for (size_t i = 0; ok && i < h1.size(); ++i)
    ok = std::fabs(hm[i] - h1[i]) <= 1e-5f * (1.0f + std::fabs(h1[i]));
  ok = world.min(ok ? 1 : 0) == 1;
  if (world.rank() == 0)
    std::printf("sum on 1 processor %.6f, data parallel %.6f, model parallel %.6f: %s\n", t1, td,
                tm, ok ? "OK" : "MISMATCH");
  return ok ? 0 : 1;
}
