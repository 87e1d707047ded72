#include "say.hpp"

#include <mtk/parallel/communicator.hpp>

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

}  // namespace mtk::app
