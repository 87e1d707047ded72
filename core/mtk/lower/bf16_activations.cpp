// mtk/lower/bf16_activations.hpp
#include <mtk/kernels/bfloat16_storage.hpp>
#include <mtk/lower/bf16_activations.hpp>
#include <mtk/lower/lowering_context.hpp>

#include <algorithm>
#include <map>

namespace mtk {
namespace {

// The steps that make an activation's bits and its float32 values again.
constexpr auto store_bf16_step =
    make_op_kind<NoAttrs>("store_bf16", {FlopClass::none, false}, nullptr);
constexpr auto load_bf16_step =
    make_op_kind<NoAttrs>("load_bf16", {FlopClass::none, false}, nullptr);

bool has(const std::vector<int>& v, int t) {
  return std::find(v.begin(), v.end(), t) != v.end();
}

// Per tensor: its writing steps and its reading steps, in order.
struct Uses {
  std::vector<int> writers, readers;
};

int root_of(std::vector<int>& parent, int t) {
  while (parent[static_cast<size_t>(t)] != t)
    t = parent[static_cast<size_t>(t)] =
        parent[static_cast<size_t>(parent[static_cast<size_t>(t)])];
  return t;
}

// One use of a group's buffer: a step reading one of its names, exactly or not.
struct Use {
  int step, name;
  bool exact;
};

// The plan for one group of names sharing a buffer, or an empty one (narrow_after < 0).
Bf16StoredActivation plan_group(const std::vector<Program::Step>& steps,
                                const std::vector<Uses>& uses, const std::vector<int>& names,
                                const Bf16ActivationInputs& in) {
  Bf16StoredActivation a;
  int writer = -1;
  std::vector<Use> all;
  for (int t : names) {
    const Uses& u = uses[static_cast<size_t>(t)];
    if (in.excluded.count(t) || u.writers.size() != 1)
      return a;
    const auto& w = steps[static_cast<size_t>(u.writers.front())];
    if (!(in.renames && in.renames(w))) {
      if (writer >= 0)
        return a;  // two values in one buffer
      writer = u.writers.front();
      a.names.insert(a.names.begin(), t);
    } else {
      a.names.push_back(t);
    }
    for (int r : u.readers) {
      const auto& st = steps[static_cast<size_t>(r)];
      all.push_back({r, t, !(in.renames && in.renames(st)) && has(st.bf16_exact_reads, t)});
    }
  }
  if (writer < 0 || all.empty())
    return a;
  for (int t : names)
    if (has(steps[static_cast<size_t>(writer)].reads, t))
      return a;  // updated in place
  std::sort(all.begin(), all.end(), [](const Use& x, const Use& y) { return x.step < y.step; });
  if (all.front().step < writer)
    return a;  // read before it is written (a value from an earlier run)
  int last_other = writer;
  for (const Use& u : all)
    if (!u.exact)
      last_other = std::max(last_other, u.step);
  int prev = last_other;
  std::map<int, int> last_use;  // name -> the last reader of its float32 values made again
  for (const Use& u : all) {
    if (u.step <= last_other)
      continue;
    if (a.narrow_after < 0 && u.step - prev > in.gap)
      a.narrow_after = prev;
    prev = u.step;
    if (a.narrow_after < 0)
      continue;
    const auto it = last_use.find(u.name);
    if (it == last_use.end() || u.step - it->second > in.gap)
      a.widen_before.emplace_back(u.step, u.name);
    last_use[u.name] = u.step;
    if (a.readers.empty() || a.readers.back() != u.step)
      a.readers.push_back(u.step);
  }
  return a;
}

}  // namespace

std::vector<Bf16StoredActivation> plan_bf16_activations(const std::vector<Program::Step>& steps,
                                                        std::size_t slots,
                                                        const Bf16ActivationInputs& in) {
  std::vector<Uses> uses(slots);
  std::vector<int> parent(slots);
  for (size_t t = 0; t < slots; ++t)
    parent[t] = static_cast<int>(t);
  std::vector<bool> bad(slots, false);
  for (size_t s = 0; s < steps.size(); ++s) {
    const auto& st = steps[s];
    for (int t : st.writes)
      uses[static_cast<size_t>(t)].writers.push_back(static_cast<int>(s));
    for (int t : st.reads)
      uses[static_cast<size_t>(t)].readers.push_back(static_cast<int>(s));
    if (!(in.renames && in.renames(st)))
      continue;
    if (st.reads.size() == 1 && st.writes.size() == 1) {
      parent[static_cast<size_t>(root_of(parent, st.writes.front()))] =
          root_of(parent, st.reads.front());
      continue;
    }
    for (int t : st.reads)
      bad[static_cast<size_t>(t)] = true;
    for (int t : st.writes)
      bad[static_cast<size_t>(t)] = true;
  }
  std::map<int, std::vector<int>> groups;
  for (size_t t = 0; t < slots; ++t)
    groups[root_of(parent, static_cast<int>(t))].push_back(static_cast<int>(t));
  std::vector<Bf16StoredActivation> plan;
  for (const auto& [root, names] : groups) {
    bool ok = true;
    for (int t : names)
      ok = ok && !bad[static_cast<size_t>(t)];
    if (!ok)
      continue;
    Bf16StoredActivation a = plan_group(steps, uses, names, in);
    if (a.narrow_after >= 0)
      plan.push_back(std::move(a));
  }
  std::sort(plan.begin(), plan.end(),
            [](const auto& x, const auto& y) { return x.names.front() < y.names.front(); });
  return plan;
}

std::vector<Program::Step> apply_bf16_activations(
    const std::vector<Program::Step>& steps, const std::vector<Bf16StoredActivation>& plan,
    const std::vector<int>& bits, const std::function<Program::Step(std::size_t)>& narrow,
    const std::function<Program::Step(std::size_t, int)>& widen, std::vector<int>& narrow_at) {
  std::multimap<int, size_t> narrows, reads;
  std::multimap<int, std::pair<size_t, int>> widens;
  for (size_t k = 0; k < plan.size(); ++k) {
    narrows.emplace(plan[k].narrow_after, k);
    for (const auto& [s, name] : plan[k].widen_before)
      widens.emplace(s, std::make_pair(k, name));
    for (int s : plan[k].readers)
      reads.emplace(s, k);
  }
  narrow_at.assign(plan.size(), -1);
  std::vector<Program::Step> out;
  out.reserve(steps.size() + narrows.size() + widens.size());
  for (size_t s = 0; s < steps.size(); ++s) {
    const int i = static_cast<int>(s);
    for (auto [it, end] = widens.equal_range(i); it != end; ++it)
      out.push_back(widen(it->second.first, it->second.second));
    out.push_back(steps[s]);
    for (auto [it, end] = reads.equal_range(i); it != end; ++it)
      out.back().reads.push_back(bits[it->second]);
    for (auto [it, end] = narrows.equal_range(i); it != end; ++it) {
      narrow_at[it->second] = static_cast<int>(out.size());
      out.push_back(narrow(it->second));
    }
  }
  return out;
}

// After every pass that moves steps, before the bf16 copies are planned (they take the stored
// activations' copies into account); Lowering::plan_buffers decides whether to run it.
void Lowering::store_bf16_activations() {
  Bf16ActivationInputs in;
  in.excluded.insert(p_->persistent_.begin(), p_->persistent_.end());
  in.excluded.insert(p_->placeholders_.begin(), p_->placeholders_.end());
  in.excluded.insert(widened_variables_.begin(), widened_variables_.end());
  in.excluded.insert(keep_to_end_.begin(), keep_to_end_.end());
  in.excluded.insert(in_variable_storage_.begin(), in_variable_storage_.end());
  for (const auto& [t, storage] : p_->variables_)
    in.excluded.insert(t);
  const int n = static_cast<int>(p_->layouts_.size());
  for (int t = 0; t < n; ++t)
    if (!is_float(t))
      in.excluded.insert(t);
  // Pure renames share the buffer; other free steps (collectives, views of variables, halo
  // exchanges) leave their tensors alone.
  in.renames = [](const Program::Step& st) { return st.kind.traits().rename; };
  for (const auto& st : p_->steps_)
    if (st.kind.traits().free && !in.renames(st)) {
      in.excluded.insert(st.reads.begin(), st.reads.end());
      in.excluded.insert(st.writes.begin(), st.writes.end());
    }
  const std::vector<Bf16StoredActivation> plan =
      plan_bf16_activations(p_->steps_, static_cast<size_t>(n), in);
  if (plan.empty())
    return;
  std::vector<int> bits;
  for (const auto& a : plan)
    bits.push_back(new_temp(layout(a.names[0]).shape(), axes(a.names[0]), DType::bfloat16));
  const Program* program = p_.get();
  auto step = [](StepKind kind, const std::string& what, std::vector<int> reads, int to,
                 Program::StepFn fn) {
    Program::Step st{kind,
                     what,
                     Program::Category::compute,
                     false,
                     std::move(reads),
                     {to},
                     std::move(fn),
                     {},
                     {},
                     {},
                     {},
                     {},
                     {}};
    return st;
  };
  // Every name of the buffer is read here, so the float32 buffer dies here. The bits are the copy
  // the forward's bf16 readers kept when there is one (mtk/lower/bf16_reuse.hpp).
  auto narrow = [&](size_t k) {
    const int t = plan[k].names[0], b16 = bits[k];
    const std::int64_t count = local(t).num_elements();
    return step(store_bf16_step.def, cat("store ", describe(t), " as bf16"), plan[k].names, b16,
                [=](Buffers& b, const ExecSpace& space) {
                  const kernels::FView x = view_of<float>(b, t);
                  kernels::Bf16Copies* copies = program->bf16_copies_for(t);
                  const kernels::BView kept =
                      copies ? copies->take(x.data(), count) : kernels::BView();
                  b[static_cast<size_t>(b16)] =
                      kept.data() ? Program::Buffer(kept)
                                  : Program::Buffer(kernels::narrow_bfloat16(space, x));
                });
  };
  auto widen = [&](size_t k, int name) {
    const int b16 = bits[k];
    const std::int64_t count = local(name).num_elements();
    Program::Step st = step(load_bf16_step.def, cat("load ", describe(name), " from bf16"), {b16},
                            name, [=](Buffers& b, const ExecSpace& space) {
                              if (!b[static_cast<size_t>(name)].empty())
                                return;  // a run fetching this name kept its float32 values
                              const kernels::BView stored = view_of<std::uint16_t>(b, b16);
                              const kernels::FView x = kernels::widen_bfloat16(space, stored);
                              b[static_cast<size_t>(name)] = x;
                              if (kernels::Bf16Copies* copies = program->bf16_copies_for(name))
                                copies->keep(x.data(), count, stored);
                            });
    st.bf16_writes = {name};
    return st;
  };
  std::vector<int> narrow_at;
  p_->steps_ = apply_bf16_activations(p_->steps_, plan, bits, narrow, widen, narrow_at);
  for (size_t k = 0; k < plan.size(); ++k) {
    bf16_stored_.emplace_back(plan[k].names, narrow_at[k]);
    p_->bf16_stored_.insert(p_->bf16_stored_.end(), plan[k].names.begin(), plan[k].names.end());
  }
}

}  // namespace mtk
