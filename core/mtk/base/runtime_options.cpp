// The table of run-time options and their reading (runtime_options.hpp). Adding an option: a row
// here, a member and accessor in the header, a line in from_environment(); docs/runtime-options.md
// is generated from the table (`mtk-layout runtime-options`, ctest runtime_options_docs).
#include <mtk/base/error.hpp>
#include <mtk/base/runtime_options.hpp>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <sstream>

namespace mtk {

const std::vector<RuntimeOptionSpec>& runtime_option_specs() {
  using T = RuntimeOptionType;
  static const std::vector<RuntimeOptionSpec> specs = {
      {"MTK_EINSUM_IN_PLACE", T::flag, "1", "0|1",
       "host BLAS and GPU BLAS (cuBLAS, rocBLAS) contractions read and write operands in place "
       "through leading "
       "dimensions; 0: transposed copies (the path every backend has)"},
      {"MTK_BF16_GEMM", T::choice, "auto", "auto|onednn|emulate|gpu_blas|cublas",
       "how bfloat16 contractions run: auto picks the GPU BLAS's bf16 matmul on a GPU (cuBLAS, "
       "rocBLAS; cublas is gpu_blas's earlier name), oneDNN "
       "where this CPU has a native bf16 matmul, else emulate (bf16-rounded operands through the "
       "fp32 gemm)"},
      {"MTK_FP32_GEMM", T::choice, "auto", "auto|onednn|blas",
       "how float32 contractions run on the host: auto takes oneDNN's f32 matmul for the products "
       "it has brgemm (AVX-512) kernels for, else the host BLAS; onednn: oneDNN wherever it can; "
       "blas: the host BLAS (OpenBLAS) only"},
      {"MTK_COLLECTIVE_WAIT", T::choice, "auto", "auto|spin|yield",
       "how a rank waits in a blocking collective: spin (MPI's busy poll), yield (test and yield "
       "the core), auto (yield where a node runs more ranks than it has cores)"},
      {"MTK_PROFILE_STEPS", T::flag, "0", "0|1",
       "a profiled Program (set_profiling) also times every step by its full label"},
      {"MTK_MEMORY_REPORT", T::flag, "0", "0|1",
       "the memory prediction (analyze(), lower()) prints the buffers alive at the most live "
       "moment, by the step that wrote them, and the planned pool's objects (stderr)"},
      {"MTK_CKPT_TIMING", T::flag, "0", "0|1",
       "rank 0 prints the time of each phase of every checkpoint save and restore, and the "
       "MPI-IO a save used as HDF5 reports it (`mpiio=collective(hdf5:...)`) (stderr)"},
      {"MTK_CKPT_MPIIO", T::choice, "auto", "auto|collective|independent",
       "checkpoint write mode: auto is independent MPI-IO when every rank shares one node, "
       "collective across nodes (always collective with Fletcher32)"},
      {"MTK_CKPT_MPIIO_HINTS", T::text, "", "key=value[,key=value...]",
       "MPI-IO hints for checkpoint writes (e.g. romio_cb_write=enable,cb_nodes=8), after the "
       "one-node defaults romio_cb_write=disable,romio_ds_write=disable"},
  };
  return specs;
}

const std::vector<MovedRuntimeOption>& moved_runtime_options() {
  static const std::vector<MovedRuntimeOption> moved = {
      {"MTK_OVERLAP_COLLECTIVES", "program.overlap_collectives"},
      {"MTK_OVERLAP_ALLGATHER", "program.overlap_allgather"},
      {"MTK_ALLREDUCE_BUCKET_MIB", "program.allreduce_bucket_mib"},
      {"MTK_BF16_COPIES", "program.bf16_copies"},
      {"MTK_BF16_ACTIVATIONS", "program.bf16_activations"},
      {"MTK_IN_PLACE_UPDATES", "program.in_place_updates"},
      {"MTK_OVERLAP_HALO", "program.overlap_halo"},
      {"MTK_NODE_ALLREDUCE", "program.node_allreduce"},
      {"MTK_BUFFER_PLAN", "program.buffer_plan"},
      {"MTK_BUFFER_REUSE", "program.buffer_reuse"},
      {"MTK_CKPT_FLETCHER32", "checkpoint.fletcher32"},
  };
  return moved;
}

namespace {

const char* const kWhere = "mtk::runtime_options";

// The config value of a moved variable's value: flags become true/false, the bf16 activations'
// 1/0 always/never; anything else is given as it was.
std::string key_value(const MovedRuntimeOption& m, const std::string& v) {
  if (std::string(m.variable) == "MTK_ALLREDUCE_BUCKET_MIB")
    return v;
  if (std::string(m.variable) == "MTK_BF16_ACTIVATIONS")
    return v == "1" ? "always" : v == "0" ? "never" : v;
  return v == "1" ? "true" : v == "0" ? "false" : v;
}

// A variable that became a config key is refused, not ignored: the run would differ silently.
std::string moved_variables_set() {
  std::string bad;
  for (const auto& m : moved_runtime_options()) {
    const char* v = std::getenv(m.variable);
    if (v != nullptr && *v != '\0')
      bad += cat(bad.empty() ? "" : "; ", m.variable, " moved to ", m.key,
                 " in the run config (docs/configuration.md): unset ", m.variable,
                 " and set the key instead, e.g. --set ", m.key, "=", key_value(m, v));
  }
  return bad;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, sep))
    parts.push_back(part);
  return parts;
}

