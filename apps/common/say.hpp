#pragma once
// The progress lines of MTK's tools: rank 0 of the world prints them to stdout and flushes, every
// rank goes on (so a line appears once under mpiexec, whatever the number of ranks).
//
//   app::say(cat("prepare: done -> ", dir, "\n"));                     // the text as is
//   app::say("  parameters %.2fM; mesh %s\n", params / 1e6, mesh.c_str());  // printf-style

#include <cstdio>
#include <string>

namespace mtk::app {

/// Whether this process prints the tools' progress lines: world rank 0.
bool says();

/// Rank 0 prints `text` (as is: no newline added, no format read) and flushes; every rank goes on.
void say(const std::string& text);

/// printf-style: rank 0 prints `format` filled in with the arguments and flushes; every rank goes
/// on. The compiler checks the format against the arguments (-Wformat); a literal without
/// arguments is a format too ("%%" for a percent sign).
#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
void say(const char* format, ...);

}  // namespace mtk::app
