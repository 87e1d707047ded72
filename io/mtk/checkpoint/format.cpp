#include <mtk/base/error.hpp>
#include <mtk/checkpoint/impl/format.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <sstream>

namespace mtk::ckpt {

namespace fs = std::filesystem;

std::string csv(const std::vector<std::int64_t>& v) {
  if (v.empty())
    return "-";
  std::string s;
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

std::string bracket(const std::vector<std::int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::vector<std::int64_t> parse_csv(const std::string& text, const std::string& where,
                                    const std::string& what) {
  std::vector<std::int64_t> out;
  if (text == "-")
    return out;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || errno != 0 || v < 0)
      fail(where, cat(what, ": '", text, "' is not a list of non-negative integers"));
    out.push_back(v);
  }
  return out;
}

std::vector<std::int64_t> sizes_of(const Shape& s) {
  std::vector<std::int64_t> v;
  for (const auto& d : s.dims())
    v.push_back(d.size);
  return v;
}

std::int64_t product(const std::vector<std::int64_t>& v) {
  std::int64_t p = 1;
  for (auto x : v)
    p *= x;
  return p;
}

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos)
    return "";
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line))
    if (!line.empty())
      out.push_back(line);
  return out;
}

bool parse_step_dir(const std::string& name, std::int64_t* step) {
  if (name.size() <= 5 || name.compare(0, 5, "step-") != 0)
    return false;
  for (size_t i = 5; i < name.size(); ++i)
    if (name[i] < '0' || name[i] > '9')
      return false;
  if (name.size() > 5 + 18)
    return false;
  *step = std::stoll(name.substr(5));
  return true;
}

bool complete_checkpoint(const fs::path& dir) {
  std::error_code ec;
  for (const char* f : {kVariablesFile, kMetadataFile, kSlicesFile, kManifestFile})
    if (!fs::is_regular_file(dir / f, ec))
      return false;
  return true;
}

std::vector<std::pair<std::int64_t, std::string>> scan_checkpoints(const std::string& root) {
  std::vector<std::pair<std::int64_t, std::string>> out;
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    return out;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    std::int64_t step = 0;
    const std::string name = entry.path().filename().string();
    if (entry.is_directory(ec) && parse_step_dir(name, &step) && complete_checkpoint(entry.path()))
      out.emplace_back(step, name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Variable names become HDF5 link names under /variables: '/' would make groups (and a variable
// "w" next to a slot "w/rms" cannot be both a dataset and a group), so '%' and '/' are
// percent-encoded ("layer_0/w/rms" -> "layer_0%2Fw%2Frms"), as are the names "." and "..".
// The dataset's attribute "mtk_name" holds the name unencoded.
std::string dataset_path(const std::string& name, const std::string& where) {
  if (name.empty())
    fail(where, "a variable has an empty name");
  std::string link;
  for (char c : name) {
    if (c == '%')
      link += "%25";
    else if (c == '/')
      link += "%2F";
    else
      link += c;
  }
  if (link == ".")
    link = "%2E";
  if (link == "..")
    link = "%2E%2E";
  return kGroupPrefix + link;
}

}  // namespace mtk::ckpt
