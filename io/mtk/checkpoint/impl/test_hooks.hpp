#pragma once
// Points where the checkpoint tests inject faults (kill a rank at a phase of a save, slow saves
// down). The library only calls the hooks; none is installed unless a test program installs one
// (tests/checkpoint/fault_injection.cpp, linked into the test writer only), so the installed
// library holds no fault injection and reads no test variables.

namespace mtk::ckpt {

struct TestHooks {
  /// Called when a save reaches `phase` ("created_dir", "first_dataset", "wrote_data",
  /// "wrote_manifest", "before_rename", "renamed", "updated_latest").
  void (*at_phase)(const char* phase) = nullptr;
  /// Called after every dataset written.
  void (*after_dataset)() = nullptr;
};

/// Installs `hooks` for every later save of this process (tests only).
void set_test_hooks(const TestHooks& hooks);

/// The save reached `phase`: calls the installed at_phase hook, if any.
void test_hook(const char* phase);
/// A dataset was written: calls the installed after_dataset hook, if any.
void test_delay();

}  // namespace mtk::ckpt
