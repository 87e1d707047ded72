#pragma once
// Fault injection for the checkpoint tests (tests/checkpoint/*.sh), driven by the environment:
// MTK_CKPT_TEST_ABORT_AFTER=<phase> makes rank MTK_CKPT_TEST_ABORT_RANK (default 0 of
// MPI_COMM_WORLD) SIGKILL itself when a save reaches <phase>; MTK_CKPT_TEST_DELAY_MS=<ms> sleeps
// after every dataset written, so that an outside kill lands inside a save. Tests only.

namespace mtk::ckpt {

/// Kills this process when the environment asks for it at `phase` ("first_dataset",
/// "created_dir", "wrote_data", "wrote_manifest", "before_rename", "renamed", "updated_latest").
void test_hook(const char* phase);
/// Sleeps MTK_CKPT_TEST_DELAY_MS milliseconds, if set.
void test_delay();

}  // namespace mtk::ckpt
