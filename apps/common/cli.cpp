#include "cli.hpp"

#include <mtk/parallel/environment.hpp>
#include <mtk/version.hpp>

#include <mpi.h>

#include "mtk_git_revision.hpp"
#include <algorithm>
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
  text += "MPI: " + library;
  return text;
}

void configure(CLI::App& app, const std::string& tool) {
  app.set_help_flag("-h,--help", "Print this help and exit");
  const std::string name = tool.empty() ? app.get_name() : tool;
  app.set_version_flag(
      "--version", [name] { return version_text(name); }, "Print version information and exit");
  app.get_formatter()->column_width(34);
}

int parse(CLI::App& app, const std::vector<std::string>& args, bool print) {
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them reversed
  try {
    app.parse(reversed);
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
