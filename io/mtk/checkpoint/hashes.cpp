#include <mtk/base/error.hpp>
#include <mtk/checkpoint/impl/format.hpp>
#include <mtk/checkpoint/impl/hashes.hpp>
#include <mtk/checkpoint/impl/hdf5.hpp>
#include <mtk/files/sha256.hpp>

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <set>
#include <sstream>

namespace mtk::ckpt {

std::string slice_line(const SliceRecord& r) {
  return cat("slice ", r.sha, " ", csv(r.origin), " ", csv(r.shape), " ", r.name, "\n");
}

SliceTable parse_slices(const std::string& text, const std::string& origin,
                        const std::string& where) {
  SliceTable t;
  int line_no = 0;
  for (const auto& line : split_lines(text)) {
    ++line_no;
    if (line[0] == '#')
      continue;
    std::istringstream ss(line);
    std::string kind;
    ss >> kind;
    if (kind == "file") {
      std::string bytes, name;
      ss >> bytes >> name;
      const auto v = parse_csv(bytes, where, cat(origin, ":", line_no));
      if (v.size() != 1 || name != kVariablesFile)
        fail(where, cat(origin, ":", line_no, ": malformed 'file' line"));
      t.file_bytes = v[0];
    } else if (kind == "slice") {
      SliceRecord r;
      std::string o, s;
      ss >> r.sha >> o >> s;
      std::getline(ss, r.name);
      if (!r.name.empty() && r.name[0] == ' ')
        r.name.erase(0, 1);
      r.origin = parse_csv(o, where, cat(origin, ":", line_no, " origin"));
      r.shape = parse_csv(s, where, cat(origin, ":", line_no, " shape"));
      if (r.sha.size() != 64 || r.name.empty() || r.origin.size() != r.shape.size())
        fail(where, cat(origin, ":", line_no, ": malformed 'slice' line"));
      t.slices.push_back(r);
    } else {
      fail(where, cat(origin, ":", line_no, ": unknown line kind '", kind, "'"));
    }
  }
  if (t.file_bytes < 0)
    fail(where, cat(origin, ": no 'file' line"));
  return t;
}

std::string file_size_problem(const std::string& h5path, const SliceTable& t) {
  std::error_code ec;
  const auto actual = static_cast<std::int64_t>(std::filesystem::file_size(h5path, ec));
  if (ec)
    return cat("cannot stat '", h5path, "': ", ec.message());
  if (actual != t.file_bytes)
    return cat(h5path, " has ", actual, " bytes; ", kSlicesFile, " recorded ", t.file_bytes,
               actual > t.file_bytes ? " (extra bytes appended)" : " (truncated)");
  return "";
}

void check_tiling(const CheckpointVariable& var, const std::vector<const SliceRecord*>& recs,
                  std::vector<std::string>* errors) {
  const auto shape = sizes_of(var.shape), slice = sizes_of(var.slice_shape);
  const std::string what = cat("variable '", var.name, "' ", var.shape.to_string());
  if (recs.empty()) {
    errors->push_back(cat(what, ": no slice hashes recorded in ", kSlicesFile));
    return;
  }
  std::int64_t expected = 1;
  for (size_t i = 0; i < shape.size(); ++i)
    expected *= slice[i] > 0 ? shape[i] / slice[i] : 1;
  std::set<std::vector<std::int64_t>> origins;
  for (const auto* r : recs) {
    bool ok = r->shape == slice && r->origin.size() == shape.size();
    for (size_t i = 0; ok && i < shape.size(); ++i)
      ok = (slice[i] == 0 || r->origin[i] % slice[i] == 0) && r->origin[i] + slice[i] <= shape[i];
    if (!ok) {
      errors->push_back(cat(what, ": recorded slice origin ", bracket(r->origin), " shape ",
                            bracket(r->shape), " does not fit the saved slice shape ",
                            var.slice_shape.to_string()));
      return;
    }
    if (!origins.insert(r->origin).second) {
      errors->push_back(cat(what, ": slice origin ", bracket(r->origin), " is recorded twice"));
      return;
    }
  }
  if (static_cast<std::int64_t>(origins.size()) != expected)
    errors->push_back(
        cat(what, ": ", origins.size(), " slices recorded, ", expected, " needed to cover it"));
}

std::map<std::string, std::vector<size_t>> records_by_name(const SliceTable& t) {
  std::map<std::string, std::vector<size_t>> m;
  for (size_t k = 0; k < t.slices.size(); ++k)
    m[t.slices[k].name].push_back(k);
  return m;
}

std::string hash_dataset_block(hid_t dset, const std::vector<std::int64_t>& origin,
                               const std::vector<std::int64_t>& shape, std::int64_t* bytes,
                               const std::string& where, const std::string& what) {
  // The values as stored: 16-bit integers hold bfloat16 patterns (hdf5.hpp, StoredType).
  H5Id type(h5(H5Dget_type(dset), where, "H5Dget_type"), H5Tclose);
  const bool bf16 = H5Tget_class(type) == H5T_INTEGER && H5Tget_size(type) == 2;
  const std::int64_t esize = bf16 ? 2 : 4;
  const hid_t memory = bf16 ? H5T_NATIVE_UINT16 : H5T_NATIVE_FLOAT;
  Sha256 h;
  std::vector<std::byte> buf;
  if (shape.empty()) {
    buf.resize(static_cast<size_t>(esize));
    read_block(dset, origin, shape, buf.data(), memory, where, what);
    h.update(buf.data(), buf.size());
    *bytes += esize;
    return h.hex_digest();
  }
  const std::int64_t row = product(shape) / std::max<std::int64_t>(shape[0], 1);
  const std::int64_t rows_per_read =
      std::max<std::int64_t>(1, kReadBlockBytes / std::max<std::int64_t>(1, row * esize));
  for (std::int64_t r0 = 0; r0 < shape[0]; r0 += rows_per_read) {
    auto o = origin;
    auto s = shape;
    o[0] += r0;
    s[0] = std::min(rows_per_read, shape[0] - r0);
    buf.resize(static_cast<size_t>(product(s) * esize));
    read_block(dset, o, s, buf.data(), memory, where, what);
    h.update(buf.data(), buf.size());
    *bytes += static_cast<std::int64_t>(buf.size());
  }
  return h.hex_digest();
}

bool contains(const std::vector<std::int64_t>& outer_origin,
              const std::vector<std::int64_t>& outer_shape, const std::vector<std::int64_t>& origin,
              const std::vector<std::int64_t>& shape) {
  for (size_t i = 0; i < origin.size(); ++i)
    if (origin[i] < outer_origin[i] || origin[i] + shape[i] > outer_origin[i] + outer_shape[i])
      return false;
  return true;
}

std::string hash_sub_block(const void* values, std::size_t value_bytes,
                           const std::vector<std::int64_t>& region_origin,
                           const std::vector<std::int64_t>& region_shape,
                           const std::vector<std::int64_t>& origin,
                           const std::vector<std::int64_t>& shape) {
  const auto* data = static_cast<const unsigned char*>(values);
  const auto esize = static_cast<std::int64_t>(value_bytes);
  Sha256 h;
  const size_t r = shape.size();
  if (r == 0) {
    h.update(data, value_bytes);
    return h.hex_digest();
  }
  if (product(shape) == 0)
    return h.hex_digest();
  if (shape == region_shape) {
    h.update(data, static_cast<size_t>(product(shape) * esize));
    return h.hex_digest();
  }
  std::vector<std::int64_t> stride(r, 1);
  for (size_t i = r - 1; i > 0; --i)
    stride[i - 1] = stride[i] * region_shape[i];
  std::vector<std::int64_t> idx(r, 0);  // position within the block, last dim fixed at 0
  const std::int64_t runs = product(shape) / shape[r - 1];
  for (std::int64_t k = 0; k < runs; ++k) {
    std::int64_t off = 0;
    for (size_t i = 0; i < r; ++i)
      off += (idx[i] + origin[i] - region_origin[i]) * stride[i];
    h.update(data + off * esize, static_cast<size_t>(shape[r - 1] * esize));
    for (size_t i = r - 1; i-- > 0;) {  // odometer over dims 0..r-2
      if (++idx[i] < shape[i])
        break;
      idx[i] = 0;
    }
  }
  return h.hex_digest();
}

void HashWorker::run() {
  for (;;) {
    Task t;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [this] { return done_ || !tasks_.empty(); });
      if (tasks_.empty())
        return;
      t = std::move(tasks_.front());
      tasks_.pop_front();
    }
    const std::string sha =
        hash_sub_block(t.data, t.value_bytes, t.region_origin, t.region_shape, t.origin, t.shape);
    if (sha != t.expected)
      errors_.push_back(
          cat(t.what, " is corrupted (SHA-256 ", sha, ", recorded ", t.expected, ")"));
  }
}

}  // namespace mtk::ckpt
