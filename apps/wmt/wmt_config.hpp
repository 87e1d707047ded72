#pragma once
// The config of mtk-wmt: the shared sections (model, train, checkpoint;
// <mtk/config/model_config.hpp>, <mtk/config/training_config.hpp>) and its own `data` (what prepare
// reads and writes) and `translate`, each from one field table (docs/configuration.md).

#include <mtk/config/config.hpp>
#include <mtk/config/schema.hpp>
#include <mtk/config/training_config.hpp>
#include <mtk/nn/transformer_config.hpp>

#include <cstdint>
#include <string>

namespace mtk::wmt {

/// The `data` section.
struct DataSettings {
  std::string dir;    ///< the prepared folder
  std::string train;  ///< comma-separated items: PREFIX, FILE.tsv or SOURCE|TARGET (PairSource)
  std::string source = "en", target = "fr";
  std::string dev_source, dev_reference, test_source, test_reference;
  std::string dev_tsv, test_tsv;  ///< instead of source + reference: one TSV of pairs
  double test_fraction = 0;       ///< instead of test files: pairs held out of data.train
  int vocab_size = 8000;
  std::string model_type = "unigram";
  std::int64_t max_length = nn::TransformerConfig().length;  ///< read: model.length
  std::int64_t max_line_bytes = 1024, vocab_sample_pairs = 1000000;
  bool pack = false;  ///< train: several pairs a row (PairStream)
};

/// The `translate` section: translate's defaults.
struct TranslateSettings {
  /// How an input line is cut before translating (translate_pieces.hpp).
  enum class Split { none, long_lines, sentences } split = Split::long_lines;
  std::int64_t beam = 4;
  double alpha = 0.6;
  std::int64_t batch = 0;       ///< 0: model.batch
  std::int64_t max_length = 0;  ///< 0: model.length
  double min_length_ratio = 0;  ///< no EOS before this share of the source's tokens
};

/// Every setting of train and translate outside `model`, `mesh` and `layout`.
struct Settings {
  config::TrainingSettings train;
  DataSettings data;
  TranslateSettings translate;
};

const config::Schema<DataSettings>& data_schema();
const config::Schema<TranslateSettings>& translate_schema();

/// The `data` section alone (prepare); data.max_length defaults to model.length.
DataSettings read_data_settings(const Config& config);
/// Every section but `model` (train, translate): unknown sections and keys, and values out of
/// range, are errors naming the file.
Settings read_settings(const Config& config);

/// The effective config (--print-config, config.resolved.yaml): `given` with `model` and every
/// section of `settings` written in full.
Config effective_config(const Config& given, const Settings& settings,
                        const nn::TransformerConfig& model, int ranks);

/// The Markdown reference of every section mtk-wmt reads (`mtk-wmt config-schema`).
std::string config_reference();

}  // namespace mtk::wmt
