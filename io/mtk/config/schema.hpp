#pragma once
// One config section's schema, each field declared once: its key, type, default (the settings
// struct's), allowed range or choices and a one-line doc, bound to the struct member it fills.
// From that one table come the reader (with range and choice errors naming file, key, value and
// what is allowed), the unknown-key check, the writer (the effective config --print-config shows)
// and the Markdown reference (docs/configuration.md).
//
//   config::Schema<Eval> s;
//   s.integer("max_batches", &Eval::max_batches, 0, 1000, "0: the whole held-out shard")
//       .real("logit_scale", &Eval::logit_scale, 1e-6, 1e6, "logits multiplied before the
//       softmax");
//   Eval e = s.read(config, "eval");   // config.yaml: eval.max_batches = -1 is not an integer in
//   ...

#include <mtk/base/error.hpp>
#include <mtk/config/config.hpp>
#include <mtk/config/known_keys.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace mtk::config {

enum class FieldType { integer, real, boolean, choice, text, preset };

/// A field's value: std::int64_t (integer), double (real), bool (boolean), std::string (choice,
/// text, preset).
using Value = std::variant<std::int64_t, double, bool, std::string>;

/// What a field is, apart from the struct it fills.
struct FieldSpec {
  std::string key;  ///< under the section; dotted in subsections ("moe.num_experts")
  FieldType type = FieldType::integer;
  std::string doc;
  std::int64_t int_lo = 0, int_hi = 0;  ///< integer: the allowed range
  double real_lo = 0, real_hi = 0;      ///< real: the allowed range
  std::vector<std::string> choices;     ///< choice: the allowed values
  std::string allowed_text;             ///< preset: the allowed values in words
  std::string default_text;             ///< set when the default is not a constant ("train.steps")
};

/// The type in words: "integer", "number", "boolean", "choice", "string", "preset".
std::string type_name(FieldType type);
/// The allowed values in words: "1 .. 1000", "[0, 0.999]", "`a`, `b`", "true, false", ...
std::string allowed_values(const FieldSpec& field);
/// Reads `field` at `key` of `config`, `fallback` when the key is absent; a value of another type
/// or outside the range or choices is an error naming the file, the key, the value and what is
/// allowed.
Value read_value(const Config& config, const std::string& key, const FieldSpec& field,
                 const Value& fallback);
/// YAML scalar text that reads back to exactly `v`: "10", "0.001", "1e-30", "true", "rms_norm".
std::string value_text(const Value& v);
/// The Markdown reference table of `fields` under `section` with their `defaults` (value_text, or
/// the field's default_text).
std::string markdown_table(const std::string& section, const std::vector<FieldSpec>& fields,
                           const std::vector<std::string>& defaults);
/// `table` between the marker comments docs/configuration.md holds it in:
/// "<!-- BEGIN GENERATED: id -->", the table, "<!-- END GENERATED: id -->".
std::string markdown_block(const std::string& id, const std::string& table);
/// Wraps the error of a whole-settings check with the file: throws "<where>: <origin>: <what>".
[[noreturn]] void fail_in(const Config& config, const std::string& where, const Error& e);
/// A preset value its maker refused (`e`): names the file, the key, the value and what is allowed.
[[noreturn]] void fail_preset(const Config& config, const std::string& key, const FieldSpec& field,
                              const std::string& value, const Error& e);

/// The schema of a settings struct S: its fields in order. Built once (a function-local static);
/// the builders return *this so that a table reads as one expression.
template <class S>
class Schema {
 public:
  struct Field {
    FieldSpec spec;
    std::function<Value(const S&)> get;
    std::function<void(S&, const Value&)> set;
    std::function<void(S&)> derive;             ///< sets a default from fields read before
    std::function<S(const std::string&)> make;  ///< preset: the settings the value names
  };

