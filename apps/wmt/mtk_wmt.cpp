// mtk-wmt: the WMT translation experiment (docs/wmt.md).
//
//   mtk-wmt bleu HYP REF [REF...]   corpus BLEU as sacreBLEU computes it (docs/bleu.md)
//
// HYP and REF are plain text files, one segment per line, or newstest .sgm files.

#include <mtk/app/app_main.hpp>
#include <mtk/app/exit_status.hpp>
#include <mtk/text/bleu.hpp>
#include <mtk/text/sgm.hpp>

#include <cli.hpp>
#include <cstdio>
#include <string>
#include <vector>

namespace {

const char* const kCommands =
    "Commands:\n"
    "  bleu      corpus BLEU of a translation against references, equal to sacreBLEU's\n"
    "`mtk-wmt COMMAND --help` lists a command's options (docs/wmt.md, docs/bleu.md).";

int bleu_main(const mtk::Communicator& world, const std::vector<std::string>& args) {
  CLI::App app{
      "Corpus BLEU equal to sacreBLEU 2.x's default (tokenizer 13a, exponential "
      "smoothing); prints sacreBLEU's line and signature, or JSON.",
      "mtk-wmt bleu"};
  mtk::cli::configure(app);
  std::string hypotheses;
  std::vector<std::string> references;
  mtk::text::BleuOptions options;
  bool json = false;
  app.add_option("HYP", hypotheses, "translations, one line per segment (text or .sgm)")
      ->required();
  app.add_option("REF", references, "one or more reference files, line-aligned with HYP")
      ->required();
  app.add_flag("-l,--lowercase", options.lowercase, "compare case-insensitively (case:lc)");
  app.add_option("--tokenize", options.tokenize, "tokenizer: 13a (default) or none")
      ->check(CLI::IsMember({"13a", "none"}));
  app.add_flag("--json", json, "print sacreBLEU's JSON object instead of its text line");
  if (const int status = mtk::cli::parse(app, args, world.rank() == 0); status >= 0)
    return status;

  std::vector<std::vector<std::string>> refs;
  for (const auto& path : references)
    refs.push_back(mtk::text::read_text_lines(path));
  const auto hyps = mtk::text::read_text_lines(hypotheses);
  const auto score = mtk::text::corpus_bleu(hyps, refs, options);
  if (world.rank() == 0)
    std::printf("%s\n", (json ? score.json() : score.line()).c_str());
  return mtk::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string command = argc > 1 ? argv[1] : "";
  mtk::AppOptions options;
  options.name = command == "bleu" ? "mtk-wmt bleu" : "mtk-wmt";
  return mtk::app_main(
      argc, argv, options,
      [&](const mtk::Communicator& world, const std::vector<std::string>& args) {
        if (command == "bleu")
          return bleu_main(world, {args.begin() + 1, args.end()});
        // No command, or an unknown one: --help, --version, or a usage error.
        CLI::App app{"The WMT translation experiment (docs/wmt.md).", "mtk-wmt"};
        mtk::cli::configure(app);
        app.footer(kCommands);
        std::string name;
        app.add_option("command", name, "bleu")->required()->check(CLI::IsMember({"bleu"}));
        const int status = mtk::cli::parse(app, args, world.rank() == 0);
        return status >= 0 ? status : mtk::kExitUsage;
      });
}
