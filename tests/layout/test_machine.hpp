#pragma once
// The machine the layout-search tests cost against: round rates, two link levels (groups of up to
// 2 processors on the fast one), so expected step times are easy to write down.

#include <mtk/cost/machine.hpp>

namespace mtk::test {

inline cost::Machine test_machine() {
  cost::Machine m;
  m.name = "test";
  m.matmul_flops = 1e10;
  m.elementwise_bytes = 1e10;
  m.links = {{2, 1e10, 1e-6}, {0, 1e9, 1e-5}};
  return m;
}

}  // namespace mtk::test
