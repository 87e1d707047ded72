#include "cli.hpp"

#include <mtk/base/error.hpp>
#include <mtk/base/runtime_options.hpp>
#include <mtk/parallel/environment.hpp>
#include <mtk/version.hpp>

#include <mpi.h>

#include "mtk_git_revision.hpp"
#include <algorithm>
#include <cmath>
#include <iostream>

namespace mtk::cli {

std::string version_text(const std::string& tool) {
  std::string text = tool + " (MTK " + mtk::version() + ")";
  const std::string revision = MTK_GIT_REVISION;
  if (!revision.empty())
    text += ", git " + revision;
  text += "\n";
  text += std::string(kokkos_description()) + "\n";
  char mpi[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int length = 0;
  MPI_Get_library_version(mpi, &length);
  std::string library(mpi, static_cast<size_t>(std::max(0, length)));
  library = library.substr(0, library.find('\n'));  // MPICH appends its configure options
  std::replace(library.begin(), library.end(), '\t', ' ');
  text += "MPI: " + library + "\n";
  text += describe_runtime_options();
  return text;
}

void configure(CLI::App& app, const std::string& tool) {
  app.set_help_flag("-h,--help", "Print this help and exit");
  const std::string name = tool.empty() ? app.get_name() : tool;
  app.set_version_flag(
      "--version", [name] { return version_text(name); }, "Print version information and exit");
  app.get_formatter()->column_width(34);
}

namespace {

// `text` as a whole number (no trailing characters), or false.
bool to_double(const std::string& text, double& v) {
  try {
    std::size_t used = 0;
    v = std::stod(text, &used);
    return used == text.size() && std::isfinite(v);
  } catch (const std::exception&) {
    return false;
  }
}

CLI::Validator number_check(bool zero_allowed) {
  const std::string what = zero_allowed ? "a number >= 0" : "a number > 0";
  return CLI::Validator(
      [zero_allowed, what](std::string& text) -> std::string {
        double v = 0;
        if (!to_double(text, v) || v < 0 || (v == 0 && !zero_allowed))
          return "'" + text + "' is not " + what;
        return "";
      },
      zero_allowed ? "NUMBER>=0" : "NUMBER>0");
}

}  // namespace

CLI::Validator positive_number() {
  return number_check(false);
}

CLI::Validator non_negative_number() {
  return number_check(true);
}

CLI::Validator integer_in(std::int64_t lo, std::int64_t hi) {
  const std::string what = "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, what](std::string& text) -> std::string {
        try {
          std::size_t used = 0;
          const long long v = std::stoll(text, &used);
          if (used == text.size() && v >= lo && v <= hi)
            return "";
        } catch (const std::exception&) {
        }
        return "'" + text + "' is not " + what;
      },
      "INT in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

namespace {

std::vector<std::string>& deprecated_notes() {
  static std::vector<std::string> notes;
  return notes;
}

}  // namespace

void note_deprecated(const std::string& old_name, const std::string& new_name) {
  const std::string note = cat("warning: ", old_name,
                               " is deprecated (accepted until the next release); use ", new_name);
  auto& notes = deprecated_notes();
  if (std::find(notes.begin(), notes.end(), note) == notes.end())  // once, however often given
    notes.push_back(note);
}

int parse(CLI::App& app, const std::vector<std::string>& args, bool print) {
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them reversed
  deprecated_notes().clear();
  try {
    app.parse(reversed);
    std::string name = app.get_name();
    for (const CLI::App* sub : app.get_subcommands())
      name += " " + sub->get_name();
    for (const auto& note : deprecated_notes())
      if (print)
        std::cerr << name << ": " << note << "\n" << std::flush;
    deprecated_notes().clear();
    return -1;
  } catch (const CLI::CallForHelp&) {
    if (print)
      std::cout << app.help() << std::flush;
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    if (print)
      std::cout << app.help("", CLI::AppFormatMode::All) << std::flush;
    return 0;
  } catch (const CLI::CallForVersion& e) {
    if (print)
      std::cout << e.what() << "\n" << std::flush;
    return 0;
  } catch (const CLI::ParseError& e) {
    if (print) {
      // The command that failed: a subcommand's name when one was selected.
      std::string name = app.get_name();
      for (const CLI::App* sub : app.get_subcommands())
        name += " " + sub->get_name();
      std::cerr << name << ": " << e.what() << "\n(`" << name << " --help` lists the options)\n"
                << std::flush;
    }
    return 2;
  }
}

}  // namespace mtk::cli
