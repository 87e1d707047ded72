// The run-time options (core/mtk/base/runtime_options.hpp): one table of backend choices and
// diagnostics, read once, checked, typed, reloadable for tests, described for --version; the
// variables that moved to the run config refused with their key.
#include <mtk/base/error.hpp>
#include <mtk/base/runtime_options.hpp>
#include <mtk/kernels/einsum.hpp>

#include <gtest/gtest.h>

#include "error_text.hpp"
#include <cstdlib>
#include <functional>
#include <map>
#include <set>
#include <string>

using namespace mtk;

namespace {

using mtk::test::error_of;

// Sets (or, with nullptr, unsets) environment variables for one test and restores them after,
// reloading the options both times.
class EnvScope {
 public:
  EnvScope() = default;
  ~EnvScope() {
    for (const auto& [name, old] : saved_) {
      if (old.first)
        setenv(name.c_str(), old.second.c_str(), 1);
      else
        unsetenv(name.c_str());
    }
    reload_runtime_options();
  }
  void set(const char* name, const char* value) {
    if (!saved_.count(name)) {
      const char* old = std::getenv(name);
      saved_[name] = {old != nullptr, old ? old : ""};
    }
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }

 private:
  std::map<std::string, std::pair<bool, std::string>> saved_;
};

}  // namespace

TEST(RuntimeOptions, OneTableWithDefaultsTheTableAllows) {
  EnvScope env;
  std::set<std::string> names;
  for (const auto& spec : runtime_option_specs()) {
    EXPECT_EQ(std::string(spec.name).rfind("MTK_", 0), 0u) << spec.name;
    EXPECT_TRUE(names.insert(spec.name).second) << spec.name << " twice";
    EXPECT_GT(std::string(spec.doc).size(), 20u) << spec.name;
    env.set(spec.name, nullptr);
  }
  // Eleven went to the run config (program.*, checkpoint.fletcher32).
  EXPECT_EQ(names.size(), 9u);
  for (const auto& moved : moved_runtime_options())
    EXPECT_EQ(names.count(moved.variable), 0u) << moved.variable;
  reload_runtime_options();  // every default is accepted
  const RuntimeOptions& o = runtime_options();
  for (const auto& spec : runtime_option_specs()) {
    EXPECT_FALSE(o.is_set(spec.name));
    EXPECT_EQ(o.text(spec.name), spec.default_value);
  }
  EXPECT_TRUE(o.einsum_in_place());
  EXPECT_EQ(o.bf16_gemm(), "auto");
  EXPECT_EQ(o.collective_wait(), "auto");
  EXPECT_FALSE(o.profile_steps());
  EXPECT_FALSE(o.ckpt_timing());
  EXPECT_EQ(o.ckpt_mpiio(), "auto");
  EXPECT_TRUE(o.ckpt_mpiio_hints().empty());
  EXPECT_FALSE(o.is_set("MTK_NO_SUCH_OPTION"));
  EXPECT_NE(error_of([&] { o.text("MTK_NO_SUCH_OPTION"); }).find("not a run-time option"),
            std::string::npos);
}

TEST(RuntimeOptions, TypedValuesFromTheEnvironment) {
  EnvScope env;
  env.set("MTK_EINSUM_IN_PLACE", "0");
  env.set("MTK_BF16_GEMM", "emulate");
  env.set("MTK_COLLECTIVE_WAIT", "yield");
  env.set("MTK_PROFILE_STEPS", "1");
  env.set("MTK_CKPT_TIMING", "1");
  env.set("MTK_CKPT_MPIIO", "independent");
  env.set("MTK_CKPT_MPIIO_HINTS", "romio_cb_write=enable,,cb_nodes=8");
  // Read once: nothing changes until a reload.
  const RuntimeOptions& before = runtime_options();
  EXPECT_FALSE(before.is_set("MTK_CKPT_TIMING"));
  reload_runtime_options();
  const RuntimeOptions& o = runtime_options();
  EXPECT_FALSE(o.einsum_in_place());
  EXPECT_EQ(o.bf16_gemm(), "emulate");
  EXPECT_EQ(o.collective_wait(), "yield");
  EXPECT_TRUE(o.profile_steps());
  EXPECT_TRUE(o.ckpt_timing());
  EXPECT_EQ(o.ckpt_mpiio(), "independent");
  const std::vector<std::pair<std::string, std::string>> hints = {{"romio_cb_write", "enable"},
                                                                  {"cb_nodes", "8"}};
  EXPECT_EQ(o.ckpt_mpiio_hints(), hints);
  EXPECT_TRUE(o.is_set("MTK_BF16_GEMM"));
  EXPECT_FALSE(before.is_set("MTK_CKPT_TIMING"));  // earlier references stay valid
  // A consumer: the bf16 path follows the option (nothing forced it in this process).
  EXPECT_EQ(kernels::bf16_gemm(), kernels::Bf16Gemm::emulate);
  // Empty means unset.
  env.set("MTK_BF16_GEMM", "");
  reload_runtime_options();
  EXPECT_EQ(runtime_options().bf16_gemm(), "auto");
  EXPECT_FALSE(runtime_options().is_set("MTK_BF16_GEMM"));
}

