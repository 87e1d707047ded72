// The `program` section's field table (program_config.hpp).
#include <mtk/config/program_config.hpp>

namespace mtk::config {
namespace {

using P = ProgramOptions;

Schema<P> make_program_schema() {
  Schema<P> s;
  s.boolean("overlap_collectives", &P::overlap_collectives,
            "the allreduce of a pending sum (a weight gradient) starts as soon as its tensor is "
            "final and is waited for where it is first read; false: one blocking allreduce there")
      .boolean("overlap_allgather", &P::overlap_allgather,
               "with overlap_collectives, the sharded optimizer's allgather of a new variable "
               "starts after its update and is waited for before the variable is next touched; "
               "false: blocking")
      .integer("allreduce_bucket_mib", &P::allreduce_bucket_mib, 0, 1024,
               "overlapped allreduces of tensors under this many MiB share buckets of at most "
               "this size (one call each); larger ones go alone; 0: every tensor alone")
      .boolean("bf16_copies", &P::bf16_copies,
               "a tensor that several bf16 contractions read close together (a weight; an output "
               "gradient) is converted to bf16 once per run and the copy kept until its last "
               "reader; false: every contraction converts its operands")
      .choice("bf16_activations", &P::bf16_activations,
              {{"auto", Bf16Activations::automatic},
               {"always", Bf16Activations::on},
               {"never", Bf16Activations::off}},
              "an activation that only bf16 contractions read after a distance is kept as its "
              "bf16 values (half its bytes), the same results; auto: where that lowers the "
              "predicted peak; always: wherever one is; never: kept in float32")
      .boolean("in_place_updates", &P::in_place_updates,
               "an optimizer writes a float32 variable's and its slots' new values into their "
               "storage when nothing later in the run reads the old ones; false: new buffers, "
               "swapped in at the end of the run")
      .boolean("overlap_halo", &P::overlap_halo,
               "a split halo exchange is posted as soon as its input is final and waited for where "
               "its output is first read, convolutions computing their interior meanwhile (more, "
               "smaller steps: a gain only where ranks have cores of their own)")
      .boolean("node_allreduce", &P::node_allreduce,
               "a non-blocking float allreduce among ranks that share one node's memory runs "
               "through shared memory, and so do a halo exchange site's exchanges from its ninth "
               "on; false: through MPI (another summation order)")
      .boolean("buffer_plan", &P::buffer_plan,
               "the buffer pool records a program's first run and plans shared buffers holding "
               "about the most bytes alive at once; false: one pooled buffer per size and "
               "concurrent use")
      .boolean("buffer_reuse", &P::buffer_reuse,
               "a program's run draws its temporaries from its buffer pool; false: fresh "
               "allocations");
  return s;
}

// Why a key's change can change the results, "" when it changes only time and memory.
const char* numerics_effect(const std::string& key) {
  if (key == "node_allreduce" || key == "overlap_collectives" || key == "allreduce_bucket_mib")
    return "which allreduces go through shared memory: the order of their sums";
  if (key == "overlap_halo")
    return "convolutions computed in parts: their rounding";
  return "";
}

}  // namespace

const Schema<ProgramOptions>& program_schema() {
  static const Schema<ProgramOptions> schema = make_program_schema();
  return schema;
}

std::vector<SettingChange> program_changes(const Config& recorded, const ProgramOptions& current) {
  ProgramOptions was;  // the defaults where the record has no section
  if (recorded.has("program"))
    was = program_schema().read(recorded, "program");
  std::vector<SettingChange> out;
  for (const auto& f : program_schema().fields()) {
    const std::string a = value_text(f.get(was)), b = value_text(f.get(current));
    if (a != b)
      out.push_back({"program." + f.spec.key, a, b, numerics_effect(f.spec.key)});
  }
  return out;
}

}  // namespace mtk::config
