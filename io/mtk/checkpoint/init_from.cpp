// Which weights a fine-tune loads, and the record of where they came from (init_from.hpp).
// restore_variables() is in restore.cpp, beside restore_checkpoint().

#include <mtk/base/error.hpp>
#include <mtk/checkpoint/impl/format.hpp>
#include <mtk/checkpoint/init_from.hpp>
#include <mtk/files/sha256.hpp>

#include <yaml-cpp/yaml.h>

#include <fnmatch.h>

namespace mtk {

bool weight_pattern_matches(const std::string& pattern, const std::string& name) {
  // No FNM_PATHNAME: `*` crosses `/`. The whole name, then each tail after a `/`.
  for (std::size_t from = 0;;) {
    if (fnmatch(pattern.c_str(), name.c_str() + from, 0) == 0)
      return true;
    const std::size_t slash = name.find('/', from);
    if (slash == std::string::npos)
      return false;
    from = slash + 1;
  }
}

WeightSelection select_weights(const std::vector<std::string>& names,
                               const std::vector<std::string>& patterns, const std::string& where) {
  WeightSelection s;
  std::vector<bool> used(patterns.size(), false);
  for (const auto& name : names) {
    bool excluded = false;
    for (std::size_t k = 0; k < patterns.size(); ++k)
      if (weight_pattern_matches(patterns[k], name))
        excluded = used[k] = true;
    (excluded ? s.excluded : s.loaded).push_back(name);
  }
  for (std::size_t k = 0; k < patterns.size(); ++k) {
    if (used[k])
      continue;
    std::string all;
    for (const auto& name : names)
      all += (all.empty() ? "" : ", ") + name;
    fail(where, cat("--init-exclude '", patterns[k],
                    "' matches none of the model's trained variables (a glob matched against "
                    "each name and each tail of it after a '/'): ",
                    all));
  }
  return s;
}

std::string checkpoint_manifest_sha256(const std::string& dir) {
  return sha256_file(dir + "/" + ckpt::kManifestFile);
}

std::string WeightsOrigin::to_yaml() const {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "checkpoint" << YAML::Value << YAML::DoubleQuoted << checkpoint;
  out << YAML::Key << "step" << YAML::Value << static_cast<long long>(step);
  out << YAML::Key << "manifest_sha256" << YAML::Value << manifest_sha256;
  out << YAML::Key << "created_utc" << YAML::Value << created_utc;
  out << YAML::Key << "exclude" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const auto& p : exclude)
    out << YAML::DoubleQuoted << p;
  out << YAML::EndSeq;
  out << YAML::Key << "excluded" << YAML::Value << YAML::Flow << excluded;
  out << YAML::EndMap;
  if (!out.good())
    fail("mtk::WeightsOrigin::to_yaml", out.GetLastError());
  return std::string(out.c_str()) + "\n";
}

WeightsOrigin WeightsOrigin::parse(const std::string& yaml, const std::string& where) {
  WeightsOrigin o;
  try {
    const YAML::Node n = YAML::Load(yaml);
    o.checkpoint = n["checkpoint"].as<std::string>();
    o.step = n["step"].as<long long>();
    o.manifest_sha256 = n["manifest_sha256"].as<std::string>();
    o.created_utc = n["created_utc"].as<std::string>("");
    if (n["exclude"])
      o.exclude = n["exclude"].as<std::vector<std::string>>();
    if (n["excluded"])
      o.excluded = n["excluded"].as<std::vector<std::string>>();
  } catch (const YAML::Exception& e) {
    fail(where, cat("the record of where the weights came from (init_from) does not read: ",
                    e.what(), "\n", yaml));
  }
  return o;
}

std::string WeightsOrigin::summary() const {
  return cat(
      checkpoint, " (step ", step, ", manifest sha256 ", manifest_sha256.substr(0, 16), "...",
      excluded.empty() ? "" : cat("; ", excluded.size(), " variable(s) initialised afresh"), ")");
}

}  // namespace mtk
