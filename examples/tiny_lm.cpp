// A tiny Transformer language model trained for a few steps with Adafactor on every rank
// (data parallel), saved as a sharded HDF5 checkpoint and restored into a fresh program, which then
// continues with exactly the same loss.
//   mpiexec -n 2 mtk-example-tiny-lm [run-dir]

#include <mtk/io.hpp>
#include <mtk/mtk.hpp>

#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

mtk::nn::TransformerConfig tiny_config(std::int64_t batch) {
  mtk::nn::TransformerConfig c;
  c.vocab_size = 64;
  c.d_model = 32;
  c.d_ff = 64;
  c.num_heads = 2;
  c.d_kv = 16;
  c.num_layers = 1;
  c.length = 8;
  c.batch = batch;
  return c;
}

// A model with its training step, lowered on `mesh`.
struct Trainer {
  mtk::Graph graph;
  mtk::nn::ModelGraph model;
  std::unique_ptr<mtk::Program> program;

  Trainer(const mtk::nn::TransformerConfig& config, const mtk::Mesh& mesh) {
    model = mtk::nn::build_transformer(graph, config, /*training=*/true);
    mtk::optim::Adafactor adafactor;
    mtk::optim::LearningRateSchedule lr;
    lr.kind = mtk::optim::LearningRateSchedule::Kind::constant;
    lr.value = 0.01;
    mtk::optim::minimize(model.loss, adafactor, lr);
    program = mtk::lower(graph, mesh, mtk::LayoutRules::parse("batch:batch"));
  }

  float step(const mtk::Shape& shape, const std::vector<std::int32_t>& tokens) {
    std::vector<std::int32_t> inputs, targets, segments(tokens.size(), 1), positions;
    const std::int64_t length = shape[1].size;
    for (size_t i = 0; i < tokens.size(); ++i) {
      const bool last = static_cast<std::int64_t>(i % static_cast<size_t>(length)) == length - 1;
      inputs.push_back(i % static_cast<size_t>(length) == 0 ? 0 : tokens[i - 1]);
      targets.push_back(last ? 1 : tokens[i]);
      positions.push_back(static_cast<std::int32_t>(i % static_cast<size_t>(length)));
    }
    const auto out = program->run({{model.inputs.id(), mtk::HostTensor::ints(shape, inputs)},
                                   {model.targets.id(), mtk::HostTensor::ints(shape, targets)},
                                   {model.segments.id(), mtk::HostTensor::ints(shape, segments)},
                                   {model.positions.id(), mtk::HostTensor::ints(shape, positions)}},
                                  {model.loss});
    return out[0].values<float>()[0];
  }
};

}  // namespace

int main(int argc, char** argv) {
  mtk::Environment env(argc, argv);
  const mtk::Communicator world = mtk::Communicator::world();
  const std::string run_dir = argc > 1 ? argv[1] : "mtk-example-tiny-lm-run";
  const mtk::Mesh mesh(mtk::MeshShape::parse("batch:" + std::to_string(world.size())), world);
  const auto config = tiny_config(2 * world.size());
  const mtk::Shape shape{{"batch", config.batch}, {"length", config.length}};
  std::mt19937 rng(3);  // the same tokens on every rank: each keeps its rows
  std::vector<std::int32_t> tokens(static_cast<size_t>(shape.num_elements()));
  for (auto& t : tokens)
    t = static_cast<std::int32_t>(2 + rng() % 30);

  Trainer trainer(config, mesh);
  std::vector<float> losses;
  for (int s = 0; s < 6; ++s)
    losses.push_back(trainer.step(shape, tokens));
  mtk::CheckpointManager checkpoints(run_dir, /*keep_last_k=*/1, mesh);
  mtk::CheckpointMetadata meta;
  meta.step = static_cast<std::int64_t>(losses.size());
  const std::string saved = checkpoints.save(*trainer.program, meta);

  Trainer restored(config, mesh);
  checkpoints.restore(*restored.program, saved);
  const float next = trainer.step(shape, tokens), again = restored.step(shape, tokens);

  const bool ok = world.min(losses.back() < losses.front() && next == again ? 1 : 0) == 1;
  if (world.rank() == 0) {
    std::printf("tiny LM on %d ranks: loss %.4f -> %.4f in %zu Adafactor steps\n", world.size(),
                losses.front(), losses.back(), losses.size());
    std::printf("saved %s; continued %.6f, restored %.6f: %s\n", saved.c_str(), next, again,
                ok ? "OK" : "MISMATCH");
  }
  return ok ? 0 : 1;
}
