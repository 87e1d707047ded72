#include "wmt_config.hpp"

#include <mtk/config/known_keys.hpp>
#include <mtk/config/model_config.hpp>

#include "training.hpp"

namespace mtk::wmt {
namespace {

using config::Schema;

// The top-level sections; those after `layout` are on field tables.
const std::vector<std::string> kSections = {"mesh", "layout",     "model",     "train",
                                            "data", "checkpoint", "translate", "program"};

Schema<DataSettings> make_data_schema() {
  using D = DataSettings;
  Schema<D> s;
  s.text("dir", &D::dir, "the prepared folder: what prepare writes and train and translate read")
      .default_text("dir", "(required)")
      .text("train", &D::train,
            "the training pairs, comma-separated items, each `PREFIX` (`PREFIX.<source>` and "
            "`PREFIX.<target>`), `FILE.tsv` (`source<TAB>target` a line) or `SOURCE|TARGET` (two "
            "aligned files), plain or .gz; prepare requires it")
      .text("source", &D::source, "file suffix of the source language")
      .text("target", &D::target, "file suffix of the target language")
      .text("dev.source", &D::dev_source, "dev set source (.sgm or text), encoded as dev shards")
      .text("dev.reference", &D::dev_reference, "dev set reference, line-aligned with its source")
      .text("test.source", &D::test_source, "test set source, checked by prepare")
      .text("test.reference", &D::test_reference, "test set reference, checked by prepare")
      .text("dev.tsv", &D::dev_tsv,
            "instead of dev.source and dev.reference: one TSV file (`source<TAB>target` a line); "
            "prepare writes its sides to data.dir/dev.{source,reference}.txt")
      .text("test.tsv", &D::test_tsv,
            "instead of test.source and test.reference: one TSV file; prepare writes its sides to "
            "data.dir/test.{source,reference}.txt, translate's --input and --reference")
      .real(
          "test.fraction", &D::test_fraction, 0.0, 0.5,
          "instead of test files: each training pair held out with this probability (by a "
          "hash of item and line), not trained on, written to data.dir/test.{source,reference}.txt")
      .integer("vocab_size", &D::vocab_size, 8, 1 << 24,
               "pieces of the shared SentencePiece vocabulary of both languages")
      .choice("model_type", &D::model_type, {"unigram", "bpe", "word", "char"},
              "SentencePiece model type")
      .integer("max_length", &D::max_length, 2, 1 << 20,
               "tokens a side with EOS; longer pairs are skipped")
      .default_text("max_length", "model.length")
      .integer("max_line_bytes", &D::max_line_bytes, 1, 1 << 30,
               "longer lines are skipped (read in bounded memory)")
      .integer("vocab_sample_pairs", &D::vocab_sample_pairs, 1, std::int64_t{1} << 40,
               "the first usable pairs the vocabulary is trained on")
      .boolean("pack", &D::pack,
               "train: as many pairs a row as fit in model.length on both sides (segment ids "
               "keep them apart, as Tensor2Tensor's packed problems); false: one pair a row");
  return s;
}

Schema<TranslateSettings> make_translate_schema() {
  using T = TranslateSettings;
  Schema<T> s;
  s.integer("beam", &T::beam, 1, 64, "beam size; 1 is greedy (--beam overrides it)")
      .real("alpha", &T::alpha, 0.0, 10.0, "length penalty exponent (--alpha overrides it)")
      .integer("batch", &T::batch, 0, 1 << 20,
               "sentences per beam search; 0: model.batch (--batch overrides it)")
      .integer("max_length", &T::max_length, 0, 1 << 20,
               "tokens generated at most, EOS included; 0: model.length (--max-length)")
      .real("min_length_ratio", &T::min_length_ratio, 0.0, 10.0,
            "a translation has at least this many tokens per source token (EOS is ruled out "
            "before); 0: any length")
      .choice("split", &T::split,
              {{"long", T::Split::long_lines},
               {"sentences", T::Split::sentences},
               {"none", T::Split::none}},
              "long: a line of more than model.length - 1 tokens is translated sentence by "
              "sentence (a sentence still too long, in pieces at word boundaries), the "
              "translations joined; sentences: every line so; none: a long line is cut at "
              "model.length - 1 tokens");
  return s;
}

}  // namespace

const Schema<DataSettings>& data_schema() {
  static const Schema<DataSettings> schema = make_data_schema();
  return schema;
}

const Schema<TranslateSettings>& translate_schema() {
  static const Schema<TranslateSettings> schema = make_translate_schema();
  return schema;
}

DataSettings read_data_settings(const Config& c) {
  DataSettings start;
  if (c.has("model"))
    start.max_length = transformer_config_from(c).length;
  return data_schema().read(c, "data", start);
}

Settings read_settings(const Config& c) {
  reject_unknown_sections(c, "mtk-wmt", kSections);
  c.require_section("model");
  Settings s;
  s.train = config::read_training_settings(c);
  s.data = read_data_settings(c);
  s.translate = translate_schema().read(c, "translate");
  return s;
}

Config effective_config(const Config& given, const Settings& settings,
                        const nn::TransformerConfig& model, int ranks) {
  return app::effective_config(
      given, {kSections.begin() + 2, kSections.end()},
      [&](Config& out) {
        write_transformer_config(out, model);
        config::write_training_settings(out, settings.train);
        data_schema().write(out, "data", settings.data);
        translate_schema().write(out, "translate", settings.translate);
      },
      ranks);
}

std::string config_reference() {
  return app::shared_config_reference() +
         config::markdown_block("wmt.data", data_schema().markdown("data")) +
         config::markdown_block("wmt.translate", translate_schema().markdown("translate"));
}

}  // namespace mtk::wmt
