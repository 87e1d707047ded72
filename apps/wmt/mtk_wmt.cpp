// mtk-wmt: the WMT translation experiment (docs/wmt.md).
//
//   mtk-wmt prepare --config apps/wmt/configs/demo.yaml
//   mpiexec -n 2 mtk-wmt train --config apps/wmt/configs/demo.yaml --run-dir run/wmt
//   mpiexec -n 2 mtk-wmt translate --config apps/wmt/configs/demo.yaml --run-dir run/wmt
//       --input test.en.sgm --reference test.fr.sgm --out test.mt.fr
//   mtk-wmt bleu HYP REF [REF...]   corpus BLEU as sacreBLEU computes it (docs/bleu.md)
//   mtk-wmt config-schema           every config key as Markdown tables (docs/configuration.md)
//
// HYP and REF are plain text files, one segment per line, or newstest .sgm files.

#include <mtk/app/app_main.hpp>
#include <mtk/app/exit_status.hpp>
#include <mtk/text/bleu.hpp>
#include <mtk/text/sgm.hpp>

#include "wmt_commands.hpp"
#include "wmt_config.hpp"
#include <cli.hpp>
#include <cstdio>
#include <string>
#include <training.hpp>
#include <vector>

namespace {

const char* const kCommands =
    "Commands:\n"
    "  prepare   shared SentencePiece vocabulary and token shards of the training pairs\n"
    "  train     train the encoder-decoder Transformer (on any number of MPI ranks)\n"
    "  translate translate a text or .sgm file by beam search; BLEU against a reference\n"
    "  bleu      corpus BLEU of a translation against references, equal to sacreBLEU's\n"
    "  config-schema  every config key: type, default, allowed values, meaning (Markdown)\n"
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
  std::int64_t max_line_bytes = mtk::text::kDefaultMaxLineBytes;
  app.add_option("--max-line-bytes", max_line_bytes,
                 "a longer line (segment) is an error; read in bounded memory (1048576)")
      ->type_name("N")
      ->check(mtk::cli::integer_in(1, std::int64_t{1} << 30));
  if (const int status = mtk::cli::parse(app, args, world.rank() == 0); status >= 0)
    return status;

  std::vector<std::vector<std::string>> refs;
  for (const auto& path : references)
    refs.push_back(mtk::text::read_text_lines(path, false, static_cast<std::size_t>(max_line_bytes),
                                              "--max-line-bytes"));
  const auto hyps = mtk::text::read_text_lines(
      hypotheses, false, static_cast<std::size_t>(max_line_bytes), "--max-line-bytes");
  const auto score = mtk::text::corpus_bleu(hyps, refs, options);
  if (world.rank() == 0)
    std::printf("%s\n", (json ? score.json() : score.line()).c_str());
  return mtk::kExitOk;
}

bool is_command(const std::string& c) {
  return c == "bleu" || c == "prepare" || c == "train" || c == "translate" || c == "config-schema";
}

}  // namespace

int main(int argc, char** argv) {
  const std::string command = argc > 1 ? argv[1] : "";
  mtk::AppOptions options;
  options.name = is_command(command) ? "mtk-wmt " + command : "mtk-wmt";
  options.abort_on_local_error = command == "train" || command == "translate";
  // Before MPI and Kokkos start: a stop signal during train's start-up is honoured, not fatal.
  options.stop_signals = command == "train";
  return mtk::app_main(
      argc, argv, options,
      [&](const mtk::Communicator& world, const std::vector<std::string>& args) {
        const std::vector<std::string> rest(args.begin() + (args.empty() ? 0 : 1), args.end());
        if (command == "bleu")
          return bleu_main(world, rest);
        if (command == "prepare")
          return mtk::wmt::prepare_main(world, rest);
        if (command == "train")
          return mtk::wmt::train_main(world, rest);
        if (command == "translate")
          return mtk::wmt::translate_main(world, rest);
        if (command == "config-schema")
          return mtk::app::config_schema_main(rest, "mtk-wmt", mtk::wmt::config_reference());
        // No command, or an unknown one: --help, --version, or a usage error.
        CLI::App app{"The WMT translation experiment (docs/wmt.md).", "mtk-wmt"};
        mtk::cli::configure(app);
        app.footer(kCommands);
        std::string name;
        app.add_option("command", name, "prepare | train | translate | bleu | config-schema")
            ->required()
            ->check(CLI::IsMember({"prepare", "train", "translate", "bleu", "config-schema"}));
        const int status = mtk::cli::parse(app, args, world.rank() == 0);
        return status >= 0 ? status : mtk::kExitUsage;
      });
}
