#pragma once
// The lowering machinery op families build on (internal): an OpDef's lower function gets the
// Lowering, reads the layouts of its tensors, settles pending partial sums, gathers dims it needs
// whole, and adds the steps (kernels and collectives) of its op. See mtk/lower/lowering.hpp for
// the rules.

#include <mtk/base/exec_space.hpp>
#include <mtk/graph/graph.hpp>
#include <mtk/lower/overlap.hpp>
#include <mtk/parallel/layout.hpp>
#include <mtk/parallel/mesh.hpp>
#include <mtk/runtime/program.hpp>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace mtk {

using Buffers = Program::Buffers;

/// Buffer t of a running step as a View of T (its element type).
template <class T>
Kokkos::View<T*> view_of(const Buffers& b, int t) {
  return b[static_cast<size_t>(t)].view<T>();
}

/// The buffer Program::run handed output y when its step writes it over one of `inputs`
/// (Program::Step::in_place), else an empty View: the kernel allocates y.
template <class T>
Kokkos::View<T*> in_place_output(const Buffers& b, int y, std::initializer_list<int> inputs) {
  const void* p = b[static_cast<size_t>(y)].data();
  for (int x : inputs)
    if (p && b[static_cast<size_t>(x)].data() == p)
      return view_of<T>(b, y);
  return {};
}

/// Inside a step that writes float32 output t and, in the same pass, its bf16 bit patterns
/// (Step::bf16_writes): bits() to write when the plan keeps t's copy (else an empty View, the
/// kernel writes none), keep() to hand the copy over once the output is written.
/// bits_only(): the kernel writes the bits alone, into the first half of the output's own
/// buffer (Program::bf16_bits_only); keep() then records that the float32 values are gone.
class ProducedBf16Copy {
 public:
  ProducedBf16Copy(const Program& p, int t, std::int64_t n, const char* label)
      : copies_(p.bf16_copies_for(t)), n_(n), bits_only_(p.bf16_bits_only(t)) {
    if (copies_ && !bits_only_)
      bits_ = uninitialized_view<std::uint16_t>(label, n);
  }
  const Kokkos::View<std::uint16_t*>& bits() const { return bits_; }
  bool bits_only() const { return bits_only_; }
  void keep(const Kokkos::View<float*>& out) const {
    if (!copies_)
      return;
    if (bits_only_)  // unmanaged: the output's buffer holds it
      copies_->keep(out.data(), n_,
                    Kokkos::View<std::uint16_t*>(reinterpret_cast<std::uint16_t*>(out.data()),
                                                 static_cast<size_t>(n_)),
                    true);
    else
      copies_->keep(out.data(), n_, bits_);
  }

 private:
  kernels::Bf16Copies* copies_;
  std::int64_t n_;
  bool bits_only_;
  Kokkos::View<std::uint16_t*> bits_;
};

/// Builds a Program op by op.
class Lowering {
 public:
  // `shape`/`coords`: the mesh and the processor to lower for. They equal `mesh`'s own unless
  // `dry` (analysis only: nothing is allocated and the program must not run).
  Lowering(Graph& g, const Mesh& mesh, const LayoutRules& rules, const MeshShape& shape,
           const std::vector<int>& coords, bool dry, const ProgramOptions& options);
  /// Lowers every op (through its OpDef::lower) and returns the program.
  std::unique_ptr<Program> run();

  // ------------------------------------------------------------------ the op being lowered
  const Operation& op() const { return g_.op(op_index_); }
  /// The graph being lowered.
  const Graph& graph() const { return g_; }
  /// "<kind> '<op name>'": the label of the op's steps.
  std::string label() const;

  // ----------------------------------------------------------------- tensors and temporaries
  const TensorLayout& layout(int t) const { return p_->layouts_[static_cast<size_t>(t)]; }
  /// This rank's slice shape of tensor (or temporary) t.
  Shape local(int t) const { return layout(t).slice_shape(); }
  /// Per tensor dim: the mesh axis splitting it, or -1.
  std::vector<int> axes(int t) const { return layout(t).mesh_axes(); }
  DType dtype(int t) const;
  bool is_float(int t) const { return dtype(t) == DType::float32; }
  /// Bytes of this rank's slice of t.
  std::int64_t local_bytes(int t) const;
  /// "'name' [layout]" for step labels and errors.
  std::string describe(int t) const;
  /// A temporary buffer (not a graph tensor) with its own layout.
  int new_temp(Shape shape, const std::vector<int>& axes, DType dtype);
  /// The mesh axes whose partial sums t still carries (empty: t is complete).
  std::vector<int>& pending(int t) { return pending_[static_cast<size_t>(t)]; }
  /// The mesh axes splitting some dim of t.
  std::set<int> split_axes_of(int t) const;
  static bool intersects(const std::vector<int>& a, const std::set<int>& b);

