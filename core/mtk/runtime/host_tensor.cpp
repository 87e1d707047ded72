#include <mtk/base/error.hpp>
#include <mtk/runtime/host_tensor.hpp>

namespace mtk {

void HostTensor::fail_dtype(DType asked) const {
  fail("mtk::HostTensor",
       cat(shape_.to_string(), " holds ", dtype_name(dtype_), " values, not ", dtype_name(asked)));
}

void HostTensor::fail_index(std::int64_t k) const {
  fail("mtk::HostTensor::at",
       cat("index ", k, " outside ", shape_.to_string(), " (", size(), " values)"));
}

}  // namespace mtk
