#include <mtk/lower/bf16_rewiden.hpp>

#include <algorithm>

namespace mtk {

std::vector<Program::Step> rewiden_bf16_variables(const std::vector<Program::Step>& steps,
                                                  const std::map<int, int>& read_steps,
                                                  const std::map<int, int>& stores, int gap) {
  std::vector<Program::Step> out;
  out.reserve(steps.size());
  std::map<int, int> last;  // variable -> index in `out` of its copy's last write or read
  for (size_t s = 0; s < steps.size(); ++s) {
    const Program::Step& st = steps[s];
    for (const auto& [t, r] : read_steps) {
      const bool reads = std::find(st.reads.begin(), st.reads.end(), t) != st.reads.end();
      auto it = last.find(t);
      if (!reads || it == last.end() || static_cast<int>(s) >= stores.at(t))
        continue;
      if (static_cast<int>(out.size()) - it->second > gap) {
        out.push_back(steps[static_cast<size_t>(r)]);  // a fresh copy of the storage
        it->second = static_cast<int>(out.size()) - 1;
      }
    }
    out.push_back(st);
    const int here = static_cast<int>(out.size()) - 1;
    for (const auto& [t, r] : read_steps)
      if (std::find(st.reads.begin(), st.reads.end(), t) != st.reads.end() ||
          std::find(st.writes.begin(), st.writes.end(), t) != st.writes.end())
        last[t] = here;
  }
  return out;
}

}  // namespace mtk
