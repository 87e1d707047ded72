#pragma once
// The peak memory of this process, for metrics.jsonl's "peak_memory_bytes".

#include <cstdint>

namespace mtk {

/// The most resident memory this process has held so far, in bytes: VmHWM of /proc/self/status
/// (Linux), else getrusage's ru_maxrss; 0 when neither can be read. Host memory only: on a GPU
/// build the device's allocations are not in it.
std::int64_t peak_resident_bytes();

}  // namespace mtk