  /// An integer member of any integral type; [lo, hi] must fit it.
  template <class M>
  Schema& integer(std::string key, M S::*member, std::int64_t lo, std::int64_t hi,
                  std::string doc) {
    static_assert(std::is_integral_v<M> && !std::is_same_v<M, bool>, "an integer member");
    bool fits = lo <= hi;
    if constexpr (std::is_signed_v<M>)
      fits = fits && lo >= std::numeric_limits<M>::min() && hi <= std::numeric_limits<M>::max();
    else
      fits = fits && lo >= 0 && static_cast<std::uint64_t>(hi) <= std::numeric_limits<M>::max();
    if (!fits)
      fail("mtk::config::Schema::integer", cat("the range of '", key, "' does not fit its type"));
    FieldSpec f = spec(std::move(key), FieldType::integer, std::move(doc));
    f.int_lo = lo;
    f.int_hi = hi;
    return add(
        std::move(f), [member](const S& s) { return Value(std::int64_t(s.*member)); },
        [member](S& s, const Value& v) { s.*member = M(std::get<std::int64_t>(v)); });
  }
  Schema& real(std::string key, double S::*member, double lo, double hi, std::string doc) {
    FieldSpec f = spec(std::move(key), FieldType::real, std::move(doc));
    f.real_lo = lo;
    f.real_hi = hi;
    return add(
        std::move(f), [member](const S& s) { return Value(s.*member); },
        [member](S& s, const Value& v) { s.*member = std::get<double>(v); });
  }
  Schema& boolean(std::string key, bool S::*member, std::string doc) {
    return add(
        spec(std::move(key), FieldType::boolean, std::move(doc)),
        [member](const S& s) { return Value(s.*member); },
        [member](S& s, const Value& v) { s.*member = std::get<bool>(v); });
  }
  /// A string member that must be one of `choices`.
  Schema& choice(std::string key, std::string S::*member, std::vector<std::string> choices,
                 std::string doc) {
    FieldSpec f = spec(std::move(key), FieldType::choice, std::move(doc));
    f.choices = std::move(choices);
    return add(
        std::move(f), [member](const S& s) { return Value(s.*member); },
        [member](S& s, const Value& v) { s.*member = std::get<std::string>(v); });
  }
  /// An enum member, each value written as its name.
  template <class E>
  Schema& choice(std::string key, E S::*member, std::vector<std::pair<std::string, E>> names,
                 std::string doc) {
    static_assert(std::is_enum_v<E>, "an enum member");
    FieldSpec f = spec(std::move(key), FieldType::choice, std::move(doc));
    for (const auto& n : names)
      f.choices.push_back(n.first);
    return add(
        std::move(f),
        [member, names](const S& s) {
          for (const auto& n : names)
            if (n.second == s.*member)
              return Value(n.first);
          fail("mtk::config::Schema::choice", "an enum value without a name");
        },
        [member, names](S& s, const Value& v) {
          for (const auto& n : names)
            if (n.first == std::get<std::string>(v))
              s.*member = n.second;
        });
  }
  /// A free, non-empty string; an empty one means "not set" (not written, the docs' "(none)").
  Schema& text(std::string key, std::string S::*member, std::string doc) {
    return add(
        spec(std::move(key), FieldType::text, std::move(doc)),
        [member](const S& s) { return Value(s.*member); },
        [member](S& s, const Value& v) { s.*member = std::get<std::string>(v); });
  }
  /// A key naming settings to start from (`make` throws mtk::Error for a value it does not know);
  /// the other keys override them. Read first, whatever its place; never written (expanded).
  Schema& preset(std::string key, std::string allowed, std::function<S(const std::string&)> make,
                 std::string doc) {
    FieldSpec f = spec(std::move(key), FieldType::preset, std::move(doc));
    f.allowed_text = std::move(allowed);
    Field field{std::move(f),
                [](const S&) { return Value(std::string()); },
                [](S&, const Value&) {},
                {},
                std::move(make)};
    fields_.push_back(std::move(field));
    return *this;
  }
  /// The fields of `sub` as a subsection `prefix` of this section ("": its keys join this
  /// section's), filling member `member`.
  template <class Sub>
  Schema& nested(const std::string& prefix, Sub S::*member, const Schema<Sub>& sub) {
    for (const auto& f : sub.fields()) {
      if (f.spec.type == FieldType::preset)
        fail("mtk::config::Schema::nested", cat("a preset in subsection '", prefix, "'"));
      FieldSpec spec = f.spec;
      if (!prefix.empty())
        spec.key = prefix + "." + spec.key;
      Field field{std::move(spec),
                  [member, get = f.get](const S& s) { return get(s.*member); },
                  [member, set = f.set](S& s, const Value& v) { set(s.*member, v); },
                  {},
                  {}};
      if (f.derive)
        field.derive = [member, derive = f.derive](S& s) { derive(s.*member); };
      fields_.push_back(std::move(field));
    }
    for (const auto& check : sub.checks_)
      checks_.push_back([member, check](const S& s) { check(s.*member); });
    return *this;
  }
  /// The default of `key` depends on fields before it: `derive` sets it; `text` says so in the
  /// docs.
  Schema& default_from(const std::string& key, std::function<void(S&)> derive, std::string text) {
    Field& f = field(key);
    f.derive = std::move(derive);
    f.spec.default_text = std::move(text);
    return *this;
  }
  /// The docs' default of `key` when the reader's caller sets it (e.g. from another section).
  Schema& default_text(const std::string& key, std::string text) {
    field(key).spec.default_text = std::move(text);
    return *this;
  }
  /// A check of the whole settings after reading (mtk::Error); its message gets the file's name.
  Schema& check(std::function<void(const S&)> fn) {
    checks_.push_back(std::move(fn));
    return *this;
  }

