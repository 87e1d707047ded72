#include <mtk/base/error.hpp>
#include <mtk/parallel/communicator.hpp>

#include <cstdint>
#include <string>
#include <vector>

// The string broadcasts and error agreement: built on the typed collectives only.

namespace mtk {

std::string Communicator::broadcast_string(std::string value, int root) const {
  const auto n = broadcast(static_cast<std::uint64_t>(value.size()), root);
  value.resize(static_cast<std::size_t>(n));
  broadcast_in_place(value.data(), value.size(), root);
  return value;
}

std::vector<std::string> Communicator::broadcast_strings(std::vector<std::string> value,
                                                         int root) const {
  std::vector<std::uint64_t> lengths;
  std::string joined;
  for (const auto& s : value) {
    lengths.push_back(s.size());
    joined += s;
  }
  lengths = broadcast(std::move(lengths), root);
  joined = broadcast_string(std::move(joined), root);
  value.clear();
  std::size_t off = 0;
  for (auto len : lengths) {
    value.push_back(joined.substr(off, static_cast<std::size_t>(len)));
    off += static_cast<std::size_t>(len);
  }
  return value;
}

void Communicator::agree(const std::string& local_failure) const {
  const int first = min(local_failure.empty() ? size() : rank());
  if (first == size())
    return;
  const std::string message = broadcast(rank() == first ? local_failure : std::string(), first);
  if (rank() == first)
    throw AgreedError(message);
  throw AgreedError(cat("[failed on rank ", first, "] ", message));
}

}  // namespace mtk