TEST(RuntimeOptions, BadValuesNameTheVariableAndTheAllowedValues) {
  EnvScope env;
  env.set("MTK_COLLECTIVE_WAIT", "spin");
  reload_runtime_options();
  struct Bad {
    const char *name, *value, *expect;
  };
  for (const Bad& b :
       {Bad{"MTK_COLLECTIVE_WAIT", "sometimes",
            "MTK_COLLECTIVE_WAIT is 'sometimes'; allowed: auto, spin, yield ("},
        Bad{"MTK_BF16_GEMM", "fast",
            "MTK_BF16_GEMM is 'fast'; allowed: auto, onednn, emulate, gpu_blas, cublas ("},
        Bad{"MTK_CKPT_TIMING", "yes", "MTK_CKPT_TIMING is 'yes'; allowed: 0, 1 ("},
        Bad{"MTK_EINSUM_IN_PLACE", "off", "MTK_EINSUM_IN_PLACE is 'off'; allowed: 0, 1 ("},
        Bad{"MTK_CKPT_MPIIO_HINTS", "romio_cb_write",
            "MTK_CKPT_MPIIO_HINTS is 'romio_cb_write'; allowed: "
            "key=value[,key=value...] ("}}) {
    EnvScope one;
    one.set(b.name, b.value);
    const std::string what = error_of([] { reload_runtime_options(); });
    EXPECT_EQ(what.rfind("mtk::runtime_options: ", 0), 0u) << what;
    EXPECT_NE(what.find(b.expect), std::string::npos) << what;
    // the rejected environment left the previous values in force
    EXPECT_EQ(runtime_options().collective_wait(), "spin");
  }
  // Several bad variables: all of them in one message.
  env.set("MTK_BF16_GEMM", "fast");
  env.set("MTK_CKPT_MPIIO", "sometimes");
  const std::string what = error_of([] { reload_runtime_options(); });
  EXPECT_NE(what.find("MTK_BF16_GEMM is 'fast'"), std::string::npos) << what;
  EXPECT_NE(what.find("MTK_CKPT_MPIIO is 'sometimes'"), std::string::npos) << what;
}

// A variable that now is a config key would be silently ignored: reading fails, naming the
// variable and the key that replaced it, for each one set (all in one message); the previous
// options stay in force. Empty means unset, as for the others.
TEST(RuntimeOptions, MovedVariablesAreRefusedNamingTheirConfigKey) {
  EnvScope env;
  for (const auto& moved : moved_runtime_options())
    env.set(moved.variable, nullptr);
  env.set("MTK_COLLECTIVE_WAIT", "spin");
  reload_runtime_options();
  EXPECT_EQ(moved_runtime_options().size(), 11u);
  for (const auto& moved : moved_runtime_options()) {
    EnvScope one;
    one.set(moved.variable, "1");
    const std::string what = error_of([] { reload_runtime_options(); });
    EXPECT_EQ(what.rfind("mtk::runtime_options: ", 0), 0u) << what;
    EXPECT_NE(
        what.find(std::string(moved.variable) + " moved to " + moved.key + " in the run config"),
        std::string::npos)
        << what;
    EXPECT_NE(what.find(std::string("--set ") + moved.key + "="), std::string::npos) << what;
    EXPECT_EQ(runtime_options().collective_wait(), "spin");
  }
  env.set("MTK_OVERLAP_HALO", "1");
  env.set("MTK_CKPT_FLETCHER32", "0");
  const std::string what = error_of([] { reload_runtime_options(); });
  EXPECT_NE(what.find("MTK_OVERLAP_HALO moved to program.overlap_halo"), std::string::npos) << what;
  EXPECT_NE(what.find("MTK_CKPT_FLETCHER32 moved to checkpoint.fletcher32"), std::string::npos)
      << what;
  env.set("MTK_OVERLAP_HALO", "");
  env.set("MTK_CKPT_FLETCHER32", "");
  reload_runtime_options();  // empty: unset
}

TEST(RuntimeOptions, DescribedOneLinePerOption) {
  EnvScope env;
  for (const auto& spec : runtime_option_specs())
    env.set(spec.name, nullptr);
  env.set("MTK_CKPT_MPIIO", "collective");
  reload_runtime_options();
  const std::string text = describe_runtime_options();
  EXPECT_NE(text.find("docs/runtime-options.md"), std::string::npos) << text;
  EXPECT_NE(text.find("\n  MTK_CKPT_MPIIO=collective (set)"), std::string::npos) << text;
  EXPECT_NE(text.find("\n  MTK_BF16_GEMM=auto (default)"), std::string::npos) << text;
  for (const auto& spec : runtime_option_specs())
    EXPECT_NE(text.find(std::string("\n  ") + spec.name + "="), std::string::npos) << spec.name;
}
