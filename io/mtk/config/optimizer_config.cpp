#include <mtk/config/optimizer_config.hpp>

#include <limits>

namespace mtk::config {
namespace {

using O = OptimizerSettings;

// The one list of optimizers: name, its maker, and (when it has hyperparameters) how its
// subsection train.<name>.* joins the schema.
struct OptimizerKind {
  const char* name;
  std::unique_ptr<optim::Optimizer> (*make)(const O&);
  void (*add_options)(Schema<O>&, const std::string& name);
};

const OptimizerKind kOptimizers[] = {
    {"adafactor",
     [](const O& s) -> std::unique_ptr<optim::Optimizer> {
       return std::make_unique<optim::Adafactor>(s.adafactor);
     },
     [](Schema<O>& s, const std::string& name) {
       s.nested(name, &O::adafactor, adafactor_schema());
     }},
    {"adam",
     [](const O& s) -> std::unique_ptr<optim::Optimizer> {
       return std::make_unique<optim::Adam>(s.adam);
     },
     [](Schema<O>& s, const std::string& name) { s.nested(name, &O::adam, adam_schema()); }},
    {"sgd",
     [](const O&) -> std::unique_ptr<optim::Optimizer> { return std::make_unique<optim::Sgd>(); },
     nullptr},
};

const OptimizerKind& optimizer_kind(const std::string& name) {
  for (const auto& k : kOptimizers)
    if (name == k.name)
      return k;
  fail("mtk::config::make_optimizer", cat("no optimizer '", name, "'"));
}

Schema<optim::AdafactorOptions> make_adafactor_schema() {
  using A = optim::AdafactorOptions;
  Schema<A> s;
  s.real("beta1", &A::beta1, 0.0, 0.999,
         "momentum of the clipped, scaled update; 0 keeps no first moment (no slot)")
      .real("decay_exponent", &A::decay_exponent, 0.0, 1.0,
            "second-moment decay rate 1 - (step + 1)^-decay_exponent")
      .real("clipping_threshold", &A::clipping_threshold, 0.0, 1e6,
            "update clipping: divide by max(1, RMS(update) / threshold); 0: no clipping")
      .real("epsilon1", &A::epsilon1, 0.0, 1.0, "added to the squared gradient")
      .real("epsilon2", &A::epsilon2, 0.0, 1.0,
            "lower bound of RMS(parameter) in the parameter-relative step size")
      .boolean("parameter_scaling", &A::parameter_scaling,
               "step size relative to RMS(parameter); false: the learning rate alone")
      .boolean("factored", &A::factored,
               "factored second moments (row and column) for tensors of rank >= 2")
      .integer("min_dim_size_to_factor", &A::min_dim_size_to_factor, 0,
               std::numeric_limits<std::int32_t>::max(),
               "factor only when the two largest dims are at least this size")
      .boolean("fused", &A::fused,
               "fused update kernels; false: the same formula from elementwise ops (slower)");
  return s;
}

Schema<optim::AdamOptions> make_adam_schema() {
  using A = optim::AdamOptions;
  Schema<A> s;
  s.real("beta1", &A::beta1, 0.0, 0.999999, "decay of the first moment")
      .real("beta2", &A::beta2, 0.0, 0.999999, "decay of the second moment")
      .real("epsilon", &A::epsilon, 1e-30, 1.0, "added to the root of the second moment");
  return s;
}

Schema<optim::LearningRateSchedule> make_learning_rate_schema() {
  using L = optim::LearningRateSchedule;
  Schema<L> s;
  s.choice("schedule", &L::kind,
           {{"constant", L::Kind::constant},
            {"rsqrt_decay", L::Kind::rsqrt_decay},
            {"linear_decay", L::Kind::linear_decay},
            {"adafactor_relative", L::Kind::adafactor_relative}},
           "constant: value; rsqrt_decay: 1/sqrt(max(step, warmup_steps)); linear_decay: linear "
           "warm-up to value, then to 0 at total_steps; adafactor_relative: "
           "min(1/sqrt(step + 1), value)")
      .real("value", &L::value, 0.0, 1e6,
            "the rate of constant, the peak of linear_decay, the cap of adafactor_relative")
      .real("warmup_steps", &L::warmup_steps, 0.0, 1e15,
            "warm-up steps (rsqrt_decay, linear_decay)")
      .real("total_steps", &L::total_steps, 1.0, 1e15,
            "where linear_decay and the cool-down reach 0 (default: train.steps)")
      .real("cooldown_steps", &L::cooldown_steps, 0.0, 1e15,
            "constant, rsqrt_decay, adafactor_relative: the rate falls linearly to 0 over the "
            "last cooldown_steps before total_steps (0: none)");
  return s;
}

Schema<OptimizerSettings> make_optimizer_schema() {
  Schema<O> s;
  s.choice("optimizer", &O::name, optimizer_names(),
           "the optimizer; only its own subsection of hyperparameters below may be set");
  const std::vector<std::pair<std::string, DType>> stored = {{"float32", DType::float32},
                                                             {"bfloat16", DType::bfloat16}};
  s.choice("variable_dtype", &O::variable_dtype, stored,
           "how trained variables are stored (master dtype); bfloat16 halves their bytes, read as "
           "float32, updates rounded by variable_rounding")
      .choice("variable_rounding", &O::variable_rounding,
              {{"nearest", Rounding::nearest}, {"stochastic", Rounding::stochastic}},
              "how updates round into bfloat16 variables: nearest even (updates below half an "
              "ulp are lost) or stochastic (unbiased; needs variable_dtype: bfloat16); "
              "docs/memory.md#bfloat16-variables-and-slots")
      .choice("optimizer_slot_dtype", &O::slot_dtype, stored,
              "how optimizer slots (Adam m, v; Adafactor's moments) are stored; bfloat16 halves "
              "their bytes")
      .boolean("shard_optimizer", &O::shard,
               "each data-parallel rank updates 1/n of every replicated variable of 64 KiB or more "
               "(gradients reduce-scattered, variables allgathered, slots stored split); "
               "docs/sharded-optimizer.md");
  for (const auto& k : kOptimizers)
    if (k.add_options)
      k.add_options(s, k.name);
  return s;
}

}  // namespace

const std::vector<std::string>& optimizer_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& k : kOptimizers)
      out.push_back(k.name);
    return out;
  }();
  return names;
}

bool optimizer_has_options(const std::string& name) {
  return optimizer_kind(name).add_options != nullptr;
}

std::unique_ptr<optim::Optimizer> make_optimizer(const OptimizerSettings& settings) {
  auto optimizer = optimizer_kind(settings.name).make(settings);
  optimizer->set_state_dtypes(settings.variable_dtype, settings.slot_dtype,
                              settings.variable_rounding);
  return optimizer;
}

const Schema<OptimizerSettings>& optimizer_schema() {
  static const Schema<OptimizerSettings> schema = make_optimizer_schema();
  return schema;
}

const Schema<optim::AdafactorOptions>& adafactor_schema() {
  static const Schema<optim::AdafactorOptions> schema = make_adafactor_schema();
  return schema;
}

const Schema<optim::AdamOptions>& adam_schema() {
  static const Schema<optim::AdamOptions> schema = make_adam_schema();
  return schema;
}

const Schema<optim::LearningRateSchedule>& learning_rate_schema() {
  static const Schema<optim::LearningRateSchedule> schema = make_learning_rate_schema();
  return schema;
}

}  // namespace mtk::config
