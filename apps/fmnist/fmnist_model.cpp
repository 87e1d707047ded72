#include "fmnist_model.hpp"

#include <mtk/base/error.hpp>
#include <mtk/nn/conv.hpp>
#include <mtk/ops/ops.hpp>
#include <mtk/optim/optim.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace mtk::fmnist {
namespace {

constexpr std::int64_t kSide = 28, kClasses = 10;
// Fashion-MNIST's pixel mean and standard deviation (of x / 255 over the training set).
constexpr float kMean = 0.2860f, kStd = 0.3530f;

using nn::SpatialDim;

Tensor weight(Graph& g, const std::string& name, const Shape& shape, double fan_in, double gain,
              std::uint64_t seed) {
  const auto stddev = static_cast<float>(std::sqrt(gain / fan_in));
  return variable(g, name, shape, Initializer::normal(stddev, 0, seed));
}

Tensor bias(Graph& g, const std::string& name, const Dimension& dim) {
  return variable(g, name, Shape{{dim}}, Initializer::zeros());
}

}  // namespace

void ModelConfig::check() const {
  const char* where = "mtk::fmnist::ModelConfig";
  for (const auto& [name, blocks] : {std::pair{"hb", hb}, std::pair{"wb", wb}})
    if (blocks < 1 || kSide % blocks != 0 || (kSide / blocks) % 2 != 0)
      fail(where, cat(name, " = ", blocks, " must divide the 28 pixels into blocks of an even ",
                      "size (the 2x2 pooling runs inside blocks): 1, 2, 7 or 14"));
  for (const auto& [name, n] :
       {std::pair{"batch", batch}, std::pair{"eval_batch", eval_batch}, std::pair{"c1", c1},
        std::pair{"c2", c2}, std::pair{"hidden", hidden}})
    if (n < 1)
      fail(where, cat(name, " = ", n, " must be at least 1"));
  if (optimizer != "adam" && optimizer != "sgd")
    fail(where, cat("optimizer '", optimizer, "' is not one of adam, sgd"));
  if (!(lr > 0))
    fail(where, cat("lr = ", lr, " must be > 0"));
}

Model build_model(Graph& g, const ModelConfig& c, std::int64_t batch) {
  c.check();
  const std::int64_t h = kSide / c.hb, w = kSide / c.wb;
  Model m;
  m.images = placeholder(g, "images",
                         {{"b", batch}, {"hb", c.hb}, {"h", h}, {"wb", c.wb}, {"w", w}, {"c0", 1}});
  m.labels = placeholder(g, "labels", {{"b", batch}}, DType::int32);
  const std::vector<SpatialDim> conv_dims{{"h", "kh", 1, 1, "hb", 0}, {"w", "kw", 1, 1, "wb", 0}};
  const std::vector<SpatialDim> pool_dims{{"h", "ph", 2, 1, "hb", 2}, {"w", "pw", 2, 1, "wb", 2}};
  const auto s = c.seed;

  Tensor f1 = weight(g, "conv1/kernel", {{"kh", 3}, {"kw", 3}, {"c0", 1}, {"c1", c.c1}}, 9, 2, s);
  Tensor x =
      relu(nn::conv(m.images, f1, conv_dims, "c0", "c1") + bias(g, "conv1/bias", {"c1", c.c1}));
  x = nn::max_pool(x, pool_dims, nn::Padding::same);
  Tensor f2 = weight(g, "conv2/kernel", {{"kh", 3}, {"kw", 3}, {"c1", c.c1}, {"c2", c.c2}},
                     9.0 * static_cast<double>(c.c1), 2, s + 1);
  x = relu(nn::conv(x, f2, conv_dims, "c1", "c2") + bias(g, "conv2/bias", {"c2", c.c2}));

  const Shape& xs = x.shape();  // [b, hb, h / 2, wb, w / 2, c2]
  std::vector<Dimension> w1_dims;
  for (const auto& d : xs.dims())
    if (d.name != "b")
      w1_dims.push_back(d);
  w1_dims.push_back({"hidden", c.hidden});
  const Shape w1_shape(w1_dims);
  Tensor w1 = weight(g, "dense1/kernel", w1_shape, static_cast<double>(xs.num_elements() / batch),
                     2, s + 2);
  Tensor y = einsum({x, w1}, Shape{{"b", batch}, {"hidden", c.hidden}});
  y = relu(y + bias(g, "dense1/bias", {"hidden", c.hidden}));
  Tensor w2 = weight(g, "dense2/kernel", {{"hidden", c.hidden}, {"classes", kClasses}},
                     static_cast<double>(c.hidden), 1, s + 3);
  m.logits = einsum({y, w2}, Shape{{"b", batch}, {"classes", kClasses}}) +
             bias(g, "dense2/bias", {"classes", kClasses});
  m.loss = reduce_mean(softmax_cross_entropy(m.logits, m.labels, "classes"));
  m.correct = reduce_sum(equal(top_1(m.logits, "classes").second, m.labels));
  return m;
}

