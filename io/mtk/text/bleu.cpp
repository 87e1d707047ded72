#include <mtk/base/error.hpp>
#include <mtk/text/bleu.hpp>
#include <mtk/text/tokenizer_13a.hpp>
#include <mtk/text/utf8.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>

namespace mtk::text {
namespace {

constexpr int kMaxOrder = 4;

using NgramCounts = std::map<std::string, std::int64_t>;

// n-grams of every order 1..4, keyed by their tokens joined with a separator no token contains.
NgramCounts count_ngrams(const std::vector<std::string>& tokens) {
  NgramCounts counts;
  for (int n = 1; n <= kMaxOrder; ++n) {
    for (size_t i = 0; i + n <= tokens.size(); ++i) {
      std::string key(1, static_cast<char>('0' + n));
      for (int k = 0; k < n; ++k) {
        key += '\x01';
        key += tokens[i + k];
      }
      ++counts[key];
    }
  }
  return counts;
}

std::string preprocess(const std::string& segment, const BleuOptions& options) {
  std::string s = options.lowercase ? lowercase(segment) : segment;
  s = rstrip(s);
  if (options.tokenize == "13a")
    return tokenize_13a(s);
  if (options.tokenize == "none")
    return s;
  fail("mtk::text::corpus_bleu",
       "unknown tokenizer '" + options.tokenize + "' (allowed: 13a, none)");
}

std::string format(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

// One line with the separators of sacreBLEU's JSON (Python's ", " and ": "); nlohmann writes
// every key and value (escaping, shortest round-trip doubles).
std::string one_line(const nlohmann::ordered_json& j) {
  const auto dump = [](const nlohmann::ordered_json& v) {
    return v.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  };
  std::string out;
  if (j.is_object()) {
    for (const auto& [key, value] : j.items())
      out += (out.empty() ? "" : ", ") + dump(key) + ": " + one_line(value);
    return "{" + out + "}";
  }
  if (j.is_array()) {
    for (const auto& value : j)
      out += (out.empty() ? "" : ", ") + one_line(value);
    return "[" + out + "]";
  }
  return dump(j);
}

}  // namespace

void accumulate_segment(BleuStats& stats, const std::string& hypothesis,
                        const std::vector<std::string>& references) {
  const auto hyp_tokens = split_whitespace(hypothesis);
  const auto hyp_len = static_cast<std::int64_t>(hyp_tokens.size());
  // Reference length closest to the hypothesis length; ties go to the shorter reference.
  std::int64_t closest_len = -1;
  std::int64_t closest_diff = 0;
  NgramCounts max_ref_counts;
  for (const auto& ref : references) {
    const auto ref_tokens = split_whitespace(ref);
    const auto ref_len = static_cast<std::int64_t>(ref_tokens.size());
    const std::int64_t diff = std::llabs(hyp_len - ref_len);
    if (closest_len < 0 || diff < closest_diff || (diff == closest_diff && ref_len < closest_len)) {
      closest_len = ref_len;
      closest_diff = diff;
    }
    for (const auto& [ngram, count] : count_ngrams(ref_tokens)) {
      auto& best = max_ref_counts[ngram];
      best = std::max(best, count);
    }
  }
  stats.hyp_len += hyp_len;
  stats.ref_len += std::max<std::int64_t>(closest_len, 0);
  for (int n = 1; n <= kMaxOrder; ++n)
    stats.totals[n - 1] += std::max<std::int64_t>(0, hyp_len - n + 1);
  for (const auto& [ngram, count] : count_ngrams(hyp_tokens)) {
    const auto it = max_ref_counts.find(ngram);
    if (it != max_ref_counts.end())
      stats.matches[ngram[0] - '1'] += std::min(count, it->second);
  }
}

BleuScore score_from_stats(const BleuStats& stats) {
  BleuScore s;
  s.stats = stats;
  if (stats.hyp_len < stats.ref_len)
    s.brevity_penalty = stats.hyp_len > 0 ? std::exp(1.0 - static_cast<double>(stats.ref_len) /
                                                               static_cast<double>(stats.hyp_len))
                                          : 0.0;
  s.ratio = stats.ref_len > 0
                ? static_cast<double>(stats.hyp_len) / static_cast<double>(stats.ref_len)
                : 0.0;
  // No match at any order: 0, with all precisions 0, as sacreBLEU (its issue #141).
  if (std::all_of(stats.matches.begin(), stats.matches.end(), [](auto m) { return m == 0; }))
    return s;
  double smooth = 1.0;
  for (int n = 1; n <= kMaxOrder; ++n) {
    const auto total = stats.totals[n - 1];
    if (total == 0)
      break;
    if (stats.matches[n - 1] == 0) {
      smooth *= 2;
      s.precisions[n - 1] = 100.0 / (smooth * static_cast<double>(total));
    } else {
      s.precisions[n - 1] =
          100.0 * static_cast<double>(stats.matches[n - 1]) / static_cast<double>(total);
    }
  }
  double log_sum = 0;
  for (double p : s.precisions)
    log_sum += p == 0 ? -9999999999.0 : std::log(p);
  s.score = s.brevity_penalty * std::exp(log_sum / kMaxOrder);
  return s;
}

BleuScore corpus_bleu(const std::vector<std::string>& hypotheses,
                      const std::vector<std::vector<std::string>>& references,
                      const BleuOptions& options) {
  if (references.empty())
    fail("mtk::text::corpus_bleu", "no reference stream given");
  for (size_t r = 0; r < references.size(); ++r)
    if (references[r].size() != hypotheses.size())
      fail("mtk::text::corpus_bleu", "reference stream " + std::to_string(r + 1) + " has " +
                                         std::to_string(references[r].size()) +
                                         " lines but there are " +
                                         std::to_string(hypotheses.size()) + " hypotheses");
  BleuStats stats;
  std::vector<std::string> refs;
  for (size_t i = 0; i < hypotheses.size(); ++i) {
    // An empty reference means "no reference for this line" when there are several streams.
    refs.clear();
    for (const auto& stream : references)
      if (!stream[i].empty())
        refs.push_back(preprocess(stream[i], options));
    if (refs.empty())
      fail("mtk::text::corpus_bleu",
           "line " + std::to_string(i + 1) + " has an empty reference in every stream");
    accumulate_segment(stats, preprocess(hypotheses[i], options), refs);
  }
  BleuScore score = score_from_stats(stats);
  score.num_refs = references.size();
  score.options = options;
  return score;
}

std::string BleuScore::signature() const {
  return "nrefs:" + std::to_string(num_refs) + "|case:" + (options.lowercase ? "lc" : "mixed") +
         "|eff:no|tok:" + options.tokenize + "|smooth:exp|version:" + kSacreBleuVersion;
}

std::string BleuScore::line() const {
  std::string precs;
  for (int n = 0; n < kMaxOrder; ++n)
    precs += (n ? "/" : "") + format("%.1f", precisions[n]);
  return "BLEU|" + signature() + " = " + format("%.2f", score) + " " + precs +
         " (BP = " + format("%.3f", brevity_penalty) + " ratio = " + format("%.3f", ratio) +
         " hyp_len = " + std::to_string(stats.hyp_len) +
         " ref_len = " + std::to_string(stats.ref_len) + ")";
}

std::string BleuScore::json() const {
  const std::string full = line();
  nlohmann::ordered_json j;
  j["name"] = "BLEU";
  j["score"] = score;
  j["signature"] = signature();
  j["verbose_score"] = full.substr(full.find(" = ") + 3);
  j["precisions"] = precisions;
  j["counts"] = stats.matches;
  j["totals"] = stats.totals;
  j["bp"] = brevity_penalty;
  j["ratio"] = ratio;
  j["hyp_len"] = stats.hyp_len;
  j["ref_len"] = stats.ref_len;
  return one_line(j);
}

}  // namespace mtk::text
