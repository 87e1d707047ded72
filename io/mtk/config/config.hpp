#pragma once
// YAML configuration documents. yaml-cpp stays inside io/: no yaml-cpp type appears here.

#include <mtk/parallel/layout.hpp>
#include <mtk/parallel/mesh_shape.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mtk {

/// A YAML document addressed by dotted keys ("train.steps"). Errors name the file (or "<string>")
/// and the key.
/// Documents where a map names a key twice (YAML keeps the first silently), or a key holds a '.'
/// (keys are addressed as dotted paths, so "lr.value" could never be read), are refused by
/// from_file(), from_string() and set(), naming the key and its lines.
namespace config {
/// Checks the keys of any YAML document MTK reads (a checkpoint's metadata.yaml too): fails
/// (mtk::Error naming `origin`, the key and both lines) at a map that names a key twice, and,
/// unless `allow_dotted_keys`, at a key with a '.'. Invalid YAML is left to the reader.
void check_yaml_text_keys(const std::string& text, const std::string& origin,
                          bool allow_dotted_keys);
}  // namespace config

class Config {
 public:
  /// Reads a YAML file (or a pipe); a missing or unreadable path or a directory is an error naming
  /// it.
  static Config from_file(const std::string& path);
  static Config from_string(const std::string& text, const std::string& origin = "<string>");

  bool has(const std::string& key) const;
  /// The value at `key`; missing, of another type or (get_double) not finite is an error.
  std::string get_string(const std::string& key) const;
  std::int64_t get_int(const std::string& key) const;
  double get_double(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  std::int64_t get_int(const std::string& key, std::int64_t fallback) const;
  double get_double(const std::string& key, double fallback) const;
  bool get_bool(const std::string& key, bool fallback) const;
  /// Checked settings: the value at `key`, or `fallback` when the key is absent. A value of the
  /// wrong type, a key present without a value, or a value outside [lo, hi] (outside `allowed`)
  /// is an error naming the file, the key, the value and what is allowed.
  std::int64_t get_int(const std::string& key, std::int64_t fallback, std::int64_t lo,
                       std::int64_t hi) const;
  double get_double(const std::string& key, double fallback, double lo, double hi) const;
  bool get_bool_checked(const std::string& key, bool fallback) const;
  /// A finite number > 0 (a rate, a size): required, or `fallback` when the key is absent. Other
  /// values (0, negative, .nan, .inf, text) are errors naming the file, the key and the value.
  double get_positive(const std::string& key) const;
  double get_positive(const std::string& key, double fallback) const;
  /// A whole number in [lo, hi] written as an integer or in floating-point notation ("4.0e9"),
  /// `fallback` when the key is absent; a fraction, .nan, .inf or a value outside the range is
  /// an error naming the file, the key, the value and the range (never a wrapped conversion).
  std::int64_t get_whole(const std::string& key, std::int64_t fallback, std::int64_t lo,
                         std::int64_t hi) const;
  /// A non-empty string; one of `allowed` unless that is empty.
  std::string get_string(const std::string& key, const std::string& fallback,
                         const std::vector<std::string>& allowed) const;
  /// Fails when `key` is present but is not a map (a section such as `train: 5`).
  void require_section(const std::string& key) const;
  /// Keys directly under `key` ("" for the top level), in document order.
  std::vector<std::string> keys(const std::string& key = "") const;

  /// A mesh written as a map ({batch: 4, model: 2}) or a string ("batch:4;model:2").
  MeshShape mesh_shape(const std::string& key = "mesh") const;
  /// Layout rules written as a map ({batch: batch, d_ff: model}) or a string.
  LayoutRules layout_rules(const std::string& key = "layout") const;

  /// Sets `key` (creating parents) to `value` parsed as YAML: "--set train.steps=100".
  void set(const std::string& key, const std::string& value);
  /// Sets `key` (creating parents) to the scalar `text` as it is, never parsed: a string such as
  /// "a: b" stays a string (the schema writers, <mtk/config/schema.hpp>).
  void set_scalar(const std::string& key, const std::string& text);
  /// Removes `key` and everything under it; nothing when absent.
  void erase(const std::string& key);
  /// Sets `key` to a copy of what `from` holds at `key` (a value or a whole section).
  void copy_from(const Config& from, const std::string& key);
  /// Applies "section.key=value" (the `--set` of the tools). An empty or null value, and a
  /// scalar or list replacing a whole section ("train=5"), are errors.
  void apply_override(const std::string& assignment);
  /// The document as YAML text.
  std::string dump() const;
  const std::string& origin() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

namespace config {

/// `v` as an int64 in `out` when it is a whole number inside int64's range; false (and `out`
/// unchanged) for a fraction, NaN, an infinity or a value beyond 64 bits.
bool whole_int64(double v, std::int64_t& out);

}  // namespace config
}  // namespace mtk
