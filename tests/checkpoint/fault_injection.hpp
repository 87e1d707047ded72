#pragma once
// Fault injection for the checkpoint tests driven from outside (kill_during_save.sh), installed
// into the library's hook points (<mtk/checkpoint/impl/test_hooks.hpp>) by the test writer only:
//   MTK_CKPT_TEST_ABORT_AFTER=<phase>  rank MTK_CKPT_TEST_ABORT_RANK (default: every rank; the
//                                      script names one) SIGKILLs itself when a save reaches
//                                      <phase>
//   MTK_CKPT_TEST_DELAY_MS=<ms>        sleeps after every dataset written, so that an outside kill
//                                      lands inside a save

namespace mtk::ckpt_test {

/// Reads the variables above and installs the hooks they ask for (none when none is set). Throws
/// mtk::Error naming a variable whose value is not a number where one is needed.
void install_fault_injection();

}  // namespace mtk::ckpt_test
