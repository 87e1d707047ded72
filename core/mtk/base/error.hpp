#pragma once
// Errors MTK raises, and the rule that all ranks agree on failure.

#include <mpi.h>

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

/// The error agree() raises: every rank of the communicator throws it with the same message, so
/// a program may report it once (rank 0) and finish normally.
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

/// Collective error agreement: the lowest rank of `comm` that failed broadcasts its message.
/// Called by every rank of `comm` with its own failure message ("" when it succeeded). If any
/// rank failed, every rank throws mtk::Error with that message (prefixed by the failing rank),
/// so no rank is left waiting in a later collective.
void agree(MPI_Comm comm, const std::string& local_failure);

/// Runs `fn` on every rank of `comm` and agrees on the outcome (see agree()).
template <class F>
auto agree_on_failure(MPI_Comm comm, F&& fn) -> decltype(fn()) {
  std::string failure;
  if constexpr (std::is_void_v<decltype(fn())>) {
    try {
      fn();
    } catch (const std::exception& e) {
      failure = e.what();
    }
    agree(comm, failure);
  } else {
    decltype(fn()) result{};
    try {
      result = fn();
    } catch (const std::exception& e) {
      failure = e.what();
    }
    agree(comm, failure);
    return result;
  }
}

}  // namespace mtk
