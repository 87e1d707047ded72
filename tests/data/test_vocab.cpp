// SentencePiece vocabularies: training, reserved ids, encode/decode round trips, save/load.
#include <mtk/base/error.hpp>
#include <mtk/data/vocab.hpp>

#include <gtest/gtest.h>

#include "lm_data_test_util.hpp"

namespace {

using mtk::Vocab;

const std::vector<std::string>& corpus() {
  static const auto lines = mtk::test::synthetic_sentences(2000, 7);
  return lines;
}

mtk::VocabOptions small_options(int size = 400) {
  mtk::VocabOptions o;
  o.vocab_size = size;
  return o;
}

const Vocab& trained() {
  static const Vocab v = Vocab::train(corpus(), small_options());
  return v;
}

TEST(Vocab, ReservedIds) {
  const Vocab& v = trained();
  EXPECT_EQ(v.size(), 400);
  EXPECT_EQ(v.piece(Vocab::kPadId), "<pad>");
  EXPECT_EQ(v.piece(Vocab::kEosId), "</s>");
  EXPECT_EQ(v.piece(Vocab::kUnkId), "<unk>");
  EXPECT_EQ(v.id("</s>"), Vocab::kEosId);
  EXPECT_EQ(v.id("no-such-piece-here"), Vocab::kUnkId);
}

TEST(Vocab, RoundTripOnTrainingText) {
  const Vocab& v = trained();
  for (std::size_t i = 0; i < 200; ++i) {
    const std::string& s = corpus()[i];
    const auto ids = v.encode(s);
    ASSERT_FALSE(ids.empty());
    for (auto id : ids) {
      EXPECT_GT(id, Vocab::kEosId) << s;  // never pad or end-of-sentence
      EXPECT_LT(id, v.size());
    }
    EXPECT_EQ(v.decode(ids), s);
  }
}

TEST(Vocab, UnseenCharactersUseBytesNotUnk) {
  const Vocab& v = trained();
  const std::string text = "Zürich ☃ costs 42 € .";
  const auto ids = v.encode(text);
  for (auto id : ids)
    EXPECT_NE(id, Vocab::kUnkId);
  EXPECT_EQ(v.decode(ids), text);
}

TEST(Vocab, DecodeDropsPadAndEos) {
  const Vocab& v = trained();
  auto ids = v.encode(corpus()[0]);
  ids.insert(ids.begin(), Vocab::kPadId);
  ids.push_back(Vocab::kEosId);
  EXPECT_EQ(v.decode(ids), corpus()[0]);
  EXPECT_THROW(v.decode({v.size()}), mtk::Error);
  EXPECT_THROW(v.piece(-1), mtk::Error);
}

TEST(Vocab, TrainingIsDeterministic) {
  const Vocab again = Vocab::train(corpus(), small_options());
  EXPECT_EQ(again.fingerprint(), trained().fingerprint());
  EXPECT_EQ(again.serialized(), trained().serialized());
}

TEST(Vocab, SaveLoadAndFromSerialized) {
  mtk::test::TempDir dir;
  const std::string path = dir / "vocab.model";
  trained().save(path);
  const Vocab loaded = Vocab::load(path);
  EXPECT_EQ(loaded.fingerprint(), trained().fingerprint());
  EXPECT_EQ(loaded.origin(), path);
  EXPECT_EQ(loaded.encode(corpus()[5]), trained().encode(corpus()[5]));
  const Vocab copy = Vocab::from_serialized(trained().serialized());
  EXPECT_EQ(copy.encode(corpus()[6]), trained().encode(corpus()[6]));
  trained().save_pieces(dir / "vocab.pieces");
  EXPECT_EQ(mtk::test::read_text(dir / "vocab.pieces").substr(0, 6), "<pad>\t");
}

TEST(Vocab, TrainFromFileAndBpe) {
  mtk::test::TempDir dir;
  mtk::test::write_text(dir / "text.txt", mtk::test::join_lines(corpus()));
  auto o = small_options(350);
  o.model_type = "bpe";
  const Vocab v = Vocab::train_from_file(dir / "text.txt", o);
  EXPECT_EQ(v.size(), 350);
  EXPECT_EQ(v.decode(v.encode(corpus()[3])), corpus()[3]);
}

TEST(Vocab, Errors) {
  EXPECT_THROW(Vocab::load("/nonexistent/vocab.model"), mtk::Error);
  try {
    Vocab::from_serialized("this is not a model", "garbage.model");
    FAIL() << "no error";
  } catch (const mtk::Error& e) {
    EXPECT_NE(std::string(e.what()).find("garbage.model"), std::string::npos) << e.what();
  }
  try {
    Vocab::train(corpus(), small_options(100000));
    FAIL() << "no error";
  } catch (const mtk::Error& e) {
    EXPECT_NE(std::string(e.what()).find("100000"), std::string::npos) << e.what();
  }
  auto o = small_options();
  o.model_type = "neural";
  EXPECT_THROW(Vocab::train(corpus(), o), mtk::Error);
  EXPECT_THROW(Vocab::train({}, small_options()), mtk::Error);
  const Vocab empty;
  EXPECT_THROW(empty.size(), mtk::Error);
}

}  // namespace
