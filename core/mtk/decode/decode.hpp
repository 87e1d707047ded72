#pragma once
// Umbrella header of decoding: beam and greedy search, the incremental decoder (cached keys and
// values), the naive full-re-decoding reference, and weights copied by name.

#include <mtk/decode/beam_search.hpp>
#include <mtk/decode/full_decoder.hpp>
#include <mtk/decode/incremental_decoder.hpp>
#include <mtk/decode/weights.hpp>
