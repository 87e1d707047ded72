#include <mtk/base/checked.hpp>
#include <mtk/base/error.hpp>
#include <mtk/kernels/elementwise.hpp>
#include <mtk/lower/impl/step_kinds.hpp>
#include <mtk/lower/lowering_context.hpp>
#include <mtk/lower/memory_model.hpp>
#include <mtk/parallel/halo.hpp>

#include <memory>

namespace mtk {

// The steps an op's lowering adds (Lowering's step interface, mtk/lower/lowering_context.hpp).

using namespace lowering_kinds;

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
  // An analysis (analyze()) never runs its steps: their kernels' closures, most of a lowered
  // step's memory, are dropped here instead of being carried through every pass.
  p_->steps_.push_back({kind,
                        what,
                        category,
                        communicates_,
                        std::move(reads),
                        std::move(writes),
                        dry_ ? Program::StepFn() : std::move(fn),
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

}  // namespace mtk
