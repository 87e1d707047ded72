#pragma once
// A lowered program: the SPMD work of one rank (local kernels plus MPI collectives), its variable
// storage, and exact counters of what one run costs. Built by lower() (mtk/lower/lowering.hpp).

#include <mtk/base/buffer_pool.hpp>
#include <mtk/base/exec_space.hpp>
#include <mtk/base/program_options.hpp>
#include <mtk/graph/graph.hpp>
#include <mtk/kernels/bf16_copies.hpp>
#include <mtk/parallel/layout.hpp>
#include <mtk/parallel/mesh.hpp>
#include <mtk/runtime/counters.hpp>
#include <mtk/runtime/host_tensor.hpp>

#include <Kokkos_Core.hpp>

#include <any>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace mtk {

class ReductionsInFlight;
class HalosInFlight;

class Program {
 public:
  /// The device storage of one tensor slice: its element type and a flat View of that type.
  class Buffer {
   public:
    Buffer() = default;
    template <class T>
    Buffer(Kokkos::View<T*> v) : dtype_(dtype_of<T>::value), storage_(std::move(v)) {}
    DType dtype() const { return dtype_; }
    bool empty() const { return !storage_.has_value(); }
    /// The storage as a View of T, which must be the element type; an empty View when the
    /// buffer is empty.
    template <class T>
    Kokkos::View<T*> view() const {
      if (!storage_.has_value())
        return {};
      if (dtype_of<T>::value != dtype_)
        fail_dtype(dtype_of<T>::value);
      return std::any_cast<const Kokkos::View<T*>&>(storage_);
    }
    /// Address of the first element (nullptr when empty).
    const void* data() const {
      return visit_storage_dtype(dtype_,
                                 [&](auto t) -> const void* { return view<decltype(t)>().data(); });
    }

   private:
    [[noreturn]] void fail_dtype(DType asked) const;
    DType dtype_ = DType::float32;
    std::any storage_;  // Kokkos::View<T*> with T the element type of dtype_
  };
  using Buffers = std::vector<Buffer>;
  /// Runs one step's kernels and collectives in the program's execution space.
  using StepFn = std::function<void(Buffers&, const ExecSpace& space)>;
  /// A unit of work: runs kernels/collectives on the buffers.
  enum class Category { compute, collective, other };
  struct Step {
    StepKind kind;
    std::string what;  ///< "einsum 'logits'", "allreduce over batch", ...
    Category category = Category::compute;
    /// The step runs a collective inside its kernel (a split softmax's allreduce, ...).
    bool communicates = false;
    std::vector<int> reads;
    std::vector<int> writes;
    StepFn run;
    /// For the in-place allreduce of a pending sum (reads = writes = {tensor}): the mesh axes it
    /// sums over. The overlap pass moves such steps (mtk/lower/overlap.hpp).
    std::vector<int> sum_axes;
    /// Buffers its kernels allocate after its outputs and free within the step (element type,
    /// elements), for the memory prediction (mtk/lower/memory_model.hpp).
    std::vector<std::pair<DType, std::int64_t>> scratch;
    /// Tensors it reads as operands of a bf16 contraction (mtk/lower/bf16_reuse.hpp).
    std::vector<int> bf16_reads;
    /// Outputs whose kept bf16 copy its kernel can write as it produces them
    /// (Program::bf16_copies_for), saving the first reader's conversion.
    std::vector<int> bf16_writes;
    /// (output, input) pairs whose output its kernels may write into the input's buffer (an
    /// elementwise update that reads each value before it writes it): declared by the lowering.
    std::vector<std::pair<int, int>> may_overwrite;
    /// The pairs of may_overwrite it does overwrite: run() hands the output the input's buffer
    /// (mtk/lower/in_place_updates.hpp).
    std::vector<std::pair<int, int>> in_place;
    /// The gemm calls its kernels make and the collectives it runs, (group, payload bytes), as
    /// counted into Counters: they travel with the step through the passes that copy and move
    /// steps, for Counters::halo_exchanges.
    std::vector<GemmCalls> gemms = {};
    std::vector<std::pair<Counters::CommGroup, std::int64_t>> comm = {};
    /// Of bf16_reads, the tensors whose values enter the step only through their bf16 rounding
    /// (an operand with no dim summed before the rounding): bf16 values in their place give the
    /// same result (mtk/lower/bf16_activations.hpp).
    std::vector<int> bf16_exact_reads = {};
    /// Of bf16_writes, the outputs whose kernel can write the copy alone, into the output's own
    /// buffer, instead of its float32 values (Program::bf16_bits_only).
    std::vector<int> bf16_bits_only = {};
  };

  /// Runs one step of the program. `feeds` maps placeholder tensors to their global values
  /// (every rank passes the same values and keeps its own slice) or, with `local_feeds`, to this
  /// rank's slice; a local feed may also be whole along some split dims (e.g. a rank's batch rows
  /// with every position of a split `length`), which are then sliced here. Returns the global
  /// value of each fetched tensor on every rank.
  std::vector<HostTensor> run(const std::map<int, HostTensor>& feeds,
                              const std::vector<Tensor>& fetches = {},
                              const std::map<int, HostTensor>& local_feeds = {});

