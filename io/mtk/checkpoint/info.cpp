// What a checkpoint holds (`mtk-ckpt info`), and which directory a path means. Local: no
// communication.

#include <mtk/base/error.hpp>
#include <mtk/checkpoint/impl/format.hpp>
#include <mtk/checkpoint/impl/manifest.hpp>
#include <mtk/checkpoint/impl/metadata.hpp>
#include <mtk/files/files.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>

namespace mtk {

using namespace ckpt;
namespace fs = std::filesystem;

CheckpointInfo checkpoint_info(const std::string& dir_in) {
  const std::string where = "mtk::checkpoint_info";
  const std::string dir = strip_trailing_slashes(dir_in);
  CheckpointInfo info;
  info.path = dir;
  const std::string text = read_whole_file(dir + "/" + kMetadataFile, where);
  StoredCheckpoint st = parse_metadata(text, dir + "/" + kMetadataFile, where);
  info.metadata = st.meta;
  info.variables = st.vars;
  for (const auto& v : st.vars)
    info.variable_bytes += v.bytes;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file(ec))
      info.file_bytes += static_cast<std::int64_t>(e.file_size(ec));
  return info;
}

namespace {

// "float32", "bfloat16" or "float32 and bfloat16": how the variables are stored.
std::string stored_dtypes(const CheckpointInfo& info) {
  bool f32 = false, bf16 = false;
  for (const auto& v : info.variables)
    (v.dtype == "bfloat16" ? bf16 : f32) = true;
  return f32 && bf16 ? "float32 and bfloat16" : bf16 ? "bfloat16" : "float32";
}

}  // namespace

std::string format_checkpoint_info(const CheckpointInfo& info) {
  const auto& m = info.metadata;
  auto mib = [](std::int64_t b) {
    char buf[32];
    if (b < (1 << 20))
      std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(b) / 1024);
    else if (b < (std::int64_t(1) << 30))
      std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1 << 20));
    else
      std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(b) / (1 << 30));
    return std::string(buf);
  };
  auto one_line = [](std::string s, size_t max) {
    for (char& c : s)
      if (c == '\n')
        c = ' ';
    if (s.size() > max)
      s = s.substr(0, max) + "...";
    return s.empty() ? std::string("(none)") : s;
  };
  std::ostringstream os;
  os << "checkpoint     " << info.path << "\n";
  os << "step           " << m.step << " (program step " << m.program_step << ")\n";
  os << "created        " << m.created_utc << " by MTK " << m.mtk_version << ", format "
     << kFormatName << " v" << m.format_version << "\n";
  os << "saved on       " << m.num_ranks << " rank(s), mesh " << m.mesh << "\n";
  os << "layout         " << one_line(m.layout, 200) << "\n";
  os << "data position  " << one_line(m.data_position, 200) << "\n";
  os << "rng state      " << one_line(m.rng_state, 64) << "\n";
  if (!m.init_from.empty())  // train --init-from: where the weights came from
    os << "init from      " << one_line(m.init_from, 400) << "\n";
  const auto config_lines = std::count(m.config_yaml.begin(), m.config_yaml.end(), '\n');
  os << "config         "
     << (m.config_yaml.empty() ? std::string("(none)")
                               : cat(config_lines, " lines in metadata.yaml"))
     << "\n";
  os << "variables      " << info.variables.size() << ", " << mib(info.variable_bytes) << " of "
     << stored_dtypes(info) << "; files " << mib(info.file_bytes) << "\n";
  size_t wn = 4, ws = 5;
  std::vector<std::string> shapes;
  for (const auto& v : info.variables) {
    wn = std::max(wn, v.name.size());
    shapes.push_back(v.shape.to_string());
    ws = std::max(ws, shapes.back().size());
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "  %%-%zus  %%-%zus  %%12s  %%s\n", wn, ws);
  char line[4096];
  std::snprintf(line, sizeof line, buf, "name", "shape", "bytes", "layout saved with");
  os << line;
  for (size_t k = 0; k < info.variables.size(); ++k) {
    const auto& v = info.variables[k];
    std::snprintf(line, sizeof line, buf, v.name.c_str(), shapes[k].c_str(),
                  std::to_string(v.bytes).c_str(), v.layout.c_str());
    os << line;
  }
  return os.str();
}

std::string format_checkpoint_list(const std::vector<std::string>& paths, const std::string& latest,
                                   int* corrupt) {
  const std::string where = "mtk::format_checkpoint_list";
  int bad = 0;
  std::string out;
  for (const auto& p : paths) {
    const char* mark = p == latest ? "  <- latest" : "";
    try {
      std::string metadata_text, slices_text;
      std::vector<std::string> errors;
      read_small_files(p, &metadata_text, &slices_text, &errors, where);
      if (!errors.empty())
        fail(where, errors.front());
      const CheckpointInfo info = checkpoint_info(p);
      char line[128];
      std::snprintf(line, sizeof line, "  step %lld  %s  %.2f MiB",
                    static_cast<long long>(info.metadata.step), info.metadata.created_utc.c_str(),
                    static_cast<double>(info.file_bytes) / (1 << 20));
      out += p + line + mark + "\n";
    } catch (const std::exception& e) {
      // One damaged checkpoint must not hide the others.
      ++bad;
      // The reason may quote the damaged bytes: show them printable, on one line.
      std::string reason = e.what();
      for (char& c : reason)
        if (c < 0x20 || c == 0x7f)
          c = '?';
      out += cat(p, "  CORRUPT: ", reason, mark, "\n");
    }
  }
  if (corrupt != nullptr)
    *corrupt = bad;
  return out;
}

std::string resolve_checkpoint_path(const std::string& path_in) {
  const std::string where = "mtk::resolve_checkpoint_path";
  const std::string path = strip_trailing_slashes(path_in);
  std::error_code ec;
  if (fs::is_regular_file(path + "/" + kMetadataFile, ec))
    return path;
  for (const std::string& root : {path, path + "/checkpoints"}) {
    if (!fs::is_regular_file(root + "/" + kLatestFile, ec))
      continue;
    const std::string name = trim(read_whole_file(root + "/" + kLatestFile, where));
    std::int64_t step = 0;
    if (!parse_step_dir(name, &step))
      fail(where, cat("'", root, "/", kLatestFile, "' does not name a checkpoint ('", name, "')"));
    return root + "/" + name;
  }
  fail(where, cat("'", path,
                  "' is neither a checkpoint directory (no metadata.yaml) nor a run or "
                  "checkpoints directory with a 'latest' file"));
}

}  // namespace mtk
