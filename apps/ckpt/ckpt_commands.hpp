#pragma once
// The commands of mtk-ckpt that move weights between MTK checkpoints and safetensors files
// (docs/checkpoint-format.md#safetensors): export, import, and logits (MTK's logits of given
// tokens, to compare another framework's with).

#include <mtk/parallel/communicator.hpp>

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace mtk::ckpt_tool {

struct ExportOptions {
  std::string checkpoint, format = "safetensors", out, dtype = "f32";
};
/// `mtk-ckpt export CHECKPOINT --format safetensors --out FILE [--dtype f32|bf16]`.
CLI::App* add_export_command(CLI::App& app, ExportOptions& o);
int export_main(const Communicator& world, const ExportOptions& o);

struct ImportOptions {
  std::string file, config, run_dir, mesh, layout;
  std::vector<std::string> sets;
};
/// `mtk-ckpt import FILE --config C --run-dir R [--mesh M] [--layout L] [--set K=V]...`.
CLI::App* add_import_command(CLI::App& app, ImportOptions& o);
int import_main(const Communicator& world, const ImportOptions& o);

struct LogitsOptions {
  std::string checkpoint, tokens, out;
};
/// `mtk-ckpt logits CHECKPOINT --tokens FILE --out FILE`.
CLI::App* add_logits_command(CLI::App& app, LogitsOptions& o);
int logits_main(const Communicator& world, const LogitsOptions& o);

}  // namespace mtk::ckpt_tool
