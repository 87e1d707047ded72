#include <mtk/base/error.hpp>
#include <mtk/data/prepare_record.hpp>
#include <mtk/files/files.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace mtk {

namespace fs = std::filesystem;

void write_prepare_command(const std::string& dir, const std::string& command) {
  write_file_atomically((fs::path(dir) / kPrepareCommandFile).string(), command + "\n",
                        "mtk::write_prepare_command");
}

std::string recorded_prepare_command(const std::string& dir) {
  std::ifstream in(fs::path(dir) / kPrepareCommandFile);
  std::string line;
  if (!in || !std::getline(in, line))
    return "";
  while (!line.empty() && (line.back() == '\r' || line.back() == ' '))
    line.pop_back();
  return line;
}

std::string prepare_again_advice(const std::string& file, const std::string& tool) {
  const fs::path parent = fs::path(file).parent_path();
  for (const fs::path& dir : {parent, parent.parent_path()}) {
    const std::string command = recorded_prepare_command(dir.empty() ? "." : dir.string());
    if (!command.empty())
      return cat("run `", command, "` again (the settings that prepared ",
                 dir.empty() ? "." : dir.string(),
                 ": it keeps the vocabulary and encodes the damaged files again)");
  }
  return cat("run `", tool, "` again with the settings that prepared the folder");
}

std::string shell_quote(const std::string& text) {
  if (!text.empty() && text.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                              "0123456789_-./=:,+@%") == std::string::npos)
    return text;
  std::string out = "'";
  for (char c : text)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::vector<std::pair<std::string, std::string>> settings_words(const std::string& line) {
  std::vector<std::pair<std::string, std::string>> out;
  const auto colon = line.find(": ");
  std::istringstream in(colon == std::string::npos ? line : line.substr(colon + 2));
  std::string word;
  while (in >> word) {
    const auto eq = word.find('=');
    if (eq != std::string::npos)
      out.emplace_back(word.substr(0, eq), word.substr(eq + 1));
  }
  return out;
}

}  // namespace mtk
