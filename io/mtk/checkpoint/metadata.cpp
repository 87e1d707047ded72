#include <mtk/base/error.hpp>
#include <mtk/checkpoint/impl/format.hpp>
#include <mtk/checkpoint/impl/metadata.hpp>
#include <mtk/config/config.hpp>

#include <yaml-cpp/yaml.h>

#include <set>

namespace mtk::ckpt {

namespace {

bool survives_yaml(const std::string& value, const YAML::EMITTER_MANIP* style) {
  YAML::Emitter e;
  e << YAML::BeginMap << YAML::Key << "v" << YAML::Value;
  if (style != nullptr)
    e << *style;
  e << value << YAML::EndMap;
  if (!e.good())
    return false;
  try {
    const YAML::Node n = YAML::Load(e.c_str());
    return n["v"].IsScalar() && n["v"].as<std::string>() == value;
  } catch (const std::exception&) {
    return false;
  }
}

// Emits `value` in the most readable style that reads back exactly.
void emit_string(YAML::Emitter& out, const std::string& key, const std::string& value,
                 const std::string& where) {
  static const YAML::EMITTER_MANIP literal = YAML::Literal, quoted = YAML::DoubleQuoted;
  std::vector<const YAML::EMITTER_MANIP*> styles;
  if (value.find('\n') != std::string::npos)
    styles.push_back(&literal);
  styles.push_back(nullptr);
  styles.push_back(&quoted);
  for (const auto* style : styles) {
    if (!survives_yaml(value, style))
      continue;
    out << YAML::Key << key << YAML::Value;
    if (style != nullptr)
      out << *style;
    out << value;
    return;
  }
  fail(where, cat("metadata field '", key,
                  "' does not survive YAML (is it valid UTF-8 without NUL?); encode it as hex or "
                  "base64 before saving"));
}

template <class T>
T yaml_get(const YAML::Node& node, const char* key, const std::string& origin,
           const std::string& where) {
  const YAML::Node v = node[key];
  if (!v.IsDefined() || v.IsNull())
    fail(where, cat(origin, ": key '", key, "' is missing"));
  try {
    return v.as<T>();
  } catch (const YAML::Exception& e) {
    fail(where, cat(origin, ": key '", key, "' has the wrong type (", e.what(), ")"));
  }
}

std::string yaml_string(const YAML::Node& node, const char* key, const std::string& origin,
                        const std::string& where) {
  const YAML::Node v = node[key];
  if (!v.IsDefined())
    fail(where, cat(origin, ": key '", key, "' is missing"));
  if (v.IsNull())
    return "";
  return yaml_get<std::string>(node, key, origin, where);
}

}  // namespace

std::string emit_metadata(const CheckpointMetadata& m, const std::vector<CheckpointVariable>& vars,
                          const std::string& where) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "format" << YAML::Value << kFormatName;
  out << YAML::Key << "format_version" << YAML::Value << kCheckpointFormatVersion;
  emit_string(out, "mtk_version", m.mtk_version, where);
  emit_string(out, "created_utc", m.created_utc, where);
  out << YAML::Key << "step" << YAML::Value << static_cast<long long>(m.step);
  out << YAML::Key << "program_step" << YAML::Value << static_cast<long long>(m.program_step);
  out << YAML::Key << "num_ranks" << YAML::Value << m.num_ranks;
  emit_string(out, "mesh", m.mesh, where);
  emit_string(out, "layout", m.layout, where);
  emit_string(out, "data_position", m.data_position, where);
  emit_string(out, "rng_state", m.rng_state, where);
  emit_string(out, "vocab_fingerprint", m.vocab_fingerprint, where);
  if (!m.init_from.empty())  // a fine-tuned run's source (train --init-from)
    emit_string(out, "init_from", m.init_from, where);
  out << YAML::Key << "variables_file" << YAML::Value << kVariablesFile;
  out << YAML::Key << "variables" << YAML::Value << YAML::BeginSeq;
  for (const auto& v : vars) {
    out << YAML::BeginMap;
    emit_string(out, "name", v.name, where);
    emit_string(out, "dataset", v.dataset, where);
    out << YAML::Key << "dtype" << YAML::Value << v.dtype;
    out << YAML::Key << "dims" << YAML::Value << YAML::Flow << v.shape.names();
    std::vector<long long> sizes, slice;
    for (const auto& d : v.shape.dims())
      sizes.push_back(d.size);
    for (const auto& d : v.slice_shape.dims())
      slice.push_back(d.size);
    out << YAML::Key << "shape" << YAML::Value << YAML::Flow << sizes;
    out << YAML::Key << "slice_shape" << YAML::Value << YAML::Flow << slice;
    emit_string(out, "layout", v.layout, where);
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  emit_string(out, "config", m.config_yaml, where);
  out << YAML::EndMap;
  if (!out.good())
    fail(where, cat("cannot write metadata YAML: ", out.GetLastError()));
  return std::string(out.c_str()) + "\n";
}

StoredCheckpoint parse_metadata(const std::string& text, const std::string& origin,
                                const std::string& where) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    fail(where, cat(origin, ": not valid YAML (", e.what(), ")"));
  }
  if (!root.IsMap())
    fail(where, cat(origin, ": not a YAML map"));
  config::check_yaml_text_keys(text, origin, true);  // a key twice: an error, not the first read
  if (yaml_string(root, "format", origin, where) != kFormatName)
    fail(where, cat(origin, ": 'format' is not '", kFormatName, "'"));
  const int version = yaml_get<int>(root, "format_version", origin, where);
  if (version < 1 || version > kCheckpointFormatVersion)
    fail(where, cat(origin, ": format_version ", version, " is not supported (this MTK reads 1 to ",
                    kCheckpointFormatVersion, "; the checkpoint was written by MTK ",
                    yaml_string(root, "mtk_version", origin, where), ")"));
  StoredCheckpoint st;
  auto& m = st.meta;
  m.format_version = std::to_string(version);
  m.mtk_version = yaml_string(root, "mtk_version", origin, where);
  m.created_utc = yaml_string(root, "created_utc", origin, where);
  m.step = yaml_get<long long>(root, "step", origin, where);
  m.program_step = yaml_get<long long>(root, "program_step", origin, where);
  m.num_ranks = yaml_get<int>(root, "num_ranks", origin, where);
  m.mesh = yaml_string(root, "mesh", origin, where);
  m.layout = yaml_string(root, "layout", origin, where);
  m.data_position = yaml_string(root, "data_position", origin, where);
  m.rng_state = yaml_string(root, "rng_state", origin, where);
  if (root["vocab_fingerprint"].IsDefined())  // absent before MTK recorded it
    m.vocab_fingerprint = yaml_string(root, "vocab_fingerprint", origin, where);
  if (root["init_from"].IsDefined())  // only in fine-tuned runs' checkpoints
    m.init_from = yaml_string(root, "init_from", origin, where);
  m.config_yaml = yaml_string(root, "config", origin, where);
  const YAML::Node vars = root["variables"];
  if (!vars.IsSequence())
    fail(where, cat(origin, ": 'variables' is not a list"));
  std::set<std::string> seen;
  for (size_t k = 0; k < vars.size(); ++k) {
    const YAML::Node v = vars[k];
    const std::string what = cat(origin, ": variables[", k, "]");
    CheckpointVariable cv;
    cv.name = yaml_string(v, "name", what, where);
    cv.dataset = yaml_string(v, "dataset", what, where);
    cv.dtype = yaml_string(v, "dtype", what, where);
    cv.layout = yaml_string(v, "layout", what, where);
    const auto dims = yaml_get<std::vector<std::string>>(v, "dims", what, where);
    const auto shape = yaml_get<std::vector<long long>>(v, "shape", what, where);
    const auto slice = yaml_get<std::vector<long long>>(v, "slice_shape", what, where);
    if (dims.size() != shape.size() || dims.size() != slice.size())
      fail(where, cat(what, " ('", cv.name, "'): dims, shape and slice_shape differ in length"));
    std::vector<Dimension> d, s;
    for (size_t i = 0; i < dims.size(); ++i) {
      if (shape[i] < 0 || slice[i] < 0 || slice[i] > shape[i] || (slice[i] == 0 && shape[i] != 0) ||
          (slice[i] > 0 && shape[i] % slice[i] != 0))
        fail(where, cat(what, " ('", cv.name, "'): slice_shape does not divide shape"));
      d.push_back({dims[i], shape[i]});
      s.push_back({dims[i], slice[i]});
    }
    cv.shape = Shape(d);
    cv.slice_shape = Shape(s);
    if (cv.dtype != "float32" && cv.dtype != "bfloat16")
      fail(where, cat(what, " ('", cv.name, "'): dtype '", cv.dtype,
                      "' is not supported (float32, bfloat16)"));
    cv.bytes = cv.shape.num_elements() * (cv.dtype == "bfloat16" ? 2 : 4);
    if (!seen.insert(cv.name).second)
      fail(where, cat(origin, ": variable '", cv.name, "' is listed twice"));
    st.vars.push_back(cv);
  }
  return st;
}

}  // namespace mtk::ckpt
