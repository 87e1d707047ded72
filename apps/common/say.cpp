#include "say.hpp"

#include <mtk/parallel/communicator.hpp>

#include <cstdarg>

namespace mtk::app {

bool says() {
  return Communicator::world_rank() == 0;
}

void say(const std::string& text) {
  if (says()) {
    std::printf("%s", text.c_str());
    std::fflush(stdout);
  }
}

void say(const char* format, ...) {
  if (!says())
    return;
  std::va_list args;
  va_start(args, format);
  std::vprintf(format, args);
  va_end(args);
  std::fflush(stdout);
}

}  // namespace mtk::app
