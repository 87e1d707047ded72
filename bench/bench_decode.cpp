// Decoding throughput of a small encoder-decoder: beam search with the incremental decoder (keys
// and values cached in the step program) against naive full re-decoding of the whole prefix per
// token (build_transformer re-run, encoder included, as mtk-lm1b sample does). EOS is disabled so
// both decode max_length positions. One JSON object per decoder.
//   mpiexec -n 1 bench_decode [--batch 4] [--beam 4] [--length 64] [--mesh x:1] [--layout ""]

#include <mtk/decode/decode.hpp>
#include <mtk/parallel/environment.hpp>

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  mtk::Environment env(argc, argv);
  std::int64_t batch = 4, beam = 4, length = 64;
  std::string mesh_text = "x:1", layout_text;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--batch")
      batch = std::atoll(v.c_str());
    else if (k == "--beam")
      beam = std::atoll(v.c_str());
    else if (k == "--length")
      length = std::atoll(v.c_str());
    else if (k == "--mesh")
      mesh_text = v;
    else if (k == "--layout")
      layout_text = v;
  }
  if (!std::getenv("OPENBLAS_NUM_THREADS"))
    std::fprintf(stderr, "bench_decode: OPENBLAS_NUM_THREADS is unset; run with =1\n");
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

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
  mtk::Mesh mesh(mtk::MeshShape::parse(mesh_text), MPI_COMM_WORLD);
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
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    if (std::string(name) == "incremental")
      decoder.encode(sources);  // timed: part of the incremental decoder's work per batch
    auto r = mtk::decode::beam_search(decoder.step_function(), batch, c.vocab_size, o);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double hyp_tokens = static_cast<double>(batch * beam * length);
    if (rank == 0)
      std::printf(
          "{\"bench\":\"decode\",\"decoder\":\"%s\",\"ranks\":%d,\"mesh\":\"%s\","
          "\"layout\":\"%s\",\"batch\":%lld,\"beam\":%lld,\"max_length\":%lld,"
          "\"d_model\":%lld,\"layers\":\"%lld+%lld\",\"vocab\":%lld,\"seconds\":%.3f,"
          "\"tokens_per_s\":%.1f,\"hypothesis_tokens_per_s\":%.1f,\"best_score_row0\":%.5f}\n",
          name, mesh.comm().size(), mesh_text.c_str(), layout_text.c_str(),
          static_cast<long long>(batch), static_cast<long long>(beam),
          static_cast<long long>(length), static_cast<long long>(c.d_model),
          static_cast<long long>(c.num_encoder_layers), static_cast<long long>(c.num_layers),
          static_cast<long long>(c.vocab_size), s, static_cast<double>(batch * length) / s,
          hyp_tokens / s, r[0][0].score);
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
