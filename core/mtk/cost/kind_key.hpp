#pragma once
// The key of a step kind in the cost model and in machine files (Machine::elementwise_by_kind,
// StepTime::kind_s): a StepKind's name, or a name checked against every step kind there is. A
// machine file names kinds without the ops at hand, so the key is the kind's name, made only from
// a kind or a known name: a misspelt kind is an error, not a rate that is never used.

#include <mtk/graph/op_def.hpp>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace mtk::cost {

/// The name of every step kind, sorted: each make_op_kind in core/ (the op kinds and the
/// lowering's own steps; tests/config/test_strict_config.cpp checks the list against the sources).
const std::vector<std::string>& step_kind_names();

class KindKey {
 public:
  KindKey(StepKind kind) : name_(kind.name()) {}  // NOLINT: every step kind has its key
  /// The key of `name`, one of step_kind_names(); throws naming it otherwise.
  static KindKey named(const std::string& name);
  /// The matrix products' key, under which StepTime::kind_s counts matmul_s.
  static KindKey einsum() { return named("einsum"); }

  const std::string& name() const { return name_; }
  friend bool operator<(const KindKey& a, const KindKey& b) { return a.name_ < b.name_; }
  friend bool operator==(const KindKey& a, const KindKey& b) { return a.name_ == b.name_; }
  friend bool operator!=(const KindKey& a, const KindKey& b) { return !(a == b); }

 private:
  explicit KindKey(std::string name) : name_(std::move(name)) {}
  std::string name_;
};

/// `values` by kind name (JSON objects, tables).
template <class V>
std::map<std::string, V> by_name(const std::map<KindKey, V>& values) {
  std::map<std::string, V> out;
  for (const auto& [kind, v] : values)
    out.emplace(kind.name(), v);
  return out;
}

}  // namespace mtk::cost