  // ------------------------------------------------------------------------------ the mesh
  const Mesh& mesh() const { return mesh_; }
  /// The mesh lowered for (differs from mesh().shape() in analyze()).
  const MeshShape& mesh_shape() const { return shape_; }
  /// This processor's coordinates on mesh_shape().
  const std::vector<int>& coords() const { return coords_; }
  /// Lowering for analysis only: allocate nothing.
  bool dry() const { return dry_; }
  /// The program options lowered with (program.*).
  const ProgramOptions& options() const { return options_; }
  /// The execution space instance the program runs on (variables are initialised on it).
  const ExecSpace& space() const { return p_->exec_space(); }

  // ------------------------------------------------------------------------ emitting steps
  /// Appends a step of the op being lowered; `flops` are added to counters().flops under the
  /// op kind's FLOP class (OpTraits::flops).
  void add_step(const std::string& what, std::vector<int> reads, std::vector<int> writes,
                Program::StepFn fn, double flops = 0,
                Program::Category category = Program::Category::compute);
  /// Appends a step of another kind (the lowering's own: alias, allreduce, relayout).
  void add_step_of(StepKind kind, const std::string& what, std::vector<int> reads,
                   std::vector<int> writes, Program::StepFn fn, double flops,
                   Program::Category category);
  /// Appends a collective step updating y in place (costed by count_comm, not as a kernel).
  void add_allreduce_step(const std::string& what, int y, Program::StepFn fn);
  /// Appends a step making y another name for buffer `from` (no copy, no cost).
  void add_alias(int from, int y);
  /// The program's registry of split halo exchanges in flight (progressed between steps).
  std::shared_ptr<HalosInFlight> halos_in_flight();
  /// Marks the last step as one that can write its outputs `tensors`' kept bf16 copies.
  void mark_bf16_writes(std::vector<int> tensors, bool bits_only = false) {
    if (bits_only)
      p_->steps_.back().bf16_bits_only = tensors;
    p_->steps_.back().bf16_writes = std::move(tensors);
  }
  /// Marks the last step as a bf16 contraction reading `tensors` (mtk/lower/bf16_reuse.hpp).
  void mark_bf16_reads(std::vector<int> tensors) {
    p_->steps_.back().bf16_reads = std::move(tensors);
  }
  /// Of those, the tensors the step reads only through their bf16 rounding
  /// (Step::bf16_exact_reads).
  void mark_bf16_exact_reads(std::vector<int> tensors) {
    p_->steps_.back().bf16_exact_reads = std::move(tensors);
  }
  /// Declares that tensor t's buffer is a variable's own storage (written in place by its step):
  /// the memory prediction counts no bytes for it.
  void mark_in_variable_storage(int t) { in_variable_storage_.insert(t); }
  /// Declares that the last step is the blocking in-place allgather `g` writing t: the overlap
  /// pass may start it there and wait for it later (mtk/lower/overlap.hpp).
  void mark_overlappable_gather(int t, const GatherSpec& g) { gathers_[t] = g; }
  /// Appends the step y = sum + part (float32, y's layout), written over sum when sum dies there:
  /// how a product or scatter made apart is added into a running sum.
  void add_sum_step(int sum, int part, int y);
  /// Declares that the last step's kernels may write `output` into `input`'s buffer (each value
  /// read before it is written); the in-place pass decides (mtk/lower/in_place_updates.hpp).
  void allow_overwrite(int output, int input) {
    p_->steps_.back().may_overwrite.emplace_back(output, input);
  }
  /// Counts `gemms` gemm calls of [m, k] x [k, n] (counters().gemm_by_size).
  void count_gemms(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t gemms);
  /// The next step's bytes in counters().op_bytes instead of its buffers' (an einsum: those it
  /// copies besides its gemm's own reads and writes, kernels::einsum_moved_bytes).
  void count_moved_bytes(std::int64_t bytes);
  /// Adds to counters().flops[c] (for work outside steps: assignments).
  void count_flops(FlopClass c, double flops);
  /// Appends a step computing output y by a kernel instantiated for every element type:
  /// `kernel(T{}, buffers, space)` returns the Kokkos::View<T*> of y, T the element type `dtype`.
  template <class Kernel>
  void add_typed_step(const std::string& what, std::vector<int> reads, int y, DType dtype,
                      Kernel kernel, double flops = 0) {
    add_step(
        what, std::move(reads), {y},
        [=](Buffers& b, const ExecSpace& space) {
          b[static_cast<size_t>(y)] =
              visit_dtype(dtype, [&](auto e) { return Program::Buffer(kernel(e, b, space)); });
        },
        flops);
  }
  /// Declares a buffer of `elements` the next step's kernels allocate after its outputs and free
  /// before the step ends (Program::Step::scratch).
  void add_scratch(DType dtype, std::int64_t elements) { scratch_.emplace_back(dtype, elements); }
  /// Counts one collective call of `bytes` payload over the group of mesh axes `axes`.
  /// The next step added runs it (Program::Step::communicates).
  void count_comm(Collective kind, std::int64_t bytes, std::vector<int> axes);
  /// Emits the allreduce of t's pending partial sum, in place (nothing when none).
  void materialize(int t);
  /// A copy of tensor t laid out with per-dim axes `to` (t itself when nothing changes). A partial
  /// sum pending over a mesh axis that `to` newly splits a dim over is reduce-scattered there.
  int relayout(int t, const std::vector<int>& to);
  /// t with `dims` made whole.
  int gather_dims(int t, const std::set<std::string>& dims);
  /// Fails (naming op, tensor, dim, mesh dim) when t splits `dim`.
  void require_whole(int t, const std::string& dim);

