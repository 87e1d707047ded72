#pragma once
// File utilities shared by io: whole-file reads, durable and atomic writes, renames, directories
// and temporary names. Errors are mtk::Error naming `where`, the path and the system's reason.

#include <string>

namespace mtk {

/// The whole file as bytes.
std::string read_whole_file(const std::string& path, const std::string& where);

/// Writes `text` to `path` (created or truncated) and fsyncs it.
void write_file_durably(const std::string& path, const std::string& text, const std::string& where);

/// Appends `text` to `path` (created when absent), checking every write and the close.
void append_to_file(const std::string& path, const std::string& text, const std::string& where);

/// Replaces `path` atomically: `text` goes to the temporary file `tmp` (default
/// temp_path(path)), which is fsynced, renamed over `path`, and the directory fsynced. Readers
/// see the old or the new file, never a part of one. On failure the temporary file is removed.
void write_file_atomically(const std::string& path, const std::string& text,
                           const std::string& where, const std::string& tmp = "");

/// rename(2) of a file or directory, failing with both names.
void rename_path(const std::string& from, const std::string& to, const std::string& where);

/// fsync of a file, or of a directory (making renames and creations inside it durable).
void fsync_path(const std::string& path, bool directory, const std::string& where);

/// Creates `path` and its missing parents (mkdir -p).
void make_directories(const std::string& path, const std::string& where);

/// "<path>.tmp-<pid>": a temporary name beside `path`, distinct per process.
std::string temp_path(const std::string& path);

/// 16 random hex digits, for names that must differ between processes and hosts.
std::string random_nonce();

/// "a/b//" -> "a/b"; "/" stays.
std::string strip_trailing_slashes(std::string path);

}  // namespace mtk
