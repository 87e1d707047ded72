#pragma once
// Reading the message of an mtk::Error in tests: errors must name the function, tensor or file,
// dims and sizes, so tests check their text.

#include <mtk/base/error.hpp>

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace mtk::test {

/// The message of the mtk::Error `fn` throws ("" when it throws none).
template <class F>
std::string error_of(F&& fn) {
  try {
    std::forward<F>(fn)();
  } catch (const mtk::Error& e) {
    return e.what();
  }
  return "";
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

/// Every one of `parts` is in `message`.
inline void expect_parts(const std::string& message, const std::vector<std::string>& parts) {
  for (const auto& part : parts)
    EXPECT_TRUE(contains(message, part)) << "'" << part << "' not in: " << message;
}

}  // namespace mtk::test
