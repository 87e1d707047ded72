// mtk/lower/bf16_activations.hpp
#include <mtk/lower/bf16_activations.hpp>

#include <mtk/base/runtime_options.hpp>
#include <mtk/kernels/bfloat16_storage.hpp>
#include <mtk/lower/lowering_context.hpp>

#include <algorithm>
#include <map>

namespace mtk {
namespace {

// The steps that make an activation's bits and its float32 values again.
constexpr auto store_bf16_step =
    make_op_kind<NoAttrs>("store_bf16", {FlopClass::none, false}, nullptr);
constexpr auto load_bf16_step = make_op_kind<NoAttrs>("load_bf16", {FlopClass::none, false}, nullptr);

bool has(const std::vector<int>& v, int t) {
  return std::find(v.begin(), v.end(), t) != v.end();
}

// Per tensor: its writing steps and its reading steps, in order.
struct Uses {
  std::vector<int> writers, readers;
};

}  // namespace

std::vector<Bf16StoredActivation> plan_bf16_activations(const std::vector<Program::Step>& steps,
                                                        std::size_t slots,
                                                        const Bf16ActivationInputs& in) {
  std::vector<Uses> uses(slots);
  std::vector<bool> renamed(slots, false);
  for (size_t s = 0; s < steps.size(); ++s) {
    const auto& st = steps[s];
    const bool rename = in.renames && in.renames(st);
    for (int t : st.writes) {
      uses[static_cast<size_t>(t)].writers.push_back(static_cast<int>(s));
      if (rename)
        renamed[static_cast<size_t>(t)] = true;
    }
    for (int t : st.reads) {
      uses[static_cast<size_t>(t)].readers.push_back(static_cast<int>(s));
      if (rename)
        renamed[static_cast<size_t>(t)] = true;
    }
  }
  std::vector<Bf16StoredActivation> plan;
  for (size_t k = 0; k < slots; ++k) {
    const int t = static_cast<int>(k);
    const Uses& u = uses[k];
    if (in.excluded.count(t) || renamed[k] || u.writers.size() != 1 || u.readers.empty())
      continue;
    const int w = u.writers.front();
    if (has(steps[static_cast<size_t>(w)].reads, t) || u.readers.front() < w)
      continue;  // updated in place, or read before it is written (a value from an earlier run)
    int last_other = w;
    for (int r : u.readers)
      if (!has(steps[static_cast<size_t>(r)].bf16_exact_reads, t))
        last_other = r;
    Bf16StoredActivation a;
    a.tensor = t;
    int prev = last_other;
    for (int r : u.readers) {
      if (r <= last_other)
        continue;
      if (r - prev > in.gap) {
        if (a.narrow_after < 0)
          a.narrow_after = prev;
        a.widen_before.push_back(r);
      }
      if (a.narrow_after >= 0)
        a.readers.push_back(r);
      prev = r;
    }
    if (a.narrow_after >= 0)
      plan.push_back(std::move(a));
  }
  return plan;
}

std::vector<Program::Step> apply_bf16_activations(
    const std::vector<Program::Step>& steps, const std::vector<Bf16StoredActivation>& plan,
    const std::vector<int>& bits, const std::function<Program::Step(std::size_t)>& narrow,
    const std::function<Program::Step(std::size_t)>& widen, std::vector<int>& narrow_at) {
  std::multimap<int, size_t> narrows, widens, reads;
  for (size_t k = 0; k < plan.size(); ++k) {
    narrows.emplace(plan[k].narrow_after, k);
    for (int s : plan[k].widen_before)
      widens.emplace(s, k);
    for (int s : plan[k].readers)
      reads.emplace(s, k);
  }
  narrow_at.assign(plan.size(), -1);
  std::vector<Program::Step> out;
  out.reserve(steps.size() + narrows.size() + widens.size());
  for (size_t s = 0; s < steps.size(); ++s) {
    const int i = static_cast<int>(s);
    for (auto [it, end] = widens.equal_range(i); it != end; ++it)
      out.push_back(widen(it->second));
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
// activations' copies into account).
void Lowering::store_bf16_activations() {
  bool any = false;
  for (const auto& st : p_->steps_)
    any = any || !st.bf16_exact_reads.empty();
  if (!any || !runtime_options().bf16_activations())  // MTK_BF16_ACTIVATIONS
    return;
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
  in.renames = [](const Program::Step& st) {
    return st.kind.traits().free || st.kind.name() == std::string("relayout");
  };
  const std::vector<Bf16StoredActivation> plan =
      plan_bf16_activations(p_->steps_, static_cast<size_t>(n), in);
  if (plan.empty())
    return;
  std::vector<int> bits;
  for (const auto& a : plan)
    bits.push_back(new_temp(layout(a.tensor).shape(), axes(a.tensor), DType::bfloat16));
  const Program* program = p_.get();
  auto step = [&](StepKind kind, const std::string& what, int from, int to, Program::StepFn fn) {
    Program::Step st{kind, what, Program::Category::compute, false, {from}, {to}, std::move(fn),
                     {},   {},   {},                         {},    {},     {}};
    return st;
  };
  auto narrow = [&](size_t k) {
    const int t = plan[k].tensor, b16 = bits[k];
    const std::int64_t count = local(t).num_elements();
    // The copy the forward's bf16 readers kept when there is one (mtk/lower/bf16_reuse.hpp).
    return step(store_bf16_step.def, cat("store ", describe(t), " as bf16"), t, b16,
                [=](Buffers& b, const ExecSpace& space) {
                  const kernels::FView x = view_of<float>(b, t);
                  kernels::Bf16Copies* copies = program->bf16_copies_for(t);
                  const kernels::BView kept = copies ? copies->take(x.data(), count) : kernels::BView();
                  b[static_cast<size_t>(b16)] =
                      kept.data() ? Program::Buffer(kept) : Program::Buffer(kernels::narrow_bfloat16(space, x));
                });
  };
  auto widen = [&](size_t k) {
    const int t = plan[k].tensor, b16 = bits[k];
    const std::int64_t count = local(t).num_elements();
    Program::Step st = step(load_bf16_step.def, cat("load ", describe(t), " from bf16"), b16, t,
                            [=](Buffers& b, const ExecSpace& space) {
                              if (!b[static_cast<size_t>(t)].empty())
                                return;  // a run fetching t kept its float32 values
                              const kernels::BView stored = view_of<std::uint16_t>(b, b16);
                              const kernels::FView x = kernels::widen_bfloat16(space, stored);
                              b[static_cast<size_t>(t)] = x;
                              if (kernels::Bf16Copies* copies = program->bf16_copies_for(t))
                                copies->keep(x.data(), count, stored);
                            });
    st.bf16_writes = {t};
    return st;
  };
  std::vector<int> narrow_at;
  p_->steps_ = apply_bf16_activations(p_->steps_, plan, bits, narrow, widen, narrow_at);
  for (size_t k = 0; k < plan.size(); ++k)
    bf16_stored_[plan[k].tensor] = narrow_at[k];
}

}  // namespace mtk
