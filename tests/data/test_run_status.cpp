// RUN_DIR/status.json (io/mtk/app/run_status.hpp, issue 64 item 8): the record names rank 0's host
// and pid; a "running" record whose job is gone (its pid does not exist on this host, or nobody
// holds RUN_DIR/lock, or the caller holds the lock) is rewritten as "killed" keeping its step, pid
// and host; a live job's record, another host's and any other state are left alone.
#include <mtk/app/run_dir_lock.hpp>
#include <mtk/app/run_status.hpp>

#include <gtest/gtest.h>

#include "temp_dir.hpp"
#include <fstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace {

using mtk::RunState;

std::string host() {
  char h[256] = {};
  ::gethostname(h, sizeof h - 1);
  return h;
}

// A pid that no process has: a child that exited and was reaped.
pid_t dead_pid() {
  const pid_t child = ::fork();
  if (child == 0)
    ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

void write_status(const std::string& dir, const std::string& state, long long pid,
                  const std::string& on_host) {
  std::ofstream(dir + "/status.json")
      << "{\"state\": \"" << state << "\", \"step\": 40, \"steps\": 100, \"exit_code\": 0, "
      << "\"message\": \"\", \"tool\": \"mtk-lm1b train\", \"job\": \"77\", \"pid\": " << pid
      << ", \"host\": \"" << on_host << "\", \"time\": \"2026-01-02T03:04:05Z\"}\n";
}

TEST(RunStatus, RecordsHostAndPid) {
  mtk::test::TempDir dir;
  mtk::write_run_status(dir.path(), RunState::running, 3, 9, 0, "mtk-lm1b train");
  const auto r = mtk::read_run_status(dir.path());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->state, "running");
  EXPECT_EQ(r->step, 3);
  EXPECT_EQ(r->steps, 9);
  EXPECT_EQ(r->pid, ::getpid());
  EXPECT_EQ(r->host, host());
  EXPECT_EQ(std::string(mtk::to_string(RunState::killed)), "killed");
}

TEST(RunStatus, RunningWithItsProcessGoneIsRecordedAsKilled) {
  mtk::test::TempDir dir;
  const pid_t pid = dead_pid();
  write_status(dir.path(), "running", pid, host());
  const std::string note = mtk::settle_stale_run_status(dir.path(), "mtk-lm1b eval");
  EXPECT_NE(note.find("status.json said running, but the job (host " + host() + ", pid " +
                      std::to_string(pid) + ", job 77"),
            std::string::npos)
      << note;
  EXPECT_NE(note.find("killed with SIGKILL"), std::string::npos) << note;
  const auto r = mtk::read_run_status(dir.path());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->state, "killed");
  EXPECT_EQ(r->step, 40);
  EXPECT_EQ(r->steps, 100);
  EXPECT_EQ(r->pid, pid);
  EXPECT_EQ(r->host, host());
  EXPECT_EQ(r->job, "77");
  EXPECT_EQ(r->tool, "mtk-lm1b train");
  EXPECT_NE(r->message.find("found by mtk-lm1b eval"), std::string::npos) << r->message;
  // Settled once: nothing more to say.
  EXPECT_EQ(mtk::settle_stale_run_status(dir.path(), "mtk-lm1b eval"), "");
}

TEST(RunStatus, ALiveJobsRecordIsLeftAlone) {
  mtk::test::TempDir dir;
  // This process, holding the run directory's lock: alive.
  mtk::RunDirLock lock(dir.path(), "mtk-lm1b train");
  write_status(dir.path(), "running", ::getpid(), host());
  EXPECT_EQ(mtk::settle_stale_run_status(dir.path(), "mtk-lm1b eval"), "");
  EXPECT_EQ(mtk::read_run_status(dir.path())->state, "running");
  // The lock's holder itself (train, after taking the lock) knows the record is stale.
  EXPECT_NE(mtk::settle_stale_run_status(dir.path(), "mtk-lm1b train", true), "");
  EXPECT_EQ(mtk::read_run_status(dir.path())->state, "killed");
}

TEST(RunStatus, APidThatExistsButNoLockHolderIsKilled) {
  mtk::test::TempDir dir;
  // pid 1 exists (init), but nobody holds the lock: the pid was reused, the job is gone.
  write_status(dir.path(), "running", 1, host());
  EXPECT_NE(mtk::settle_stale_run_status(dir.path(), "mtk-lm1b eval"), "");
  EXPECT_EQ(mtk::read_run_status(dir.path())->state, "killed");
}

TEST(RunStatus, OtherHostsAndOtherStatesAreLeftAlone) {
  mtk::test::TempDir dir;
  write_status(dir.path(), "running", dead_pid(), "another-host.invalid");
  EXPECT_EQ(mtk::settle_stale_run_status(dir.path(), "mtk-lm1b eval"), "");
  EXPECT_EQ(mtk::read_run_status(dir.path())->state, "running");
  for (const char* state : {"completed", "stopped", "failed", "killed"}) {
    write_status(dir.path(), state, dead_pid(), host());
    EXPECT_EQ(mtk::settle_stale_run_status(dir.path(), "mtk-lm1b eval"), "") << state;
    EXPECT_EQ(mtk::read_run_status(dir.path())->state, state);
  }
  // No status at all, or one that cannot be read.
  mtk::test::TempDir empty;
  EXPECT_EQ(mtk::settle_stale_run_status(empty.path(), "mtk-lm1b eval"), "");
  std::ofstream(empty.path() + "/status.json") << "{not json";
  EXPECT_FALSE(mtk::read_run_status(empty.path()));
  EXPECT_EQ(mtk::settle_stale_run_status(empty.path(), "mtk-lm1b eval"), "");
}

}  // namespace
