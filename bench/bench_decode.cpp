// Decoding throughput of a small encoder-decoder: beam search with the incremental decoder (keys
// and values cached in the step program) against naive full re-decoding of the whole prefix per
// token (build_transformer re-run, encoder included, as mtk-lm1b sample does). EOS is disabled so
// both decode max_length positions. One JSON object per decoder.
//   mpiexec -n 1 bench_decode [--batch 4] [--beam 4] [--length 64] [--mesh x:1] [--layout ""]

#include <mtk/app/app_main.hpp>
#include <mtk/decode/decode.hpp>

#include <mpi.h>

#include "cli.hpp"
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

namespace {

int run(const mtk::Communicator& world, const std::vector<std::string>& args) {
  std::int64_t batch = 4, beam = 4, length = 64;
  std::string mesh_text = "x:1", layout_text;
  CLI::App app{
      "Beam-search decoding throughput: the incremental decoder against full "
      "re-decoding per token; one JSON object per decoder.",
      "bench_decode"};
  mtk::cli::configure(app);
  app.add_option("--batch", batch, "Sentences (default 4)")->check(mtk::cli::integer_in(1, 4096));
  app.add_option("--beam", beam, "Beam size (default 4)")->check(mtk::cli::integer_in(1, 256));
  app.add_option("--length", length, "Positions decoded, twice the source length (default 64)")
      ->check(mtk::cli::integer_in(2, 65536));
  app.add_option("--mesh", mesh_text, "The mesh (default x:1)")->type_name("M");
  app.add_option("--layout", layout_text, "The layout rules (default none)")->type_name("L");
  if (const int status = mtk::cli::parse(app, args, world.rank() == 0); status >= 0)
    return status;
  if (!std::getenv("OPENBLAS_NUM_THREADS") && world.rank() == 0)
    std::fprintf(stderr, "bench_decode: OPENBLAS_NUM_THREADS is unset; run with =1\n");
  const int rank = world.rank();

  mtk::nn::TransformerConfig c;
  c.vocab_size = 1024;
  c.d_model = 128;
  c.d_ff = 512;
  c.num_heads = 4;
  c.d_kv = 32;
  c.num_layers = 2;
  c.num_encoder_layers = 2;
  c.length = length;
  mtk::nn::DecodingShape shape;
  shape.batch = batch;
  shape.beam = beam;
  mtk::Mesh mesh(mtk::MeshShape::parse(mesh_text), world);
  const mtk::LayoutRules rules = mtk::LayoutRules::parse(layout_text);
  std::vector<std::vector<std::int32_t>> sources(static_cast<size_t>(batch));
  for (size_t b = 0; b < sources.size(); ++b)
    for (std::int64_t i = 0; i < length / 2; ++i)
      sources[b].push_back(static_cast<std::int32_t>(
          2 + (b * 7 + static_cast<size_t>(i) * 13) % static_cast<size_t>(c.vocab_size - 2)));
  mtk::decode::BeamSearchOptions o;
  o.beam_size = beam;
  o.max_length = length;
  o.eos_id = -1;  // decode every position

  auto time_search = [&](auto& decoder, const char* name) {
    decoder.encode(sources);  // outside the timing for the full decoder (it only keeps them)
    world.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    if (std::string(name) == "incremental")
      decoder.encode(sources);  // timed: part of the incremental decoder's work per batch
    auto r = mtk::decode::beam_search(decoder.step_function(), batch, c.vocab_size, o);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double hyp_tokens = static_cast<double>(batch * beam * length);
    if (rank == 0) {
      nlohmann::ordered_json j;
      j["bench"] = "decode";
      j["decoder"] = name;
      j["ranks"] = mesh.comm().size();
      j["mesh"] = mesh_text;
      j["layout"] = layout_text;
      j["batch"] = batch;
      j["beam"] = beam;
      j["max_length"] = length;
      j["d_model"] = c.d_model;
      j["layers"] = std::to_string(c.num_encoder_layers) + "+" + std::to_string(c.num_layers);
      j["vocab"] = c.vocab_size;
      j["seconds"] = s;
      j["tokens_per_s"] = static_cast<double>(batch * length) / s;
      j["hypothesis_tokens_per_s"] = hyp_tokens / s;
      j["best_score_row0"] = r[0][0].score;
      std::printf("%s\n", j.dump().c_str());
    }
    std::fflush(stdout);
  };
  {
    mtk::decode::IncrementalDecoder inc(c, shape, mesh, rules);
    time_search(inc, "incremental");
  }
  {
    mtk::decode::FullDecoder full(c, shape, mesh, rules);
    time_search(full, "full_redecode");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return mtk::app_main(argc, argv, {"bench_decode", /*every_rank_reports=*/true}, run);
}
