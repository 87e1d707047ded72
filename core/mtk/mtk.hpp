#pragma once
// MTK's public API for building and running models: MTK::engine (shapes, meshes, layouts,
// collectives, the graph, ops, gradients, lowering, kernels) and MTK::models (optimizers, layers,
// the Transformer). I/O (configs, data sets, checkpoints, metrics) is in <mtk/io.hpp>.

#include <mtk/autodiff/gradients.hpp>
#include <mtk/base/dtype.hpp>
#include <mtk/base/error.hpp>
#include <mtk/base/exec_space.hpp>
#include <mtk/base/functions.hpp>
#include <mtk/base/shape.hpp>
#include <mtk/decode/decode.hpp>
#include <mtk/graph/graph.hpp>
#include <mtk/lower/lowering.hpp>
#include <mtk/nn/nn.hpp>
#include <mtk/ops/ops.hpp>
#include <mtk/optim/optim.hpp>
#include <mtk/parallel/collective_wait.hpp>
#include <mtk/parallel/collectives.hpp>
#include <mtk/parallel/communicator.hpp>
#include <mtk/parallel/environment.hpp>
#include <mtk/parallel/layout.hpp>
#include <mtk/parallel/mesh.hpp>
#include <mtk/parallel/mesh_shape.hpp>
#include <mtk/runtime/counters.hpp>
#include <mtk/runtime/host_tensor.hpp>
#include <mtk/runtime/program.hpp>
#include <mtk/version.hpp>
