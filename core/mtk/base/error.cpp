#include <mtk/base/error.hpp>

namespace mtk {

void fail(const std::string& where, const std::string& what) {
  throw Error(where + ": " + what);
}

}  // namespace mtk
