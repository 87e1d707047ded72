#pragma once
// Run-time options (mtk/base/runtime_options.hpp) set for one scope: the environment variables are
// set and the options read again; the old values come back when the scope ends.

#include <mtk/base/runtime_options.hpp>

#include <cstdlib>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace mtk::test {

class OptionScope {
 public:
  explicit OptionScope(std::initializer_list<std::pair<const char*, const char*>> values) {
    for (const auto& [name, value] : values) {
      const char* old = std::getenv(name);
      saved_.push_back({name, old ? std::string(old) : std::string(), old != nullptr});
      setenv(name, value, 1);
    }
    reload_runtime_options();
  }
  OptionScope(const OptionScope&) = delete;
  OptionScope& operator=(const OptionScope&) = delete;
  ~OptionScope() {
    for (const auto& s : saved_)
      s.was_set ? setenv(s.name.c_str(), s.value.c_str(), 1) : unsetenv(s.name.c_str());
    reload_runtime_options();
  }

 private:
  struct Saved {
    std::string name, value;
    bool was_set;
  };
  std::vector<Saved> saved_;
};

}  // namespace mtk::test
