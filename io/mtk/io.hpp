#pragma once
// MTK::io's public API: configuration files, data sets (vocabularies, the LM1B corpus, token
// shards, packed batches), sharded HDF5 checkpoints, metrics, stop signals, file utilities and the
// applications' main(). The engine and models are in <mtk/mtk.hpp>.

#include <mtk/app/app_main.hpp>
#include <mtk/app/exit_status.hpp>
#include <mtk/checkpoint/checkpoint.hpp>
#include <mtk/checkpoint/init_from.hpp>
#include <mtk/config/config.hpp>
#include <mtk/config/known_keys.hpp>
#include <mtk/config/model_config.hpp>
#include <mtk/config/optimizer_config.hpp>
#include <mtk/config/schema.hpp>
#include <mtk/config/training_config.hpp>
#include <mtk/data/lm1b_corpus.hpp>
#include <mtk/data/lm_batches.hpp>
#include <mtk/data/token_shards.hpp>
#include <mtk/data/vocab.hpp>
#include <mtk/files/files.hpp>
#include <mtk/files/sha256.hpp>
#include <mtk/metrics/metrics.hpp>
#include <mtk/metrics/peak_memory.hpp>
#include <mtk/signals/stop_signals.hpp>
