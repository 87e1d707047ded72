// safetensors files: deterministic writing and a checked reader (safetensors.hpp).

#include <mtk/base/error.hpp>
#include <mtk/checkpoint/safetensors.hpp>
#include <mtk/files/files.hpp>
#include <mtk/kernels/bfloat16.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

namespace mtk {
namespace {

using json = nlohmann::json;

// The reference implementation's cap on the header.
constexpr std::int64_t kMaxHeaderBytes = 100'000'000;

bool little_endian_host() {
  const std::uint16_t one = 1;
  unsigned char first = 0;
  std::memcpy(&first, &one, 1);
  return first == 1;
}

// Elements of `shape`; fails on a negative size or an overflow.
std::int64_t elements(const std::vector<std::int64_t>& shape, const std::string& what,
                      const std::string& where) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    if (d < 0 || (d > 0 && n > std::numeric_limits<std::int64_t>::max() / 4 / d))
      fail(where, cat(what, ": shape ", json(shape).dump(), " is negative or too large"));
    n *= d;
  }
  return n;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  return json(shape).dump();
}

// One header entry, checked: dtype, shape, offsets (relative to the data).
struct Entry {
  std::string name;
  SafetensorsTensor tensor;
  std::int64_t begin = 0, end = 0;
};

Entry parse_entry(const std::string& name, const json& v, const std::string& what,
                  const std::string& where) {
  Entry e;
  e.name = name;
  if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
    fail(where, cat(what, ": the header entry is not {dtype, shape, data_offsets}: ", v.dump()));
  const json& dtype = v.at("dtype");
  const json& shape = v.at("shape");
  const json& offsets = v.at("data_offsets");
  if (!dtype.is_string())
    fail(where, cat(what, ": dtype ", dtype.dump(), " is not a string"));
  e.tensor.dtype = dtype.get<std::string>();
  const std::int64_t bytes = safetensors_dtype_bytes(e.tensor.dtype, cat(where, ": ", what));
  if (!shape.is_array())
    fail(where, cat(what, ": shape ", shape.dump(), " is not a list"));
  for (const json& d : shape) {
    if (!d.is_number_integer() || d.get<std::int64_t>() < 0)
      fail(where, cat(what, ": shape ", shape.dump(), " holds a value that is not a size"));
    e.tensor.shape.push_back(d.get<std::int64_t>());
  }
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_integer() ||
      !offsets[1].is_number_integer() || offsets[0].get<std::int64_t>() < 0 ||
      offsets[1].get<std::int64_t>() < offsets[0].get<std::int64_t>())
    fail(where,
         cat(what, ": data_offsets ", offsets.dump(), " are not [begin, end] with begin <= end"));
  e.begin = offsets[0].get<std::int64_t>();
  e.end = offsets[1].get<std::int64_t>();
  const std::int64_t expected = elements(e.tensor.shape, what, where) * bytes;
  if (e.end - e.begin != expected)
    fail(where,
         cat(what, ": data_offsets ", offsets.dump(), " hold ", e.end - e.begin, " bytes, but ",
             e.tensor.dtype, " ", shape_text(e.tensor.shape), " takes ", expected));
  return e;
}

}  // namespace

std::int64_t safetensors_dtype_bytes(const std::string& dtype, const std::string& where) {
  static const std::map<std::string, std::int64_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"I16", 2}, {"U16", 2}, {"F16", 2}, {"BF16", 2},
      {"I32", 4},  {"U32", 4}, {"F32", 4}, {"I64", 8}, {"U64", 8}, {"F64", 8}};
  const auto it = sizes.find(dtype);
  if (it == sizes.end())
    fail(where, cat("dtype '", dtype,
                    "' is not one of BOOL, U8, I8, I16, U16, F16, BF16, I32, U32, F32, I64, U64, "
                    "F64"));
  return it->second;
}