// "key=value,key=value": the pairs, skipping empty items; false when an item is malformed.
bool parse_hints(const std::string& text, std::vector<std::pair<std::string, std::string>>& out) {
  out.clear();
  for (const auto& kv : split(text, ',')) {
    if (kv.empty())
      continue;
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      return false;
    out.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return true;
}

// Empty when `value` is allowed for `spec`, else why not, naming the variable and what it takes.
std::string check(const RuntimeOptionSpec& spec, const std::string& value) {
  std::string allowed;
  bool ok = false;
  if (spec.type == RuntimeOptionType::text) {
    std::vector<std::pair<std::string, std::string>> hints;
    ok = parse_hints(value, hints);
    allowed = spec.allowed;
  } else {
    for (const auto& word : split(spec.allowed, '|')) {
      ok = ok || word == value;
      allowed += (allowed.empty() ? "" : ", ") + word;
    }
  }
  if (ok)
    return "";
  return cat(spec.name, " is '", value, "'; allowed: ", allowed, " (", spec.doc, ")");
}

size_t index_of(const std::string& name) {
  const auto& specs = runtime_option_specs();
  for (size_t i = 0; i < specs.size(); ++i)
    if (name == specs[i].name)
      return i;
  return specs.size();
}

// The snapshot in force, and every snapshot ever installed (kept for the life of the process, so
// that references handed out stay valid across reloads; never destroyed, so usable at exit).
std::atomic<const RuntimeOptions*> g_current{nullptr};

std::mutex& g_mutex() {
  static std::mutex m;
  return m;
}

const RuntimeOptions* install(RuntimeOptions options) {
  static auto* kept = new std::vector<std::unique_ptr<const RuntimeOptions>>();
  kept->push_back(std::make_unique<const RuntimeOptions>(std::move(options)));
  g_current.store(kept->back().get(), std::memory_order_release);
  return kept->back().get();
}

}  // namespace

RuntimeOptions RuntimeOptions::from_environment() {
  const auto& specs = runtime_option_specs();
  RuntimeOptions o;
  o.raw_.resize(specs.size());
  std::string bad = moved_variables_set();
  for (size_t i = 0; i < specs.size(); ++i) {
    Raw& r = o.raw_[i];
    const char* v = std::getenv(specs[i].name);
    r.set = v != nullptr && *v != '\0';
    r.value = r.set ? v : specs[i].default_value;
    const std::string why = check(specs[i], r.value);
    if (!why.empty())
      bad += (bad.empty() ? "" : "; ") + why;
  }
  if (!bad.empty())
    fail(kWhere, bad);
  o.einsum_in_place_ = o.text("MTK_EINSUM_IN_PLACE") == "1";
  o.bf16_gemm_ = o.text("MTK_BF16_GEMM");
  o.fp32_gemm_ = o.text("MTK_FP32_GEMM");
  o.collective_wait_ = o.text("MTK_COLLECTIVE_WAIT");
  o.profile_steps_ = o.text("MTK_PROFILE_STEPS") == "1";
  o.ckpt_timing_ = o.text("MTK_CKPT_TIMING") == "1";
  o.ckpt_mpiio_ = o.text("MTK_CKPT_MPIIO");
  parse_hints(o.text("MTK_CKPT_MPIIO_HINTS"), o.ckpt_mpiio_hints_);
  return o;
}

bool RuntimeOptions::is_set(const std::string& name) const {
  const size_t i = index_of(name);
  return i < raw_.size() && raw_[i].set;
}

std::string RuntimeOptions::text(const std::string& name) const {
  const size_t i = index_of(name);
  if (i >= raw_.size())
    fail("mtk::RuntimeOptions::text", cat("'", name, "' is not a run-time option"));
  return raw_[i].value;
}

const RuntimeOptions& runtime_options() {
  if (const RuntimeOptions* p = g_current.load(std::memory_order_acquire))
    return *p;
  std::lock_guard<std::mutex> lock(g_mutex());
  if (const RuntimeOptions* p = g_current.load(std::memory_order_acquire))
    return *p;
  return *install(RuntimeOptions::from_environment());
}

void reload_runtime_options() {
  std::lock_guard<std::mutex> lock(g_mutex());
  install(RuntimeOptions::from_environment());
}

std::string describe_runtime_options() {
  const RuntimeOptions& o = runtime_options();
  std::string text = "Run-time options (environment; docs/runtime-options.md):";
  for (const auto& spec : runtime_option_specs())
    text += cat("\n  ", spec.name, "=", o.text(spec.name),
                o.is_set(spec.name) ? " (set)" : " (default)");
  return text;
}

}  // namespace mtk

namespace mtk {

std::string runtime_options_markdown() {
  auto block = [](const char* id, const std::string& table) {
    return cat("<!-- BEGIN GENERATED: ", id, " -->\n", table, "<!-- END GENERATED: ", id, " -->\n");
  };
  auto words = [](const RuntimeOptionSpec& spec) {
    if (spec.type == RuntimeOptionType::text)
      return cat("`", spec.allowed, "`");
    std::string out;
    for (const auto& w : split(spec.allowed, '|'))
      out += cat(out.empty() ? "" : ", ", "`", w, "`");
    return out;
  };
  const char* types[] = {"flag", "choice", "text"};
  std::string table =
      "| variable | type | default | allowed | what it does |\n| --- | --- | --- | --- | --- |\n";
  for (const auto& spec : runtime_option_specs())
    table += cat("| `", spec.name, "` | ", types[static_cast<int>(spec.type)], " | ",
                 *spec.default_value ? cat("`", spec.default_value, "`") : "(none)", " | ",
                 words(spec), " | ", spec.doc, " |\n");
  std::string moved = "| variable (refused) | run-config key |\n| --- | --- |\n";
  for (const auto& m : moved_runtime_options())
    moved += cat("| `", m.variable, "` | `", m.key, "` |\n");
  return block("runtime-options", table) + block("moved-runtime-options", moved);
}

}  // namespace mtk
