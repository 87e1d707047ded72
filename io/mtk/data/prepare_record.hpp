#pragma once
// What a prepared folder (`mtk-lm1b prepare --out DIR`, `mtk-wmt prepare`'s data.dir) records about
// the command that wrote it, so that advice after a damaged or missing file names the exact command
// to run again: the folder's own settings, which keep its vocabulary (and so every checkpoint
// trained on it) and encode again only what is damaged.

#include <string>
#include <utility>
#include <vector>

namespace mtk {

/// DIR/prepare.command: one line, the command with every setting spelled out.
inline constexpr const char* kPrepareCommandFile = "prepare.command";

/// Writes DIR/prepare.command atomically.
void write_prepare_command(const std::string& dir, const std::string& command);
/// The command recorded in DIR/prepare.command; "" when there is none.
std::string recorded_prepare_command(const std::string& dir);

/// Advice for a damaged or missing file of a prepared folder: "run `CMD` again (...)" with the
/// command recorded in the folder holding `file` (its own folder, or the one above it), else
/// "run `TOOL` again with the settings that prepared it". `tool` is "mtk-lm1b prepare" or
/// "mtk-wmt prepare".
std::string prepare_again_advice(const std::string& file, const std::string& tool);

/// `text` quoted for a POSIX shell where it needs to be ("a b" -> 'a b').
std::string shell_quote(const std::string& text);

/// The `key=value` words of a settings line ("... v1: vocab_size=300 seed=1"), in order.
std::vector<std::pair<std::string, std::string>> settings_words(const std::string& line);

}  // namespace mtk
