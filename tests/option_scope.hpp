#pragma once
// Run-time options (mtk/base/runtime_options.hpp: backends and diagnostics) set for one scope: the
// environment variables are set and the options read again; the old values come back when the
// scope ends. What shapes a program is no environment variable: tests pass ProgramOptions.

#include <mtk/base/runtime_options.hpp>
#include <mtk/parallel/node_reducer.hpp>

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

/// program.node_allreduce (set_node_allreduce, the applications' process-wide switch) for one
/// scope.
class NodeAllreduceScope {
 public:
  explicit NodeAllreduceScope(bool on) : was_(node_allreduce()) { set_node_allreduce(on); }
  NodeAllreduceScope(const NodeAllreduceScope&) = delete;
  NodeAllreduceScope& operator=(const NodeAllreduceScope&) = delete;
  ~NodeAllreduceScope() { set_node_allreduce(was_); }

 private:
  bool was_;
};

}  // namespace mtk::test
