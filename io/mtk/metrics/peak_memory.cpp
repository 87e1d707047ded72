#include <mtk/metrics/peak_memory.hpp>

#include <fstream>
#include <string>
#include <sys/resource.h>

namespace mtk {

std::int64_t peak_resident_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) != 0)
      continue;
    try {
      return std::stoll(line.substr(6)) * 1024;  // "VmHWM:   123456 kB"
    } catch (const std::exception&) {
      break;
    }
  }
  rusage usage{};
  if (::getrusage(RUSAGE_SELF, &usage) == 0)
    return static_cast<std::int64_t>(usage.ru_maxrss) * 1024;  // kilobytes on Linux
  return 0;
}

}  // namespace mtk
