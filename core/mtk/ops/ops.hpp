#pragma once
// The operations users build models from, one header per op family. Every function appends to the
// graph of its inputs and checks names and sizes at once, raising mtk::Error that names the op,
// the tensors and the dims. Each family's .cpp holds, per op, its typed attributes, builder,
// gradient, lowering and FLOP count.

#include <mtk/ops/cumsum.hpp>
#include <mtk/ops/einsum.hpp>
#include <mtk/ops/elementwise.hpp>
#include <mtk/ops/halo_exchange.hpp>
#include <mtk/ops/indexing.hpp>
#include <mtk/ops/loss.hpp>
#include <mtk/ops/normalization.hpp>
#include <mtk/ops/optimizer_updates.hpp>
#include <mtk/ops/patches.hpp>
#include <mtk/ops/reduce.hpp>
#include <mtk/ops/shape.hpp>
#include <mtk/ops/softmax.hpp>
#include <mtk/ops/sources.hpp>
#include <mtk/ops/state.hpp>
#include <mtk/ops/top_1.hpp>
