#pragma once
// Errors MTK raises, and the rule that all ranks agree on failure.

#include <exception>
#include <sstream>
#include <stdexcept>
#include <string>

namespace mtk {

/// Every error MTK raises. The message starts with the qualified function name
/// ("mtk::LayoutRules::parse: ...") and names the tensors, dims and sizes involved.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

/// The error agreement raises (mtk::agree, <mtk/parallel/communicator.hpp>): every rank of the
/// communicator throws it with the same message, so a program may report it once (rank 0) and
/// finish normally.
class AgreedError : public Error {
 public:
  explicit AgreedError(const std::string& what) : Error(what) {}
};

/// Throws mtk::Error("<where>: <what>").
[[noreturn]] void fail(const std::string& where, const std::string& what);

/// Streams its arguments into one string: mtk::cat("dim ", name, " has size ", n).
template <class... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

}  // namespace mtk
