#pragma once
// The exit statuses of MTK's tools, one contract for batch scripts: a Slurm script requeues a
// job that stopped resumably and leaves alone one that finished or failed.

namespace mtk {

/// The run did what it was asked (training reached its last step, a check passed).
constexpr int kExitOk = 0;
/// An error: bad input, a failed check, a failed write. Requeueing will not help.
constexpr int kExitError = 1;
/// The command line was wrong (unknown option, missing argument).
constexpr int kExitUsage = 2;
/// A stop signal (SIGTERM, SIGUSR1, SIGINT) arrived during training; a checkpoint of the step
/// reached was saved and a resubmission continues from it (sysexits' EX_TEMPFAIL).
constexpr int kExitStoppedResumable = 75;
/// A stop signal arrived before the first step ran (during start-up or the restore); nothing new
/// was saved, and a resubmission starts from where this job started.
constexpr int kExitStoppedBeforeStart = 76;

}  // namespace mtk