  /// When on, run() times every step (fencing the device) and adds the seconds to
  /// time_split(): "compute" (kernels), "collectives" (allreduce, relayouts), "other" (feeds,
  /// fetches, assignments).
  void set_profiling(bool on) { profiling_ = on; }
  const std::map<std::string, double>& time_split() const { return time_split_; }
  /// Seconds per step kind ("einsum", "softmax", "allreduce", ...) while profiling. Overlapped
  /// reductions (program.overlap_collectives) show as "allreduce_start", "allreduce_progress" (the
  /// MPI_Test calls between steps) and "allreduce_wait" (the exposed part); all three are also in
  /// time_split()'s "collectives", the waits alone in its "collective waits".
  const std::map<std::string, double>& time_by_kind() const { return time_by_kind_; }
  void reset_time_split() {
    time_split_.clear();
    time_by_kind_.clear();
  }

  /// Buffer reuse (on by default, off with program.buffer_reuse: false): run() draws its
  /// temporaries from a pool that keeps the previous run's buffers, so a step allocates nothing
  /// after the first (mtk/base/buffer_pool.hpp). The pool holds at most one run's buffers; turning
  /// reuse off frees them.
  void set_buffer_reuse(bool on);
  bool buffer_reuse() const { return reuse_buffers_; }
  /// Planned sharing in the pool (on by default, off with program.buffer_plan: false): the next run
  /// is recorded and later runs share buffers whose lifetimes do not overlap (buffer_pool.hpp).
  /// counters() predict the pool program.buffer_plan asked for when the program was lowered.
  void set_buffer_plan(bool on) { pool_->set_planning(on); }
  const BufferPool& buffer_pool() const { return *pool_; }

  const Mesh& mesh() const { return mesh_; }
  /// The execution space instance the steps run in.
  const ExecSpace& exec_space() const { return space_; }
  /// Counters count every reduced tensor as one allreduce call, whether or not it shares a
  /// bucket at run time (overlapped_reductions()).
  const Counters& counters() const { return counters_; }
  /// How many non-blocking allreduce calls (buckets of pending sums) one run makes; 0 with
  /// program.overlap_collectives: false.
  std::int64_t overlapped_reductions() const;
  /// How many split halo exchanges run with other steps between their start and their finish
  /// (program.overlap_halo, mtk/lower/overlap.hpp); 0 when off.
  int overlapped_halos() const { return overlapped_halos_; }
  /// Readable summary of the lowered program for this rank: layouts, FLOPs per op kind, bytes per
  /// collective kind, peak memory.
  std::string explain() const;
  /// The layout of a tensor of the graph.
  const TensorLayout& layout(const Tensor& t) const;
  /// Steps that run a forward step again for recomputation (TransformerConfig::recompute).
  std::int64_t recomputed_steps() const { return recomputed_steps_; }
  /// For a bf16 contraction step reading tensors a and b: where to find and keep their bf16
  /// copies (program.bf16_copies, mtk/lower/bf16_reuse.hpp); copies == nullptr when off.
  kernels::Bf16Reuse bf16_reuse(int a, int b) const;
  /// For a step producing tensor t (Step::bf16_writes): where to leave t's bf16 copy when the
  /// plan keeps one (it then calls keep() with t's address), else null.
  kernels::Bf16Copies* bf16_copies_for(int t) const;
  /// For a step producing tensor t with a kept copy: whether it writes only the copy, into t's
  /// own buffer (every reader of t reads it only through its bf16 rounding,
  /// mtk/lower/bf16_reuse.hpp, and this run does not fetch t): t's float32 values are then gone
  /// (Bf16Copies::values_gone).
  bool bf16_bits_only(int t) const;
  /// How many tensors the plan holds as their bf16 copy alone (bf16_bits_only, before fetches).
  int bf16_bits_only_tensors() const;
  /// The most bf16 copies of one weight a run makes: 1 when each is held from its forward reader
  /// through the backward, 2 or more when it is made again after a gap (Lowering::plan_buffers,
  /// under program.bf16_activations: auto where that lowers the peak), 0 when none is kept.
  int bf16_weight_conversions() const {
    return bf16_kept_tensors_ ? bf16_variable_conversions_ : 0;
  }
  /// The bf16 copies kept now and their high-water mark (tests, benchmarks).
  const kernels::Bf16Copies& bf16_copies() const { return *bf16_copies_; }
  /// Tensors whose bf16 copy is kept between contractions.
  int bf16_kept_tensors() const { return bf16_kept_tensors_; }
  /// Activations kept as bf16 across a distance (program.bf16_activations,
  /// mtk/lower/bf16_activations.hpp), by tensor id (graph tensors and the lowering's temporaries).
  const std::vector<int>& bf16_stored_activations() const { return bf16_stored_; }
  /// Variables whose update step writes into their storage (program.in_place_updates,
  /// mtk/lower/in_place_updates.hpp); a run that fetches one keeps its old value instead.
  int in_place_updates() const { return static_cast<int>(in_place_aliases_.size()); }
  /// Elementwise steps that write their output over an input that dies there
  /// (mtk/lower/in_place_activations.hpp); a run that fetches a name of that input does not.
  int in_place_activations() const;
  /// Number of completed runs; random ops (dropout) mix it into their seeds.
  std::int64_t step() const { return step_; }
  void set_step(std::int64_t s) { step_ = s; }

