// see mtk_kernels.hpp (tests in progress)
#include <gtest/gtest.h>
