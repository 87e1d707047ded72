#include <mtk/base/checked.hpp>
#include <mtk/base/error.hpp>
#include <mtk/lower/bf16_rewiden.hpp>
#include <mtk/lower/impl/step_kinds.hpp>
#include <mtk/lower/in_place_activations.hpp>
#include <mtk/lower/in_place_updates.hpp>
#include <mtk/lower/lowering.hpp>
#include <mtk/lower/lowering_context.hpp>
#include <mtk/lower/memory_model.hpp>
#include <mtk/lower/overlap.hpp>
#include <mtk/lower/recompute.hpp>

#include <algorithm>
#include <map>
#include <set>

namespace mtk {

// The generic machinery; each op's own lowering lives with the op (OpKind::lower, core/mtk/ops/).
// Here the driver and the passes it runs in order; the steps, counters and relayouts the ops'
// lowerings call are in lowering_steps.cpp, lowering_counters.cpp and lowering_relayout.cpp.

using namespace lowering_kinds;

Lowering::Lowering(Graph& g, const Mesh& mesh, const LayoutRules& rules, const MeshShape& shape,
                   const std::vector<int>& coords, bool dry, const ProgramOptions& options)
    : g_(g),
      mesh_(mesh),
      shape_(shape),
      coords_(coords),
      dry_(dry),
      options_(options),
      rules_(rules),
      p_(new Program(mesh, options)) {
  p_->dry_ = dry;
}

std::unique_ptr<Program> Lowering::run() {
  p_->graph_ = &g_;
  for (int t = 0; t < g_.num_tensors(); ++t) {
    const auto& info = g_.tensor_info(t);
    p_->layouts_.emplace_back(info.shape, rules_, shape_, info.name);
  }
  pending_.assign(static_cast<size_t>(g_.num_tensors()), {});
  // About one step per op (relayouts and reductions add some): reserved, the steps are not moved
  // as the list doubles; untouched capacity costs no memory.
  const size_t expected = static_cast<size_t>(g_.num_ops()) * 3 / 2 + 64;
  p_->steps_.reserve(expected);
  origins_.reserve(expected);
  for (int i = 0; i < g_.num_ops(); ++i) {
    op_index_ = i;
    const Operation& o = op();
    if (!o.def->lower)
      fail("mtk::lower", cat(label(), ": op kind '", o.kind(), "' has no lowering"));
    o.def->lower(*o.def, *this);
  }
  p_->pending_ = pending_;
  recompute();
  rewiden_bf16_variables();
  if (options_.overlap_collectives)
    p_->overlap_ = overlap_reductions(
        p_->steps_, mesh_, shape_, [&](int t) { return local(t).num_elements(); },
        options_.allreduce_bucket_mib << 20, dry_, scatters_,
        options_.overlap_allgather ? gathers_ : GatherSpecs());
  if (options_.overlap_halo)
    p_->overlapped_halos_ = overlap_halos(p_->steps_);
  plan_buffers();
  return std::move(p_);
}

// The passes on buffers, from the steps in their final order: bf16 activation storage
// (mtk/lower/bf16_activations.hpp; under `auto` kept where it lowers the predicted peak), the bf16
// copies (under `auto` the weights' copies made again in the backward where that lowers it), the
// in-place updates, the lifetimes and the prediction.
void Lowering::plan_buffers() {
  const Bf16Activations mode = options_.bf16_activations;
  auto plan_steps = [&](bool store, bool windows) {
    bf16_stored_.clear();
    p_->bf16_stored_.clear();
    bf16_variable_windows_ = windows;
    if (store)
      store_bf16_activations();
    plan_bf16_copies();
    plan_in_place_updates();
    finish();
    return p_->counters_.peak_bytes;
  };
  bool exact = false;
  for (const auto& st : p_->steps_)
    exact = exact || !st.bf16_exact_reads.empty();
  if (!exact || mode != Bf16Activations::automatic) {
    plan_steps(exact && mode == Bf16Activations::on, false);  // one plan: the steps as they are
    return;
  }
  // Several plans, each from the steps as lowered.
  const std::vector<Program::Step> steps = p_->steps_;
  auto plan = [&](bool store, bool windows) {
    p_->steps_ = steps;
    return plan_steps(store, windows);
  };
  const std::int64_t float32 = plan(false, false), stored = plan(true, false);
  const bool store = stored < float32 && !bf16_stored_.empty();
  // The weights' bf16 copies made again by their backward readers instead of held from the
  // forward: where that lowers the peak, for at most two more conversions of a weight per step
  // (recomputation reads it a third time; microbatches 2k times: those keep their copies). Not
  // planned where no weight's copy is kept (no oneDNN bf16 path): the same plan again.
  const bool held = p_->bf16_variable_conversions_ > 0;
  if (held && plan(store, true) < (store ? stored : float32) && p_->bf16_variable_conversions_ <= 3)
    return;
  if (held || (!store && !bf16_stored_.empty()))
    plan(store, false);
}

// Recomputation (mtk/lower/recompute.hpp): copies of the segments' forward steps before their
// backward steps, counted like the steps they copy.
void Lowering::recompute() {
  if (std::none_of(origins_.begin(), origins_.end(),
                   [](const StepOrigin& o) { return o.tag.segment >= 0; }))
    return;
  std::vector<RecomputeTag> tags;
  tags.reserve(origins_.size());
  for (const auto& o : origins_)
    tags.push_back(o.tag);
  const RecomputePlan plan =
      plan_recomputation(p_->steps_, tags, static_cast<int>(p_->layouts_.size()));
  p_->steps_ = apply_recomputation(std::move(p_->steps_), plan);
  for (size_t i = 0; i < plan.source.size(); ++i) {
    if (!plan.copy[i])
      continue;
    const StepOrigin& o = origins_[static_cast<size_t>(plan.source[i])];
    count_step(p_->steps_[i], o.flops, o.bytes);
    for (const auto& c : o.comm)
      add_comm_counters(c);
    for (const GemmCalls& g : o.gemms)
      add_gemm_counters(g);
    ++p_->recomputed_steps_;
  }
}

// bfloat16 variables widened again at distant readers (mtk/lower/bf16_rewiden.hpp), after
// recomputation has placed the backward's steps.
void Lowering::rewiden_bf16_variables() {
  if (widened_variables_.empty() || !options_.in_place_updates)
    return;  // with program.in_place_updates false one copy lives to the update (bitwise the same)
  const auto& steps = p_->steps_;
  std::map<int, int> reads, stores;
  for (int t : widened_variables_) {
    stores[t] = static_cast<int>(steps.size());
    std::set<int> values;
    if (auto it = assigned_.find(t); it != assigned_.end())
      for (const auto& [value, replaces] : it->second)
        values.insert(value);
    for (size_t s = 0; s < steps.size(); ++s) {
      const auto& st = steps[s];
      if (st.reads.empty() && st.writes == std::vector<int>{t} && !reads.count(t))
        reads[t] = static_cast<int>(s);  // the read step (ops/sources.cpp)
      if (st.writes.empty() && st.reads.size() == 1 && values.count(st.reads.front()))
        stores[t] = std::min(stores[t], static_cast<int>(s));  // rounds a value into the storage
    }
  }
  if (reads.size() != widened_variables_.size())
    return;  // a read step not found: leave the copies as they are
  p_->steps_ = ::mtk::rewiden_bf16_variables(steps, reads, stores, 8);
}

// In-place optimizer updates (mtk/lower/in_place_updates.hpp), after every pass that moves steps.
void Lowering::plan_in_place_updates() {
  if (!options_.in_place_updates)
    return;
  InPlaceInputs in;
  for (int t : p_->persistent_)
    in.stored_variables.insert(t);
  // A bfloat16 variable's float32 copy dies at its update: the new value may take its buffer.
  in.stored_variables.insert(widened_variables_.begin(), widened_variables_.end());
  for (const auto& [variable, values] : assigned_)
    if (values.size() == 1 && values.front().second)
      in.set_to[variable] = values.front().first;
  in.renames = [](const Program::Step& st) {
    return st.kind.traits().free || st.kind == StepKind(relayout_step.def);
  };
  in.bytes = [this](int t) { return local_bytes(t); };
  InPlacePlan plan =
      ::mtk::plan_in_place_updates(p_->steps_, static_cast<int>(p_->layouts_.size()), in);
  for (size_t s = 0; s < plan.in_place.size(); ++s)
    p_->steps_[s].in_place = std::move(plan.in_place[s]);
  p_->in_place_aliases_ = std::move(plan.aliases);
  // Then elementwise steps over inputs that die there (mtk/lower/in_place_activations.hpp).
  std::set<int> excluded(p_->persistent_.begin(), p_->persistent_.end());
  excluded.insert(p_->placeholders_.begin(), p_->placeholders_.end());
  excluded.insert(widened_variables_.begin(), widened_variables_.end());
  excluded.insert(keep_to_end_.begin(), keep_to_end_.end());
  InPlaceActivationsPlan acts = plan_in_place_activations(
      p_->steps_, static_cast<int>(p_->layouts_.size()), excluded, in.renames, in.bytes);
  for (size_t s = 0; s < acts.in_place.size(); ++s)
    for (const auto& pair : acts.in_place[s])
      p_->steps_[s].in_place.push_back(pair);
  p_->in_place_group_ = std::move(acts.group);
}

void Lowering::finish() {
  const int n = static_cast<int>(p_->layouts_.size());
  p_->deaths_ = buffer_deaths(p_->steps_, n, p_->placeholders_, keep_to_end_);
  // Peak memory (mtk/lower/memory_model.hpp): the buffers' lifetimes replayed in step order; with
  // buffer reuse on, what the pool keeps (per type and size the most buffers alive at once).
  ProgramLifetimes lifetimes;
  lifetimes.steps = &p_->steps_;
  lifetimes.deaths = &p_->deaths_;
  lifetimes.placeholders = p_->placeholders_;
  lifetimes.persistent = p_->persistent_;
  for (const auto& [stored, elements] : stored_)
    lifetimes.stored.push_back({stored, elements});
  lifetimes.planned = options_.buffer_plan;
  lifetimes.slots.resize(static_cast<size_t>(n));
  for (int t = 0; t < n; ++t)
    lifetimes.slots[static_cast<size_t>(t)] = {
        dtype(t), in_variable_storage_.count(t) ? 0 : local(t).num_elements()};
  const MemoryPrediction m = predict_memory(lifetimes);
  // Shared buckets of overlapped reductions are packed into buffers kept for the program's life.
  std::int64_t packed = 0;
  if (p_->overlap_)
    for (const auto& b : p_->overlap_->buckets())
      if (b.tensors.size() > 1)
        packed += b.bytes;
  packed += bf16_variable_copy_bytes_;  // and the variables' bf16 copies, through each run
  Counters& c = p_->counters_;
  c.live_peak_bytes = checked_add(m.live_peak_bytes, packed, "mtk::lower", "the live peak bytes");
  c.pool_bytes = checked_add(m.pool_bytes, packed, "mtk::lower", "the pool's bytes");
  c.outside_pool_bytes = packed;
  c.peak_bytes = p_->reuse_buffers_ ? c.pool_bytes : c.live_peak_bytes;
  c.halo_exchanges = record_halo_exchanges(p_->steps_);  // the steps' final order
}

std::unique_ptr<Program> lower(Graph& graph, const Mesh& mesh, const LayoutRules& rules,
                               const ProgramOptions& options) {
  Kokkos::Profiling::pushRegion("mtk::lower");
  std::unique_ptr<Program> program;
  std::string failure;
  try {
    program = Lowering(graph, mesh, rules, mesh.shape(), mesh.coordinates(), false, options).run();
  } catch (const std::exception& e) {
    failure = e.what();
  }
  Kokkos::Profiling::popRegion();
  agree(mesh.comm(), failure);  // every rank throws if any rank failed
  return program;
}

std::unique_ptr<Program> analyze(Graph& graph, const MeshShape& mesh, const LayoutRules& rules,
                                 const ProgramOptions& options, int processor) {
  static const Mesh self(MeshShape::parse("self:1"), MPI_COMM_SELF);
  return Lowering(graph, self, rules, mesh, mesh.coordinates_of(processor), true, options).run();
}

}  // namespace mtk
