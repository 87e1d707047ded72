#pragma once
// Every local kernel (the work each processor does on its own slice); see view.hpp for the
// conventions and one header per family for the kernels.

#include <mtk/kernels/einsum.hpp>
#include <mtk/kernels/elementwise.hpp>
#include <mtk/kernels/indexing.hpp>
#include <mtk/kernels/loss.hpp>
#include <mtk/kernels/matmul_ceiling.hpp>
#include <mtk/kernels/normalization.hpp>
#include <mtk/kernels/optimizer.hpp>
#include <mtk/kernels/random.hpp>
#include <mtk/kernels/reduce.hpp>
#include <mtk/kernels/shape.hpp>
#include <mtk/kernels/view.hpp>