  // -------------------------------------------------------------- program-level state
  void add_placeholder(int t);
  /// Registers variable tensor t (op name `name`) with its initial storage, of type `stored`
  /// (bfloat16: not t's buffer, read by a step of the variable op's lowering).
  void add_variable(int t, const std::string& name, const Program::Buffer& storage,
                    DType stored = DType::float32);
  /// The live storage of variable tensor t, for assignments run at the end of each run.
  Program::Buffer* variable_storage(int t) { return &p_->variables_[t]; }
  /// Appends an assignment (run after every other step); `value` stays alive until then.
  /// `replaces`: it sets the variable to `value` (not an accumulation), so the step computing
  /// `value` may write it into the storage (mtk/lower/in_place_updates.hpp).
  void add_assignment(const std::string& what, int value, int variable, Program::StepFn fn,
                      bool replaces = false);
  /// Records an assignment that runs as a step of its own (a bfloat16 variable's, rounded into
  /// the storage where the value is computed), for the in-place pass.
  void note_assignment(int variable, int value, bool replaces) {
    assigned_[variable].emplace_back(value, replaces);
  }
  /// The program being built (its step() is read by random ops at run time).
  const Program* program() const { return p_.get(); }

 private:
  int reduce_scatter_pending(int t, const std::vector<int>& to);
  void plan_bf16_copies();
  void plan_buffers();
  void store_bf16_activations();
  void plan_in_place_updates();
  void rewiden_bf16_variables();
  void finish();

  Graph& g_;
  Mesh mesh_;
  MeshShape shape_;
  std::vector<int> coords_;
  bool dry_ = false;
  ProgramOptions options_;
  ScatterSpecs scatters_;              // the reduce-scatter steps, by output (overlap_reductions)
  GatherSpecs gathers_;                // mark_overlappable_gather()
  std::set<int> in_variable_storage_;  // mark_in_variable_storage()
  LayoutRules rules_;
  std::unique_ptr<Program> p_;
  int op_index_ = 0;
  std::vector<std::vector<int>> pending_;
  std::map<int, DType> temp_dtype_;
  std::vector<int> keep_to_end_;
  std::map<int, std::vector<std::pair<int, bool>>> assigned_;  // variable -> (value, replaces)
  std::set<int> widened_variables_;            // bfloat16 variables: their tensor is a float32 copy
  std::int64_t bf16_variable_copy_bytes_ = 0;  // plan_bf16_copies()
  bool bf16_variable_windows_ = false;         // plan_bf16_copies(): plan_bf16_reuse's
  // store_bf16_activations(): each stored buffer's names and the step that makes its bits.
  std::vector<std::pair<std::vector<int>, int>> bf16_stored_;
  std::vector<std::pair<DType, std::int64_t>> stored_;   // bfloat16 variables' storage (elements)
  bool communicates_ = false;                            // count_comm since the last step
  std::vector<std::pair<DType, std::int64_t>> scratch_;  // add_scratch since the last step
  // What each step costs and which op it was lowered for, so a step run again (recomputation,
  // mtk/lower/recompute.hpp) is counted again.
  struct CommCount {
    Collective kind;
    std::int64_t bytes;
    std::vector<int> axes;
  };
  struct StepOrigin {
    RecomputeTag tag;
    double flops = 0;
    std::vector<CommCount> comm;
    std::vector<GemmCalls> gemms;  // count_gemms
    std::int64_t bytes = -1;       // count_moved_bytes; -1: the step's buffers
  };
  std::vector<StepOrigin> origins_;  // by step
  StepOrigin next_origin_;           // counted since the last step
  void add_comm_counters(const CommCount& c);
  void add_gemm_counters(const GemmCalls& g);
  void count_step(const Program::Step& step, double flops, std::int64_t moved_bytes);
  void recompute();
};

namespace op_kind_impl {
template <class A>
void lower(const OpDef& d, Lowering& l) {
  of<A>(d).lower(l, attrs<A>(d, l.op()));
}
}  // namespace op_kind_impl

}  // namespace mtk
