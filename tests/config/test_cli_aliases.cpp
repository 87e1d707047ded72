// The command-line convention's deprecated spellings (docs/configuration.md#command-lines): an old
// option name sets the same variable, prints one warning naming the new one, is left out of
// --help, and is a usage error together with the new one.

#include <gtest/gtest.h>

#include "cli.hpp"
#include <string>
#include <vector>

namespace {

struct Parsed {
  int status = 0;
  std::string out, err;
};

Parsed parse(const std::vector<std::string>& args, bool print = true) {
  CLI::App app{"Translates.", "mtk-test"};
  mtk::cli::configure(app);
  std::string out;
  app.add_option("--out", out, "Where the translations go")->type_name("FILE");
  mtk::cli::deprecated_alias(app, "--output", "--out", out);
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  Parsed p;
  p.status = mtk::cli::parse(app, args, print);
  p.out = testing::internal::GetCapturedStdout();
  p.err = testing::internal::GetCapturedStderr();
  if (p.status < 0)
    p.out = out;  // the value the option got
  return p;
}

}  // namespace

TEST(CliAliases, NewSpellingSetsTheValueQuietly) {
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"--out", "t.fr"}, {"--out=t.fr"}}) {
    const Parsed p = parse(args);
    EXPECT_EQ(p.status, -1);
    EXPECT_EQ(p.out, "t.fr");
    EXPECT_EQ(p.err, "");
  }
}

TEST(CliAliases, OldSpellingSetsTheSameValueWithOneWarning) {
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"--output", "t.fr"}, {"--output=t.fr"}}) {
    const Parsed p = parse(args);
    EXPECT_EQ(p.status, -1);
    EXPECT_EQ(p.out, "t.fr");
    EXPECT_EQ(p.err,
              "mtk-test: warning: --output is deprecated (accepted until the next release); "
              "use --out\n");
  }
  // Ranks that do not print stay quiet; a later parse does not repeat an earlier warning.
  EXPECT_EQ(parse({"--output", "t.fr"}, false).err, "");
  EXPECT_EQ(parse({"--out", "t.fr"}).err, "");
}

TEST(CliAliases, OldSpellingIsHiddenAndExcludesTheNew) {
  const Parsed help = parse({"--help"});
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("--out"), std::string::npos) << help.out;
  EXPECT_EQ(help.out.find("--output"), std::string::npos) << help.out;
  const Parsed both = parse({"--out", "a", "--output", "b"});
  EXPECT_EQ(both.status, 2);
  EXPECT_NE(both.err.find("--output: given with --out, its new spelling: give --out only"),
            std::string::npos)
      << both.err;
}
