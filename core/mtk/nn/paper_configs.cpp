#include <mtk/base/error.hpp>
#include <mtk/nn/paper_configs.hpp>

namespace mtk::nn {
namespace {

// What changes with the size: the feed-forward width and the number of heads.
struct PaperSize {
  std::int64_t d_ff, num_heads;
};

// Indexed by size + 1 (size -1 is the smallest model).
constexpr PaperSize kLmSizes[] = {{4096, 4},   {8192, 8},     {16384, 16},  {32768, 32},
                                  {65536, 64}, {131072, 128}, {262144, 256}};
constexpr PaperSize kTranslationSizes[] = {{2048, 4},   {4096, 8},   {8192, 16},
                                           {16384, 32}, {32768, 64}, {65536, 128}};

template <std::size_t N>
const PaperSize& size_row(const PaperSize (&table)[N], int size, const char* where) {
  if (size < -1 || size > static_cast<int>(N) - 2)
    fail(where, cat("size ", size, " is not in -1..", N - 2));
  return table[size + 1];
}

// The settings every paper model shares, with those of its family and size.
TransformerConfig paper_config(const PaperSize& s, std::int64_t d_kv,
                               std::int64_t num_encoder_layers, std::int64_t batch,
                               double label_smoothing) {
  TransformerConfig c;
  c.vocab_size = 32000;
  c.d_model = 1024;
  c.d_ff = s.d_ff;
  c.num_heads = s.num_heads;
  c.d_kv = d_kv;
  c.num_layers = 6;
  c.num_encoder_layers = num_encoder_layers;
  c.length = 256;
  c.batch = batch;
  c.label_smoothing = label_smoothing;
  return c;
}

}  // namespace

TransformerConfig paper_lm(int size) {
  return paper_config(size_row(kLmSizes, size, "mtk::nn::paper_lm"), /*d_kv=*/256,
                      /*num_encoder_layers=*/0, /*batch=*/256, /*label_smoothing=*/0.0);
}

TransformerConfig paper_translation(int size) {
  TransformerConfig c =
      paper_config(size_row(kTranslationSizes, size, "mtk::nn::paper_translation"),
                   /*d_kv=*/128, /*num_encoder_layers=*/6, /*batch=*/128,
                   /*label_smoothing=*/0.1);
  c.shared_embedding = true;  // mtf_transformer_paper_tr: shared_embedding=True
  return c;
}

}  // namespace mtk::nn
