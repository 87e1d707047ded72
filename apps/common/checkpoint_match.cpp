#include "checkpoint_match.hpp"

#include <mtk/base/error.hpp>
#include <mtk/config/model_config.hpp>

#include "say.hpp"

namespace mtk::app {

// A checkpoint trained on another vocabulary would read every token id as another piece.
void check_vocabulary(const CheckpointMetadata& meta, const RunOptions& o, const std::string& path,
                      const std::string& tool) {
  if (o.vocab_fingerprint.empty() || meta.vocab_fingerprint.empty() ||
      meta.vocab_fingerprint == o.vocab_fingerprint)
    return;
  fail(tool,
       cat("checkpoint '", path, "' was trained with the vocabulary of fingerprint ",
           meta.vocab_fingerprint, ", but the data (data.dir = '",
           o.config.get_string("data.dir", "", {}), "') has vocabulary ", o.vocab_fingerprint,
           ": token ids would mean other pieces; use the data the checkpoint was trained on"));
}

// The model keys that change what the same weights compute (shapes aside: those fail in the
// restore): an evaluation or a resumed run with another activation, norm or attention window would
// silently be another model. From a run directory that is an error; --restore (starting from
// another run's weights, e.g. to fine-tune with a window) is told, not refused.
void check_model(const CheckpointMetadata& meta, const RunOptions& o, const std::string& path,
                 const std::string& tool, bool explicit_restore) {
  if (meta.config_yaml.empty())
    return;
  nn::TransformerConfig was, now;
  try {
    was = transformer_config_from(Config::from_string(meta.config_yaml, path));
    now = transformer_config_from(o.config);
  } catch (const std::exception&) {  // an older or foreign config: nothing to compare
    return;
  }
  std::string diff;
  auto compare = [&](const char* key, const std::string& a, const std::string& b) {
    if (a != b)
      diff += cat(diff.empty() ? "" : ", ", key, " = ", a, " (this config: ", b, ")");
  };
  auto flag = [](bool b) { return std::string(b ? "true" : "false"); };
  compare("model.gelu", flag(was.gelu), flag(now.gelu));
  compare("model.norm", was.norm, now.norm);
  compare("model.attention_window",
          std::to_string(was.local_attention() ? was.attention_window : 0),
          std::to_string(now.local_attention() ? now.attention_window : 0));
  compare("model.num_layers", std::to_string(was.num_layers), std::to_string(now.num_layers));
  compare("model.num_encoder_layers", std::to_string(was.num_encoder_layers),
          std::to_string(now.num_encoder_layers));
  compare("model.shared_embedding", flag(was.shared_embedding), flag(now.shared_embedding));
  compare("model.moe_every", std::to_string(was.moe_every), std::to_string(now.moe_every));
  if (was.moe_every > 0 || now.moe_every > 0)
    compare("model.moe.num_experts", std::to_string(was.moe.num_experts),
            std::to_string(now.moe.num_experts));
  if (diff.empty())
    return;
  if (explicit_restore) {
    say(cat("  note: ", o.init_from.empty() ? "--restore " : "--init-from ", path,
            " was trained with ", diff, "\n"));
    return;
  }
  fail(tool,
       cat("checkpoint '", path, "' was trained with ", diff,
           ": its weights would compute another model; set the same values (--set KEY=VALUE), "
           "or name it with --restore to use its weights in this model anyway"));
}

std::string tell_setting_changes(const CheckpointMetadata& meta, const TrainingSettings& now,
                                 const std::string& path) {
  if (meta.config_yaml.empty())
    return "";
  std::vector<config::SettingChange> changes;
  try {
    const Config recorded = Config::from_string(meta.config_yaml, path);
    changes = config::program_changes(recorded, now.program);
    const bool was = recorded.get_bool("checkpoint.fletcher32", false);
    if (was != now.checkpoint_fletcher32)
      changes.push_back({"checkpoint.fletcher32", was ? "true" : "false",
                         now.checkpoint_fletcher32 ? "true" : "false", ""});
  } catch (const std::exception& e) {  // a config this version cannot read: say so, go on
    const std::string text =
        cat("  note: the settings of ", path, " cannot be compared: ", e.what(), "\n");
    say(text);
    return text;
  }
  if (changes.empty())
    return "";
  std::string text = cat("  note: ", path, " was saved with other program settings:\n");
  for (const auto& c : changes)
    text += cat("    ", c.key, ": ", c.was, " -> ", c.now, " (",
                c.numerics.empty() ? "time and memory only, the same results"
                                   : "can change numerics: " + c.numerics,
                ")\n");
  say(text);
  return text;
}

}  // namespace mtk::app
