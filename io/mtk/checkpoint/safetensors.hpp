#pragma once
// safetensors files (the format of Hugging Face's `safetensors`;
// docs/checkpoint-format.md#safetensors): an 8-byte little-endian header length N, N bytes of JSON
//   {"NAME": {"dtype": "F32", "shape": [2, 3], "data_offsets": [BEGIN, END]}, ...,
//    "__metadata__": {"KEY": "VALUE", ...}}
// then the tensors' bytes, row-major and little-endian, offsets relative to the data's start.
// MTK writes them deterministically: tensors in name order, the header's keys sorted and compact,
// padded with spaces so that the data starts 8-byte aligned; the same tensors and metadata give
// the same bytes. No JSON type appears here.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mtk {

/// One tensor of a safetensors file.
struct SafetensorsTensor {
  std::string dtype;  ///< "F32", "BF16", "F16", "F64", "I64", "I32", "I16", "I8", "U8", "BOOL"
  std::vector<std::int64_t> shape;  ///< row-major; [] is a scalar
  std::string bytes;                ///< the values, little-endian (size = elements x dtype bytes)
};

/// A whole file: tensors by name (sorted) and the string map `__metadata__`.
struct SafetensorsFile {
  std::map<std::string, SafetensorsTensor> tensors;
  std::map<std::string, std::string> metadata;
};

/// Bytes per value of a safetensors dtype; fails as `where` naming the dtype and the allowed ones.
std::int64_t safetensors_dtype_bytes(const std::string& dtype, const std::string& where);

/// The file's bytes (deterministic: see above). Fails as `where` when a tensor's byte count is not
/// its shape's, naming the tensor.
std::string safetensors_bytes(const SafetensorsFile& file, const std::string& where);

/// Writes safetensors_bytes(file) to `path` atomically (a temporary file renamed into place).
void write_safetensors(const std::string& path, const SafetensorsFile& file,
                       const std::string& where);

/// Reads and checks a safetensors file: header length within the file and at most 100 MB, the
/// JSON, every entry's dtype, shape and offsets, the data covered exactly (no holes, no overlaps,
/// nothing after the last tensor). Errors name `where`, the file and the tensor.
SafetensorsFile read_safetensors(const std::string& path, const std::string& where);

/// The float32 values of tensor `name` of `file` (F32 as is, BF16 widened exactly); fails as
/// `where` naming the file `path`, the tensor and its dtype otherwise.
std::vector<float> safetensors_floats(const SafetensorsFile& file, const std::string& name,
                                      const std::string& path, const std::string& where);

/// A tensor of float32 `values` stored as "F32", or as "BF16" rounded to nearest even.
SafetensorsTensor safetensors_from_floats(const std::vector<std::int64_t>& shape,
                                          const float* values, bool bf16);

}  // namespace mtk