HostTensor image_feed(const IdxImages& images, const std::vector<std::int64_t>& indices,
                      const ModelConfig& c) {
  // [b, 28, 28, 1] row-major is [b, hb, h, wb, w, 1] row-major: the pixels as they are.
  const std::int64_t pixels = images.rows * images.cols;
  std::vector<float> values(indices.size() * static_cast<size_t>(pixels));
  for (size_t i = 0; i < indices.size(); ++i) {
    const std::uint8_t* src = images.pixels.data() + indices[i] * pixels;
    float* dst = values.data() + static_cast<std::int64_t>(i) * pixels;
    for (std::int64_t p = 0; p < pixels; ++p)
      dst[p] = (static_cast<float>(src[p]) / 255.0f - kMean) / kStd;
  }
  const auto b = static_cast<std::int64_t>(indices.size());
  return HostTensor::floats(
      {{"b", b}, {"hb", c.hb}, {"h", kSide / c.hb}, {"wb", c.wb}, {"w", kSide / c.wb}, {"c0", 1}},
      values);
}

HostTensor label_feed(const std::vector<std::uint8_t>& labels,
                      const std::vector<std::int64_t>& indices) {
  std::vector<std::int32_t> values;
  values.reserve(indices.size());
  for (auto i : indices)
    values.push_back(labels[static_cast<size_t>(i)]);
  return HostTensor::ints({{"b", static_cast<std::int64_t>(indices.size())}}, values);
}

std::vector<std::int64_t> epoch_order(std::int64_t count, std::uint64_t seed, std::int64_t epoch) {
  std::vector<std::int64_t> order(static_cast<size_t>(count));
  std::iota(order.begin(), order.end(), 0);
  // A Fisher-Yates shuffle with our own draws (std::shuffle's are the library's choice).
  std::mt19937_64 rng(seed * 1000003u + static_cast<std::uint64_t>(epoch));
  for (std::int64_t i = count - 1; i > 0; --i)
    std::swap(order[static_cast<size_t>(i)],
              order[static_cast<size_t>(rng() % static_cast<std::uint64_t>(i + 1))]);
  return order;
}

Trainer::Trainer(const ModelConfig& config, const ProgramOptions& program, const Mesh& mesh,
                 const LayoutRules& rules)
    : config_(config), train_graph_(program), eval_graph_(program) {
  train_ = build_model(train_graph_, config, config.batch);
  optim::LearningRateSchedule lr;
  lr.kind = optim::LearningRateSchedule::Kind::constant;
  lr.value = config.lr;
  if (config.optimizer == "adam") {
    optim::Adam adam;
    optim::minimize(train_.loss, adam, lr);
  } else {
    optim::Sgd sgd;
    optim::minimize(train_.loss, sgd, lr);
  }
  train_program_ = lower(train_graph_, mesh, rules);
  eval_ = build_model(eval_graph_, config, config.eval_batch);
  eval_program_ = lower(eval_graph_, mesh, rules);
}

StepResult Trainer::step(const IdxImages& images, const std::vector<std::uint8_t>& labels,
                         const std::vector<std::int64_t>& indices) {
  const auto out = train_program_->run({{train_.images.id(), image_feed(images, indices, config_)},
                                        {train_.labels.id(), label_feed(labels, indices)}},
                                       {train_.loss, train_.correct});
  return {out[0].at(0), out[1].at(0)};
}

StepResult Trainer::evaluate(const IdxImages& images, const std::vector<std::uint8_t>& labels,
                             std::int64_t limit) {
  // The evaluation program gets copies of the trained weights (same names, same layouts).
  for (const auto& name : eval_program_->variable_names()) {
    const auto from = train_program_->variable_slice_float32(name);
    Kokkos::View<float*> copy(Kokkos::view_alloc(Kokkos::WithoutInitializing, name),
                              from.extent(0));
    Kokkos::deep_copy(copy, from);
    eval_program_->set_variable_slice(name, copy);
  }
  const std::int64_t n = limit > 0 ? std::min(limit, images.count) : images.count;
  if (n % config_.eval_batch != 0)
    fail("mtk::fmnist::Trainer::evaluate",
         cat(n, " images are not a multiple of the evaluation batch ", config_.eval_batch));
  StepResult total;
  std::vector<std::int64_t> indices(static_cast<size_t>(config_.eval_batch));
  for (std::int64_t start = 0; start < n; start += config_.eval_batch) {
    std::iota(indices.begin(), indices.end(), start);
    const auto out = eval_program_->run({{eval_.images.id(), image_feed(images, indices, config_)},
                                         {eval_.labels.id(), label_feed(labels, indices)}},
                                        {eval_.loss, eval_.correct});
    total.loss += out[0].at(0) * static_cast<double>(config_.eval_batch);
    total.correct += out[1].at(0);
  }
  return {total.loss / static_cast<double>(n), total.correct / static_cast<double>(n)};
}

}  // namespace mtk::fmnist
