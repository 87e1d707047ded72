// mtk::kernels — see mtk_kernels.hpp. (implementation in progress)
#include <mtk_kernels.hpp>