  /// Names of the variables, in creation order.
  std::vector<std::string> variable_names() const;
  const TensorLayout& variable_layout(const std::string& name) const;
  /// This rank's slice of a variable (the live storage: writes change the variable); empty for a
  /// variable stored in another type (variable_storage_dtype, variable_slice_float32).
  Kokkos::View<float*> variable_slice(const std::string& name) const;
  /// Sets the slice from float32 values; a bfloat16 variable keeps them rounded to nearest even.
  void set_variable_slice(const std::string& name, const Kokkos::View<float*>& slice);
  /// How a variable is stored: float32, int32, or bfloat16 (VariableAttrs::storage).
  DType variable_storage_dtype(const std::string& name) const;
  /// This rank's slice of a float32 variable as float32 values: the live storage, or for a
  /// bfloat16 variable a widened copy (exact).
  Kokkos::View<float*> variable_slice_float32(const std::string& name) const;
  /// The whole variable, gathered on every rank (collective); bfloat16 storage widened.
  HostTensor variable_value(const std::string& name);

 private:
  friend class Lowering;
  Program(const Mesh& mesh, const ProgramOptions& options);  // buffer_reuse, buffer_plan
  HostTensor gather_global(int tensor, const Buffer& b);
  void feed_placeholders(Buffers& buffers, const std::map<int, HostTensor>& feeds,
                         const std::map<int, HostTensor>& local_feeds) const;
  // Variables updated in place whose old value `fetches` asks for (under any name), and inputs of
  // in-place elementwise steps whose group holds a fetched tensor: this run writes them to new
  // buffers instead.
  std::set<int> fetched_variables(const std::vector<Tensor>& fetches) const;
  // Drops the bf16 copies of these tensors' storage (mtk/lower/bf16_reuse.hpp).
  void forget_bf16_copies(const std::vector<int>& tensors, const Buffers& buffers);
  void forget_dead_bf16_copies(const Step& step, const std::vector<int>& dead,
                               const Buffers& buffers);
  // Lets the pool reuse a variable's storage once an assignment has replaced it.
  void adopt_variable_storage(const Buffer& b);
  Buffer slice_of_host(int tensor, const HostTensor& global) const;
  Buffer slice_of_local(int tensor, const HostTensor& local) const;

  Mesh mesh_;
  ExecSpace space_;
  Graph* graph_ = nullptr;
  std::deque<TensorLayout> layouts_;       // by tensor id, then temporaries (stable references)
  std::vector<std::vector<int>> pending_;  // by tensor id: mesh axes of a pending sum at the end
  std::vector<Step> steps_;
  // Per step: the buffers whose value dies after it (mtk/lower/recompute.hpp, buffer_deaths).
  std::vector<std::vector<int>> deaths_;
  std::int64_t recomputed_steps_ = 0;
  int overlapped_halos_ = 0;
  std::vector<Step> assigns_;                    // run after every other step
  std::shared_ptr<ReductionsInFlight> overlap_;  // state of the overlapped reductions, or null
  std::shared_ptr<HalosInFlight> halos_;         // split halo exchanges' registry, or null
  // bf16 operand copies (mtk/lower/bf16_reuse.hpp): by tensor, kept; by step, dropped after it.
  std::vector<bool> bf16_keep_;
  std::vector<std::vector<int>> bf16_drop_after_;
  std::vector<bool> bf16_bits_only_;   // by tensor (Bf16ReusePlan::bits_only)
  int bf16_variable_conversions_ = 0;  // Bf16ReusePlan::variable_conversions
  std::set<int> fetching_;             // the tensors the run in progress fetches
  int bf16_kept_tensors_ = 0;
  std::vector<int> bf16_stored_;
  std::unique_ptr<kernels::Bf16Copies> bf16_copies_ = std::make_unique<kernels::Bf16Copies>();
  std::map<std::string, int> variable_tensor_;  // name -> tensor id
  std::vector<std::string> variable_order_;
  std::map<int, Buffer> variables_;  // tensor id -> storage
  std::vector<int> placeholders_;
  std::vector<int> persistent_;  // tensor ids whose buffers alias variable storage
  // Variables updated in place (mtk/lower/in_place_updates.hpp) -> tensors that may hold them.
  std::map<int, std::vector<int>> in_place_aliases_;
  // By tensor: its group of tensors that may share a buffer through in-place elementwise steps
  // (mtk/lower/in_place_activations.hpp); empty when none runs in place.
  std::vector<int> in_place_group_;
  Counters counters_;
  std::int64_t step_ = 0;
  bool profiling_ = false;
  bool reuse_buffers_ = true;
  std::unique_ptr<BufferPool> pool_ = std::make_unique<BufferPool>();
  bool dry_ = false;  // built by analyze(): counters only
  std::map<std::string, double> time_split_;
  std::map<std::string, double> time_by_kind_;
};

}  // namespace mtk
