#pragma once
// The command line of MTK's tools, one library for all of them: CLI11. Only apps/ includes this;
// the libraries' headers never name a CLI11 type.
//
//   CLI::App app{"Inspects checkpoints.", "mtk-ckpt"};
//   mtk::cli::configure(app);            // --help, --version
//   app.add_option("--run-dir", dir, "...");
//   if (const int status = mtk::cli::parse(app, args, world.rank() == 0); status >= 0)
//     return status;                     // 0 after --help/--version, 2 after a usage error

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace mtk::cli {

/// What `--version` prints: the tool and MTK's version, the git revision it was built from (when
/// known), the Kokkos version and execution space, the MPI library, and the run-time options in
/// force (describe_runtime_options(): each MTK_* variable, its value and whether it was set).
std::string version_text(const std::string& tool);

/// Gives `app` MTK's conventions: --help/-h prints the options to stdout, --version prints
/// version_text(tool) (default: the app's name; a subcommand passes "mtk-ckpt info"); both
/// exit 0.
void configure(CLI::App& app, const std::string& tool = "");

/// Checks for option values, with messages naming the value and what is allowed ("'abc' is not
/// a number > 0"); CLI11's own Range prints the limits of double for PositiveNumber.
CLI::Validator positive_number();
CLI::Validator non_negative_number();
CLI::Validator integer_in(std::int64_t lo, std::int64_t hi);

/// Notes that the deprecated spelling `old_name` was given for `new_name`: parse() prints, where it
/// prints, "warning: OLD is deprecated (accepted until the next release); use NEW".
void note_deprecated(const std::string& old_name, const std::string& new_name);

/// Accepts `old_name`, a spelling of option `new_name` (already on `app`) that the command-line
/// convention (docs/configuration.md#command-lines) renamed, for one release: it sets the same
/// `target`, is hidden from --help, is a usage error together with `new_name`, and is warned
/// about by parse().
template <class T>
CLI::Option* deprecated_alias(CLI::App& app, const std::string& old_name,
                              const std::string& new_name, T& target) {
  CLI::Option* now = app.get_option(new_name);
  CLI::Option* old = app.add_option(old_name, target, "Deprecated: " + new_name)
                         ->group("")
                         ->type_name(now->get_type_name());
  // Run once the words are read, when both options' counts are known.
  old->each([now, old_name, new_name](const std::string&) {
    if (now->count() > 0)
      throw CLI::ValidationError(
          old_name, "given with " + new_name + ", its new spelling: give " + new_name + " only");
    note_deprecated(old_name, new_name);
  });
  return old;
}

/// Parses `args` (the words after the program or subcommand name; `--opt value` and `--opt=value`
/// alike). Returns -1 when the tool should run, else its exit status: 0 after --help or --version
/// (printed to stdout), 2 after a usage error (printed to stderr with a pointer to --help).
/// `print`: whether this process prints (rank 0; every rank gets the same status).
int parse(CLI::App& app, const std::vector<std::string>& args, bool print);

}  // namespace mtk::cli
