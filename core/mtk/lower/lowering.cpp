#include <mtk/base/checked.hpp>
#include <mtk/base/error.hpp>
#include <mtk/kernels/elementwise.hpp>
#include <mtk/lower/bf16_rewiden.hpp>
#include <mtk/lower/in_place_activations.hpp>
#include <mtk/lower/in_place_updates.hpp>
#include <mtk/lower/lowering.hpp>
#include <mtk/lower/lowering_context.hpp>
#include <mtk/lower/memory_model.hpp>
#include <mtk/lower/overlap.hpp>
#include <mtk/lower/recompute.hpp>
#include <mtk/parallel/collectives.hpp>
#include <mtk/parallel/halo.hpp>
#include <mtk/parallel/relayout.hpp>

#include <algorithm>
#include <cmath>

namespace mtk {

// The generic machinery; each op's own lowering lives with the op (OpKind::lower, core/mtk/ops/).

namespace {
// The lowering's own step kinds. An alias names a buffer again; the allreduce of a partial sum
// is costed as communication (Counters::comm_bytes), not as kernel work; a relayout copies.
constexpr auto alias_step =
    make_op_kind<NoAttrs>("alias", {FlopClass::none, true, false, true}, nullptr);
constexpr auto allreduce_step =
    make_op_kind<NoAttrs>("allreduce", {FlopClass::none, true}, nullptr);
constexpr auto relayout_step = make_op_kind<NoAttrs>("relayout", {FlopClass::none, false}, nullptr);
constexpr auto reduce_scatter_step =
    make_op_kind<NoAttrs>("reduce_scatter", {FlopClass::none, false}, nullptr);
}  // namespace

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
  const std::vector<Program::Step> steps = p_->steps_;
  auto plan = [&](bool store, bool windows) {
    p_->steps_ = steps;
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
  for (const auto& st : steps)
    exact = exact || !st.bf16_exact_reads.empty();
  if (!exact || mode != Bf16Activations::automatic) {
    plan(exact && mode == Bf16Activations::on, false);
    return;
  }
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

std::string Lowering::label() const {
  return cat(op().kind(), " '", op().name, "'");
}

DType Lowering::dtype(int t) const {
  return t < g_.num_tensors() ? g_.tensor_info(t).dtype : temp_dtype_.at(t);
}

std::int64_t Lowering::local_bytes(int t) const {
  return local(t).num_elements() * static_cast<std::int64_t>(dtype_bytes(dtype(t)));
}

std::string Lowering::describe(int t) const {
  const std::string name = t < g_.num_tensors() ? g_.tensor_info(t).name : "temporary";
  return cat("'", name, "' ", layout(t).to_string());
}

int Lowering::new_temp(Shape shape, const std::vector<int>& ax, DType dtype) {
  int id = static_cast<int>(p_->layouts_.size());
  p_->layouts_.emplace_back(shape, ax, shape_, "tmp");
  pending_.emplace_back();
  temp_dtype_[id] = dtype;
  return id;
}

std::set<int> Lowering::split_axes_of(int t) const {
  std::set<int> s;
  for (int a : axes(t))
    if (a >= 0)
      s.insert(a);
  return s;
}

bool Lowering::intersects(const std::vector<int>& a, const std::set<int>& b) {
  for (int x : a)
    if (b.count(x))
      return true;
  return false;
}

void Lowering::add_step(const std::string& what, std::vector<int> reads, std::vector<int> writes,
                        Program::StepFn fn, double flops, Program::Category category) {
  add_step_of(*op().def, what, std::move(reads), std::move(writes), std::move(fn), flops, category);
}

void Lowering::add_step_of(StepKind kind, const std::string& what, std::vector<int> reads,
                           std::vector<int> writes, Program::StepFn fn, double flops,
                           Program::Category category) {
  p_->steps_.push_back({kind,
                        what,
                        category,
                        communicates_,
                        std::move(reads),
                        std::move(writes),
                        std::move(fn),
                        {},
                        std::move(scratch_),
                        {},
                        {},
                        {},
                        {}});
  scratch_.clear();
  communicates_ = false;
  Program::Step& step = p_->steps_.back();
  step.gemms = next_origin_.gemms;
  for (const CommCount& c : next_origin_.comm)
    step.comm.push_back({{c.kind, c.axes}, c.bytes});
  count_step(step, flops, next_origin_.bytes);
  next_origin_.tag = op().recompute;
  next_origin_.flops = flops;
  origins_.push_back(std::move(next_origin_));
  next_origin_ = StepOrigin();
}

std::shared_ptr<HalosInFlight> Lowering::halos_in_flight() {
  if (!p_->halos_)
    p_->halos_ = std::make_shared<HalosInFlight>();
  return p_->halos_;
}

// The step's calls, bytes and FLOPs in counters(); `moved_bytes` >= 0: its bytes
// (count_moved_bytes).
void Lowering::count_step(const Program::Step& step, double flops, std::int64_t moved_bytes) {
  const StepKind kind = step.kind;
  p_->counters_.op_calls[kind] += 1;
  std::int64_t& bytes = p_->counters_.op_bytes[kind];
  const char* where = "mtk::lower";
  if (moved_bytes >= 0) {
    bytes = checked_add(bytes, moved_bytes, where,
                        [&] { return cat("the bytes moved by '", step.what, "'"); });
    if (kind.traits().flops != FlopClass::none)
      p_->counters_.flops[kind.traits().flops] += flops;
    return;
  }
  if (kind.traits().halo) {  // an exchange's steps move its strips, not their buffers: flops
    bytes = checked_add(bytes, static_cast<std::int64_t>(flops) * 2 * 4, where,
                        [&] { return cat("the bytes moved by '", step.what, "'"); });
    p_->counters_.flops[kind.traits().flops] += flops;
    return;
  }
  for (int t : step.reads)
    bytes = checked_add(bytes, local_bytes(t), where,
                        [&] { return cat("the bytes read by '", step.what, "'"); });
  for (int t : step.writes)
    bytes = checked_add(bytes, local_bytes(t), where,
                        [&] { return cat("the bytes written by '", step.what, "'"); });
  if (kind.traits().flops != FlopClass::none)
    p_->counters_.flops[kind.traits().flops] += flops;
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
  p_->steps_ = apply_recomputation(p_->steps_, plan);
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

void Lowering::add_sum_step(int sum, int part, int y) {
  const Shape ly = local(y);
  add_step(
      label(), {sum, part}, {y},
      [=](Buffers& b, const ExecSpace& space) {
        b[static_cast<size_t>(y)] = kernels::binary<float>(
            space, BinaryFn::add, ly, view_of<float>(b, sum), ly, view_of<float>(b, part), ly,
            in_place_output<float>(b, y, {sum}));
      },
      static_cast<double>(ly.num_elements()));
  allow_overwrite(y, sum);
}

void Lowering::add_allreduce_step(const std::string& what, int y, Program::StepFn fn) {
  add_step_of(allreduce_step.def, what, {y}, {y}, std::move(fn), 0, Program::Category::collective);
}

void Lowering::add_alias(int from, int y) {
  add_step_of(
      alias_step.def, "alias " + describe(y), {from}, {y},
      [=](Buffers& b, const ExecSpace&) {
        b[static_cast<size_t>(y)] = b[static_cast<size_t>(from)];
      },
      0, Program::Category::compute);
}

void Lowering::count_moved_bytes(std::int64_t bytes) {
  next_origin_.bytes = bytes;
}

void Lowering::count_gemms(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t gemms) {
  const double each =
      2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  if (gemms <= 0 || !(each > 0))
    return;
  const GemmCalls g{GemmClass::of(m, n, k), each, gemms};
  next_origin_.gemms.push_back(g);
  add_gemm_counters(g);
}

void Lowering::add_gemm_counters(const GemmCalls& g) {
  auto& [flops, calls] = p_->counters_.gemm_by_size[g.cls];
  flops += g.flops_each * static_cast<double>(g.calls);
  calls += g.calls;
}

void Lowering::count_flops(FlopClass c, double flops) {
  p_->counters_.flops[c] += flops;
}

void Lowering::count_comm(Collective kind, std::int64_t bytes, std::vector<int> axes) {
  communicates_ = true;
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  next_origin_.comm.push_back({kind, bytes, axes});
  add_comm_counters(next_origin_.comm.back());
}

void Lowering::add_comm_counters(const CommCount& c) {
  const char* where = "mtk::lower";
  const Collective kind = c.kind;
  const std::int64_t bytes = c.bytes;
  auto& total = p_->counters_.comm_bytes[kind];
  total = checked_add(total, bytes, where,
                      [&] { return cat("the bytes of ", to_string(kind), " collectives"); });
  p_->counters_.comm_calls[kind] += 1;
  const Counters::CommGroup key{kind, c.axes};
  auto& group_total = p_->counters_.group_bytes[key];
  group_total = checked_add(group_total, bytes, where,
                            [&] { return cat("the bytes of ", to_string(kind), " collectives"); });
  p_->counters_.group_calls[key] += 1;
  const int size_key =
      bytes > 0 ? static_cast<int>(std::floor(std::log2(static_cast<double>(bytes)))) : -1;
  auto& [size_bytes, size_calls] = p_->counters_.group_sizes[key][size_key];
  size_bytes = checked_add(size_bytes, bytes, where,
                           [&] { return cat("the bytes of ", to_string(kind), " collectives"); });
  size_calls += 1;
}

void Lowering::materialize(int t) {
  auto ax = pending_[static_cast<size_t>(t)];
  if (ax.empty())
    return;
  pending_[static_cast<size_t>(t)].clear();
  count_comm(Collective::allreduce, local_bytes(t), ax);
  const Mesh mesh = mesh_;
  std::string names;
  for (int a : ax)
    names += (names.empty() ? "" : ",") + shape_[a].name;
  add_step_of(
      allreduce_step.def, cat("allreduce(sum) of ", describe(t), " over ", names), {t}, {t},
      [mesh, ax, t](Buffers& b, const ExecSpace&) {
        allreduce<float>(mesh, ax, b[static_cast<size_t>(t)].view<float>());
      },
      0, Program::Category::collective);
  p_->steps_.back().sum_axes = ax;  // the overlap pass may move it
}

// A partial sum pending over a mesh axis that `to` splits a whole dim over: one reduce-scatter
// along that dim (half an allreduce's traffic, no slicing after it) instead of allreduce + slice.
// t itself stays pending: another reader still gets the whole sum.
int Lowering::reduce_scatter_pending(int t, const std::vector<int>& to) {
  if (dtype(t) != DType::float32)
    return t;
  int cur = t;
  for (size_t j = 0; j < to.size(); ++j) {
    const int a = to[j];
    const auto from = axes(cur);
    const auto& pend = pending_[static_cast<size_t>(cur)];
    if (a < 0 || from[j] >= 0 || std::find(pend.begin(), pend.end(), a) == pend.end() ||
        std::find(from.begin(), from.end(), a) != from.end())
      continue;
    auto ax = from;
    ax[j] = a;
    std::vector<int> rest;
    for (int p : pend)
      if (p != a)
        rest.push_back(p);
    const int out = new_temp(layout(cur).shape(), ax, DType::float32);
    pending_[static_cast<size_t>(out)] = rest;
    count_comm(Collective::reduce_scatter, local_bytes(out), {a});
    const Mesh mesh = mesh_;
    const Shape local_shape = local(cur);
    const int dim = static_cast<int>(j), in = cur;
    add_step_of(
        reduce_scatter_step.def,
        cat("reduce_scatter(sum) of ", describe(in), " over ", shape_[a].name, " along '",
            local_shape[dim].name, "'"),
        {in}, {out},
        [=](Buffers& b, const ExecSpace&) {
          b[static_cast<size_t>(out)] = Program::Buffer(reduce_scatter<float>(
              mesh, a, local_shape, dim, b[static_cast<size_t>(in)].view<float>()));
        },
        0, Program::Category::collective);
    p_->steps_.back().sum_axes = {a};  // the overlap pass may start it early
    scatters_[out] = {local_shape, dim};
    cur = out;
  }
  return cur;
}

int Lowering::relayout(int t, const std::vector<int>& to) {
  if (to == axes(t))
    return t;
  t = reduce_scatter_pending(t, to);
  materialize(t);  // what is still pending (over other axes)
  if (to == axes(t))
    return t;
  const Shape& s = layout(t).shape();
  auto plan = plan_relayout(s, axes(t), to, shape_);
  const DType dt = dtype(t);
  int out = new_temp(s, to, dt);
  for (const auto& m : plan) {
    const std::int64_t bytes =
        m.local_before.num_elements() * static_cast<std::int64_t>(dtype_bytes(dt));
    if (m.kind == RelayoutMove::Kind::allconcat)
      count_comm(Collective::allconcat, bytes, {m.axis});
    if (m.kind == RelayoutMove::Kind::alltoall)
      count_comm(Collective::alltoall, bytes, {m.axis});
  }
  const Mesh mesh = mesh_;
  add_step_of(
      relayout_step.def, cat("relayout ", describe(t), ": ", describe_relayout(plan, shape_)), {t},
      {out},
      [mesh, plan, t, out, dt](Buffers& b, const ExecSpace& space) {
        const Program::Buffer& src = b[static_cast<size_t>(t)];
        b[static_cast<size_t>(out)] = visit_dtype(dt, [&](auto v) {
          using T = decltype(v);
          return Program::Buffer(run_relayout<T>(space, mesh, plan, src.view<T>()));
        });
      },
      0, Program::Category::collective);
  return out;
}

int Lowering::gather_dims(int t, const std::set<std::string>& dims) {
  auto to = axes(t);
  for (int i = 0; i < layout(t).shape().rank(); ++i)
    if (dims.count(layout(t).shape()[i].name))
      to[static_cast<size_t>(i)] = -1;
  return relayout(t, to);
}

void Lowering::require_whole(int t, const std::string& dim) {
  const TensorLayout& l = layout(t);
  int i = l.shape().index_of(dim);
  if (i >= 0 && l.mesh_axis(i) >= 0 && shape_[l.mesh_axis(i)].size > 1)
    fail("mtk::lower",
         cat(label(), " needs dimension '", dim, "' whole, but tensor ", describe(t),
             " splits it over mesh dimension '", shape_[l.mesh_axis(i)].name, "' of size ",
             shape_[l.mesh_axis(i)].size, "; change the layout rule for '", dim, "'"));
}

void Lowering::add_placeholder(int t) {
  p_->placeholders_.push_back(t);
}

void Lowering::add_variable(int t, const std::string& name, const Program::Buffer& storage,
                            DType stored) {
  p_->variables_[t] = storage;
  p_->adopt_variable_storage(storage);
  p_->variable_tensor_[name] = t;
  p_->variable_order_.push_back(name);
  const bool own_type = stored == dtype(t);
  if (own_type)
    p_->persistent_.push_back(t);
  else {  // bfloat16 storage: t's slot is the float32 copy read from it (memory_model.hpp)
    stored_.emplace_back(stored, local(t).num_elements());
    widened_variables_.insert(t);
  }
  const SlotSize bytes{stored, local(t).num_elements()};
  p_->counters_.variable_bytes =
      checked_add(p_->counters_.variable_bytes, bytes.bytes(), "mtk::lower",
                  [&] { return cat("the bytes of the variables (at '", name, "')"); });
}

void Lowering::add_assignment(const std::string& what, int value, int variable, Program::StepFn fn,
                              bool replaces) {
  keep_to_end_.push_back(value);
  note_assignment(variable, value, replaces);
  p_->assigns_.push_back({*op().def,
                          what,
                          Program::Category::other,
                          false,
                          {value},
                          {variable},
                          std::move(fn),
                          {},
                          {},
                          {},
                          {},
                          {},
                          {}});
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
