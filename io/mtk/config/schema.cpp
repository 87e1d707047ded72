#include <mtk/config/schema.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace mtk::config {
namespace {

// The shortest "%g" text that reads back to exactly `v`, exponent without '+' or leading zeros.
std::string shortest(double v) {
  char text[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(text, sizeof text, "%.*g", precision, v);
    if (std::strtod(text, nullptr) == v)
      break;
  }
  std::string s = text;
  const auto e = s.find('e');
  if (e == std::string::npos)
    return s;
  std::string exponent = s.substr(e + 1);
  const bool negative = !exponent.empty() && exponent[0] == '-';
  if (!exponent.empty() && (exponent[0] == '+' || exponent[0] == '-'))
    exponent.erase(0, 1);
  exponent.erase(0, exponent.find_first_not_of('0'));
  return s.substr(0, e) + "e" + (negative ? "-" : "") + exponent;
}

// A bound for the docs: 2^31-1, 2^20, 10^12, else the number.
std::string bound_text(std::int64_t v) {
  if (v == std::numeric_limits<std::int32_t>::max())
    return "2^31-1";
  for (int k = 16; k < 63; ++k)
    if (v == (std::int64_t{1} << k))
      return cat("2^", k);
  std::int64_t p = 1000000;
  for (int k = 6; k <= 18; ++k, p *= 10)
    if (v == p)
      return cat("10^", k);
  return std::to_string(v);
}

// A real bound for the docs: whole numbers below 10^6 in full ("1000"), the rest short ("1e15").
std::string bound_text(double v) {
  if (std::fabs(v) < 1e6 && v == std::floor(v))
    return std::to_string(static_cast<std::int64_t>(v));
  return shortest(v);
}

std::string escaped(const std::string& text) {
  std::string out;
  for (char c : text)
    out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

}  // namespace

std::string type_name(FieldType type) {
  switch (type) {
    case FieldType::integer:
      return "integer";
    case FieldType::real:
      return "number";
    case FieldType::boolean:
      return "boolean";
    case FieldType::choice:
      return "choice";
    case FieldType::text:
      return "string";
    case FieldType::preset:
      return "preset";
  }
  return "?";
}

std::string allowed_values(const FieldSpec& f) {
  switch (f.type) {
    case FieldType::integer:
      if (f.int_hi == std::numeric_limits<std::int64_t>::max())
        return cat(">= ", f.int_lo);
      return cat(bound_text(f.int_lo), " .. ", bound_text(f.int_hi));
    case FieldType::real:
      return cat("[", bound_text(f.real_lo), ", ", bound_text(f.real_hi), "]");
    case FieldType::boolean:
      return "true, false";
    case FieldType::choice: {
      std::string list;
      for (const auto& c : f.choices)
        list += (list.empty() ? "`" : ", `") + c + "`";
      return list;
    }
    case FieldType::text:
      return "a non-empty string";
    case FieldType::preset:
      return f.allowed_text;
  }
  return "";
}

Value read_value(const Config& config, const std::string& key, const FieldSpec& f,
                 const Value& fallback) {
  switch (f.type) {
    case FieldType::integer:
      return Value(config.get_int(key, std::get<std::int64_t>(fallback), f.int_lo, f.int_hi));
    case FieldType::real:
      return Value(config.get_double(key, std::get<double>(fallback), f.real_lo, f.real_hi));
    case FieldType::boolean:
      return Value(config.get_bool_checked(key, std::get<bool>(fallback)));
    case FieldType::choice:
      return Value(config.get_string(key, std::get<std::string>(fallback), f.choices));
    case FieldType::text:
    case FieldType::preset:
      return Value(config.get_string(key, std::get<std::string>(fallback), {}));
  }
  fail("mtk::config::read_value", cat("no type for '", key, "'"));
}

std::string value_text(const Value& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v))
    return std::to_string(*i);
  if (const auto* b = std::get_if<bool>(&v))
    return *b ? "true" : "false";
  if (const auto* s = std::get_if<std::string>(&v))
    return *s;
  const double d = std::get<double>(v);
  // Whole numbers below 2^53 in full ("10000", not "1e4"); the rest as short as reads back.
  if (std::fabs(d) >= 1 && std::fabs(d) < 9007199254740992.0 && d == std::floor(d)) {
    char text[32];
    std::snprintf(text, sizeof text, "%.0f", d);
    return text;
  }
  return shortest(d);
}

std::string markdown_table(const std::string& section, const std::vector<FieldSpec>& fields,
                           const std::vector<std::string>& defaults) {
  std::string out =
      "| key | type | default | allowed | meaning |\n| --- | --- | --- | --- | --- |\n";
  for (std::size_t i = 0; i < fields.size(); ++i) {
    const FieldSpec& f = fields[i];
    std::string value = !f.default_text.empty()                              ? f.default_text
                        : f.type == FieldType::preset || defaults[i].empty() ? "(none)"
                                                                             : defaults[i];
    out += cat("| `", section, ".", f.key, "` | ", type_name(f.type), " | ", escaped(value), " | ",
               escaped(allowed_values(f)), " | ", escaped(f.doc), " |\n");
  }
  return out;
}

std::string markdown_block(const std::string& id, const std::string& table) {
  return cat("<!-- BEGIN GENERATED: ", id, " -->\n", table, "<!-- END GENERATED: ", id, " -->\n");
}

void fail_in(const Config& config, const std::string& where, const Error& e) {
  fail(where, cat(config.origin(), ": ", e.what()));
}

void fail_preset(const Config& config, const std::string& key, const FieldSpec& field,
                 const std::string& value, const Error& e) {
  fail("mtk::config::Schema::read", cat(config.origin(), ": ", key, " = '", value, "' is not ",
                                        field.allowed_text, " (", e.what(), ")"));
}

}  // namespace mtk::config
