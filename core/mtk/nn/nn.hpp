#pragma once
// Umbrella header: the layers (embedding, normalisation, attention, local attention,
// feed-forward, mixture of experts, cross-entropy), the Transformer and the paper's model sizes.

#include <mtk/nn/attention.hpp>
#include <mtk/nn/conv.hpp>
#include <mtk/nn/cross_entropy.hpp>
#include <mtk/nn/decoding_graphs.hpp>
#include <mtk/nn/embedding.hpp>
#include <mtk/nn/feed_forward.hpp>
#include <mtk/nn/layer_context.hpp>
#include <mtk/nn/local_attention.hpp>
#include <mtk/nn/moe.hpp>
#include <mtk/nn/normalization.hpp>
#include <mtk/nn/paper_configs.hpp>
#include <mtk/nn/training_graph.hpp>
#include <mtk/nn/transformer.hpp>
#include <mtk/nn/transformer_config.hpp>