std::string safetensors_bytes(const SafetensorsFile& file, const std::string& where) {
  if (!little_endian_host())
    fail(where, "safetensors data are little-endian; this host is not");
  json header = json::object();
  std::int64_t offset = 0;
  for (const auto& [name, t] : file.tensors) {
    const std::string what = cat("tensor '", name, "'");
    if (name == "__metadata__" || name.empty())
      fail(where, cat("a tensor may not be named '", name, "'"));
    const std::int64_t bytes =
        elements(t.shape, what, where) * safetensors_dtype_bytes(t.dtype, cat(where, ": ", what));
    if (static_cast<std::int64_t>(t.bytes.size()) != bytes)
      fail(where, cat(what, " ", t.dtype, " ", shape_text(t.shape), " has ", t.bytes.size(),
                      " bytes, not ", bytes));
    header[name] = {
        {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  if (!file.metadata.empty())
    header["__metadata__"] = file.metadata;
  std::string text = header.dump();  // keys sorted (std::map), no spaces: deterministic
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  std::uint64_t n = text.size();
  for (int i = 0; i < 8; ++i)
    out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xffu);
  out.reserve(8 + text.size() + static_cast<std::size_t>(offset));
  out += text;
  for (const auto& entry : file.tensors)
    out += entry.second.bytes;
  return out;
}

void write_safetensors(const std::string& path, const SafetensorsFile& file,
                       const std::string& where) {
  write_file_atomically(path, safetensors_bytes(file, where), where);
}

SafetensorsFile read_safetensors(const std::string& path, const std::string& where) {
  if (!little_endian_host())
    fail(where, "safetensors data are little-endian; this host is not");
  const std::string bytes = read_whole_file(path, where);
  const std::string in = cat("safetensors file '", path, "'");
  if (bytes.size() < 8)
    fail(where, cat(in, " has ", bytes.size(), " bytes: too short for the 8-byte header length"));
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  if (n > static_cast<std::uint64_t>(kMaxHeaderBytes) || n > bytes.size() - 8)
    fail(where, cat(in, ": header length ", n, " exceeds the file (", bytes.size(),
                    " bytes) or the 100 MB limit: not a safetensors file"));
  json header;
  try {
    header = json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  } catch (const std::exception& e) {
    fail(where, cat(in, ": the header is not JSON (", e.what(), ")"));
  }
  if (!header.is_object())
    fail(where, cat(in, ": the header is not a JSON object"));
  SafetensorsFile file;
  std::vector<Entry> entries;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object())
        fail(where, cat(in, ": __metadata__ is not an object of strings"));
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string())
          fail(where, cat(in, ": __metadata__ value of '", m.key(), "' is not a string"));
        file.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(it.key(), *it, cat(in, ": tensor '", it.key(), "'"), where));
  }
  // The data must be covered exactly: sorted by offset, each tensor starts where the last ended.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin < b.begin || (a.begin == b.begin && a.end < b.end);
  });
  const std::int64_t data_bytes = static_cast<std::int64_t>(bytes.size() - 8 - n);
  std::int64_t at = 0;
  for (const Entry& e : entries) {
    if (e.begin != at)
      fail(where, cat(in, ": tensor '", e.name, "' starts at data offset ", e.begin, ", not ", at,
                      e.begin > at ? " (a hole before it)" : " (it overlaps the one before)"));
    at = e.end;
  }
  if (at != data_bytes)
    fail(where, cat(in, ": the tensors cover ", at, " bytes of data, the file holds ", data_bytes,
                    at < data_bytes ? " (bytes after the last tensor)" : " (truncated)"));
  for (Entry& e : entries) {
    e.tensor.bytes = bytes.substr(8 + n + static_cast<std::size_t>(e.begin),
                                  static_cast<std::size_t>(e.end - e.begin));
    file.tensors[e.name] = std::move(e.tensor);
  }
  return file;
}

std::vector<float> safetensors_floats(const SafetensorsFile& file, const std::string& name,
                                      const std::string& path, const std::string& where) {
  const auto it = file.tensors.find(name);
  if (it == file.tensors.end())
    fail(where, cat("safetensors file '", path, "' has no tensor '", name, "'"));
  const SafetensorsTensor& t = it->second;
  const std::string& b = t.bytes;
  std::vector<float> values;
  if (t.dtype == "F32") {
    values.resize(b.size() / 4);
    std::memcpy(values.data(), b.data(), values.size() * 4);
  } else if (t.dtype == "BF16") {
    values.resize(b.size() / 2);
    for (std::size_t i = 0; i < values.size(); ++i) {
      std::uint16_t bits = 0;
      std::memcpy(&bits, b.data() + 2 * i, 2);
      values[i] = kernels::from_bfloat16_bits(bits);
    }
  } else {
    fail(where, cat("safetensors file '", path, "': tensor '", name, "' is ", t.dtype,
                    "; F32 or BF16 expected"));
  }
  return values;
}

SafetensorsTensor safetensors_from_floats(const std::vector<std::int64_t>& shape,
                                          const float* values, bool bf16) {
  SafetensorsTensor t;
  t.dtype = bf16 ? "BF16" : "F32";
  t.shape = shape;
  std::int64_t n = 1;
  for (std::int64_t d : shape)
    n *= d;
  const auto count = static_cast<std::size_t>(n);
  if (bf16) {
    t.bytes.resize(2 * count);
    for (std::size_t i = 0; i < count; ++i) {
      const std::uint16_t bits = kernels::to_bfloat16_bits(values[i]);
      std::memcpy(&t.bytes[2 * i], &bits, 2);
    }
  } else if (count > 0) {
    t.bytes.assign(reinterpret_cast<const char*>(values), 4 * count);
  }
  return t;
}

}  // namespace mtk
