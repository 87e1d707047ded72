#pragma once
// MTK's run-time switches: environment variables read once per process, all listed in one table
// (runtime_options.cpp; docs/runtime-options.md, generated from it), with typed accessors. They
// choose backends and diagnostics only: what shapes a program or a checkpoint is in the run config
// (mtk::ProgramOptions, program.*; checkpoint.fletcher32), and a variable that moved there
// (moved_runtime_options()) is an error. Nothing in core/, io/ or apps/ reads an MTK_* variable
// any other way.
//
//   if (mtk::runtime_options().ckpt_timing()) ...
//
// They are read when mtk::Environment starts (before MPI and Kokkos), or on first use in a
// program without one (thread-safe). A value outside the allowed ones is an mtk::Error naming the
// variable, its value and the allowed values. Code-level setters (kernels::set_bf16_gemm,
// set_collective_wait, ...) still override what the environment asked.

#include <string>
#include <utility>
#include <vector>

namespace mtk {

/// How a variable's text is read.
enum class RuntimeOptionType {
  flag,    ///< 0 or 1
  choice,  ///< one word of a fixed list
  text,    ///< free text with a documented form
};

/// One row of the table: the variable, its type, its default, the values it takes and what it
/// does.
struct RuntimeOptionSpec {
  const char* name;           ///< "MTK_BF16_GEMM"
  RuntimeOptionType type;     ///< how the value is read
  const char* default_value;  ///< what holds when the variable is unset or empty
  const char* allowed;        ///< "auto|onednn|emulate" (choices), "0|1" (flags), a form (text)
  const char* doc;            ///< one line
};

/// Every run-time option MTK has, in the order docs/runtime-options.md lists them.
const std::vector<RuntimeOptionSpec>& runtime_option_specs();

/// A variable that became a run-config key.
struct MovedRuntimeOption {
  const char* variable;  ///< "MTK_OVERLAP_HALO"
  const char* key;       ///< "program.overlap_halo"
};
/// The variables that moved to the run config; setting one makes reading the options fail
/// ("MTK_OVERLAP_HALO moved to program.overlap_halo in the run config ...").
const std::vector<MovedRuntimeOption>& moved_runtime_options();

/// The values in force, each checked against the table when read.
class RuntimeOptions {
 public:
  /// Reads every variable of runtime_option_specs() from the environment; throws mtk::Error
  /// naming each bad variable, its value and the allowed values, and each moved variable that is
  /// set with the config key that replaced it.
  static RuntimeOptions from_environment();

  /// MTK_EINSUM_IN_PLACE: host BLAS contractions read operands in place (else transposed copies).
  bool einsum_in_place() const { return einsum_in_place_; }
  /// MTK_BF16_GEMM: "auto", "onednn", "emulate", "gpu_blas" or "cublas" (the same).
  const std::string& bf16_gemm() const { return bf16_gemm_; }
  /// MTK_FP32_GEMM: auto | onednn | blas.
  const std::string& fp32_gemm() const { return fp32_gemm_; }
  /// MTK_COLLECTIVE_WAIT: "auto", "spin" or "yield".
  const std::string& collective_wait() const { return collective_wait_; }
  /// MTK_PROFILE_STEPS: a profiled Program also times every step by its full label.
  bool profile_steps() const { return profile_steps_; }
  /// MTK_CKPT_TIMING: rank 0 prints the phases of each checkpoint save and restore.
  bool ckpt_timing() const { return ckpt_timing_; }
  /// MTK_CKPT_MPIIO: "auto", "collective" or "independent".
  const std::string& ckpt_mpiio() const { return ckpt_mpiio_; }
  /// MTK_CKPT_MPIIO_HINTS: MPI-IO hints as (key, value) pairs, in the variable's order.
  const std::vector<std::pair<std::string, std::string>>& ckpt_mpiio_hints() const {
    return ckpt_mpiio_hints_;
  }

  /// Whether the variable `name` was set (to a non-empty value); false for names not in the table.
  bool is_set(const std::string& name) const;
  /// The text in force for `name`: the variable's value, or the default when it is unset.
  std::string text(const std::string& name) const;

 private:
  struct Raw {
    std::string value;
    bool set = false;
  };
  std::vector<Raw> raw_;  // parallel to runtime_option_specs()
  bool einsum_in_place_ = true;
  std::string bf16_gemm_ = "auto";
  std::string fp32_gemm_ = "auto";
  std::string collective_wait_ = "auto";
  bool profile_steps_ = false;
  bool ckpt_timing_ = false;
  std::string ckpt_mpiio_ = "auto";
  std::vector<std::pair<std::string, std::string>> ckpt_mpiio_hints_;
};

/// The options in force for this process: read from the environment on the first call (or by
/// reload_runtime_options), then the same for the life of the process. Thread-safe.
const RuntimeOptions& runtime_options();

/// Reads the environment now, again: mtk::Environment calls it as it starts; a test that changes
/// a variable with setenv calls it afterwards. Throws mtk::Error on a bad value, leaving the
/// previous values in force. References from earlier runtime_options() calls stay valid.
void reload_runtime_options();

/// One line per option: "  NAME=value (set)" or "  NAME=value (default)", after a heading line
/// (what `--version` prints).
std::string describe_runtime_options();

/// docs/runtime-options.md's generated blocks: the table of runtime_option_specs() and the moved
/// variables with their keys, each between "<!-- BEGIN GENERATED: id -->" and its END line
/// (`mtk-layout runtime-options` prints them; ctest runtime_options_docs compares).
std::string runtime_options_markdown();

}  // namespace mtk