  /// Reads `section` of `config` over `start`: the preset (if any) first, then every field in
  /// order. Checks that the section and its subsections are maps and that every key is known.
  S read(const Config& config, const std::string& section, S start = S{}) const {
    config.require_section(section);
    for (const auto& sub : subsections())
      config.require_section(section + "." + sub);
    reject_unknown_keys(config, section, keys());
    for (const auto& f : fields_)
      if (f.spec.type == FieldType::preset && config.has(section + "." + f.spec.key)) {
        const std::string key = section + "." + f.spec.key;
        const Value name = read_value(config, key, f.spec, std::string());
        try {
          start = f.make(std::get<std::string>(name));
        } catch (const Error& e) {
          fail_preset(config, key, f.spec, std::get<std::string>(name), e);
        }
      }
    for (const auto& f : fields_) {
      if (f.spec.type == FieldType::preset)
        continue;
      if (f.derive)
        f.derive(start);
      f.set(start, read_value(config, section + "." + f.spec.key, f.spec, f.get(start)));
    }
    for (const auto& check : checks_) {
      try {
        check(start);
      } catch (const Error& e) {
        fail_in(config, "mtk::config::Schema::read", e);
      }
    }
    return start;
  }

  /// Writes every field of `s` under `section` of `config` (presets expanded, empty texts left
  /// out), so that read() gives `s` back.
  void write(Config& config, const std::string& section, const S& s) const {
    for (const auto& f : fields_) {
      const Value v = f.get(s);
      if (f.spec.type == FieldType::preset ||
          (f.spec.type == FieldType::text && std::get<std::string>(v).empty()))
        continue;
      config.set_scalar(section + "." + f.spec.key, value_text(v));
    }
  }

  /// The Markdown reference table of `section`, defaults from `defaults`.
  std::string markdown(const std::string& section, const S& defaults = S{}) const {
    std::vector<FieldSpec> specs;
    std::vector<std::string> values;
    for (const auto& f : fields_) {
      specs.push_back(f.spec);
      values.push_back(f.spec.type == FieldType::preset ? "" : value_text(f.get(defaults)));
    }
    return markdown_table(section, specs, values);
  }

  /// The keys under the section, in order ("moe.num_experts" for a subsection's).
  std::vector<std::string> keys() const {
    std::vector<std::string> out;
    for (const auto& f : fields_)
      out.push_back(f.spec.key);
    return out;
  }
  /// The subsections ("moe"), each once, in order of their first field.
  std::vector<std::string> subsections() const {
    std::vector<std::string> out;
    for (const auto& f : fields_) {
      const auto dot = f.spec.key.rfind('.');
      for (std::size_t at = f.spec.key.find('.'); at != std::string::npos && at <= dot;
           at = f.spec.key.find('.', at + 1)) {
        const std::string sub = f.spec.key.substr(0, at);
        if (std::find(out.begin(), out.end(), sub) == out.end())
          out.push_back(sub);
      }
    }
    return out;
  }
  const std::vector<Field>& fields() const { return fields_; }

 private:
  template <class>
  friend class Schema;

  static FieldSpec spec(std::string key, FieldType type, std::string doc) {
    FieldSpec f;
    f.key = std::move(key);
    f.type = type;
    f.doc = std::move(doc);
    return f;
  }
  Schema& add(FieldSpec field_spec, std::function<Value(const S&)> get,
              std::function<void(S&, const Value&)> set) {
    for (const auto& f : fields_)
      if (f.spec.key == field_spec.key)
        fail("mtk::config::Schema", cat("the key '", field_spec.key, "' is declared twice"));
    fields_.push_back(Field{std::move(field_spec), std::move(get), std::move(set), {}, {}});
    return *this;
  }
  Field& field(const std::string& key) {
    for (auto& f : fields_)
      if (f.spec.key == key)
        return f;
    fail("mtk::config::Schema", cat("no field '", key, "'"));
  }

  std::vector<Field> fields_;
  std::vector<std::function<void(const S&)>> checks_;
};

}  // namespace mtk::config
