#include <mtk/base/error.hpp>
#include <mtk/cost/layout_search.hpp>
#include <mtk/lower/lowering.hpp>

#include <algorithm>
#include <bitset>
#include <map>
#include <numeric>
#include <set>
#include <tuple>

namespace mtk::cost {

namespace {

using Mask = std::uint32_t;  // a set of splittable dims, bit i = dims[i]

int popcount(Mask m) {
  return static_cast<int>(std::bitset<32>(m).count());
}

void factor_rec(std::int64_t n, int left, std::int64_t min_factor, bool ordered,
                std::vector<std::int64_t>& cur, std::vector<std::vector<std::int64_t>>& out) {
  if (n == 1) {
    if (!cur.empty())
      out.push_back(cur);
    return;
  }
  if (left == 0)
    return;
  for (std::int64_t f = ordered ? 2 : min_factor; f <= n; ++f) {
    if (n % f != 0)
      continue;
    cur.push_back(f);
    factor_rec(n / f, left - 1, f, ordered, cur, out);
    cur.pop_back();
  }
}

// Unordered factorizations (nonincreasing sizes): one per mesh up to the order of its dims.
std::vector<std::vector<std::int64_t>> unordered_factorizations(std::int64_t n, int max_dims) {
  std::vector<std::vector<std::int64_t>> out;
  std::vector<std::int64_t> cur;
  factor_rec(n, max_dims, 2, false, cur, out);
  for (auto& f : out)
    std::sort(f.rbegin(), f.rend());
  return out;
}

// Mesh dim names from what they split, so one class keeps its names in every order: the dim
// splitting `batch` is "batch", the others "model", "model2", ... in canonical order.
std::vector<std::string> mesh_dim_names(const std::vector<Mask>& masks, int batch_bit) {
  std::vector<std::string> names;
  int models = 0;
  for (Mask m : masks) {
    if (batch_bit >= 0 && (m >> batch_bit & 1u))
      names.push_back("batch");
    else
      names.push_back(models++ == 0 ? "model" : "model" + std::to_string(models));
  }
  return names;
}

}  // namespace

std::vector<std::vector<std::int64_t>> mesh_factorizations(std::int64_t n, int max_dims) {
  if (n < 1)
    fail("mtk::cost::mesh_factorizations", cat("processor count ", n, " must be >= 1"));
  if (n == 1)
    return {{1}};
  std::vector<std::vector<std::int64_t>> out;
  std::vector<std::int64_t> cur;
  factor_rec(n, max_dims, 2, true, cur, out);
  return out;
}

SearchResult search_layouts(Graph& graph, const Machine& machine, const SearchOptions& options) {
  const std::string where = "mtk::cost::search_layouts";
  machine.validate();
  if (options.processors < 1)
    fail(where, cat("processor count ", options.processors, " must be >= 1"));
  if (options.max_mesh_dims < 1 || options.max_mesh_dims > 4)
    fail(where, cat("max_mesh_dims ", options.max_mesh_dims, " must be in 1..4"));
  SearchResult r;

  // The splittable dims, their sizes, and the sets of them that share a tensor.
  std::map<std::string, std::int64_t> size_of;
  for (int t = 0; t < graph.num_tensors(); ++t)
    for (const auto& d : graph.tensor_info(t).shape.dims())
      size_of.emplace(d.name, d.size);
  // Candidates: the dims the model's layers offer (or every dim), less those an op needs whole
  // (its OpTraits): the lowering never has to refuse a candidate.
  const auto whole = graph.unsplittable_dims();
  std::vector<std::string> wanted = options.dims;
  const bool defaults = wanted.empty();
  if (defaults)
    wanted = graph.offered_splits();
  if (wanted.empty())
    for (int t = 0; t < graph.num_tensors(); ++t)
      for (const auto& d : graph.tensor_info(t).shape.dims())
        if (std::find(wanted.begin(), wanted.end(), d.name) == wanted.end())
          wanted.push_back(d.name);
  for (const auto& d : wanted) {
    const auto op =
        std::find_if(whole.begin(), whole.end(), [&](const auto& w) { return w.first == d; });
    if (op != whole.end()) {
      if (!defaults)
        fail(where, cat("dimension '", d, "' cannot be split: ", op->second->kind(), " '",
                        op->second->name, "' needs it whole"));
      r.unsplittable.push_back(cat(d, " (", op->second->kind(), " '", op->second->name, "')"));
    } else if (size_of.count(d)) {
      r.dims.push_back(d);
    } else if (!defaults) {
      fail(where, cat("dimension '", d, "' is in no tensor of the model"));
    }
  }
  if (r.dims.size() > 12)
    fail(where, cat(r.dims.size(), " splittable dims; at most 12 are searched"));
  const int D = static_cast<int>(r.dims.size());
  std::vector<std::int64_t> sizes;
  for (const auto& d : r.dims)
    sizes.push_back(size_of.at(d));
  std::set<Mask> tensor_masks;
  for (int t = 0; t < graph.num_tensors(); ++t) {
    Mask m = 0;
    for (int i = 0; i < D; ++i)
      if (graph.tensor_info(t).shape.contains(r.dims[static_cast<size_t>(i)]))
        m |= Mask{1} << i;
    if (popcount(m) >= 2)
      tensor_masks.insert(m);
  }
  const auto batch_it = std::find(r.dims.begin(), r.dims.end(), "batch");
  const int batch_bit = batch_it == r.dims.end() ? -1 : static_cast<int>(batch_it - r.dims.begin());

  {  // the model's matmul FLOPs on one processor, for MFU
    auto p = analyze(graph, MeshShape::parse("all:1"), LayoutRules());
    r.model_flops = p->counters().flops_of(FlopClass::einsum);
  }
  const std::int64_t limit = options.memory_bytes;
  bool any_valid = false;
  r.min_peak_bytes = -1;

  for (const auto& msizes : unordered_factorizations(options.processors, options.max_mesh_dims)) {
    ++r.meshes;
    const int k = options.processors == 1 ? 0 : static_cast<int>(msizes.size());
    // Every assignment dims -> {none, mesh dim 0..k-1}, as base-(k+1) digits.
    std::int64_t total = 1;
    for (int i = 0; i < D; ++i)
      total *= k + 1;
    for (std::int64_t code = 0; code < total; ++code) {
      std::vector<Mask> masks(static_cast<size_t>(k), 0);
      std::vector<int> target(static_cast<size_t>(D), -1);
      std::int64_t c = code;
      for (int i = 0; i < D; ++i) {
        const int digit = static_cast<int>(c % (k + 1));
        c /= k + 1;
        if (digit > 0) {
          masks[static_cast<size_t>(digit - 1)] |= Mask{1} << i;
          target[static_cast<size_t>(i)] = digit - 1;
        }
      }
      // Every mesh dim splits something; equal-size mesh dims in canonical (increasing) order.
      bool ok = true;
      for (int a = 0; a < k && ok; ++a) {
        ok = masks[static_cast<size_t>(a)] != 0;
        if (ok && a > 0 && msizes[static_cast<size_t>(a)] == msizes[static_cast<size_t>(a - 1)])
          ok = masks[static_cast<size_t>(a - 1)] < masks[static_cast<size_t>(a)];
      }
      if (!ok)
        continue;
      ++r.mappings;
      bool divisible = true;
      for (int i = 0; i < D; ++i)
        if (target[static_cast<size_t>(i)] >= 0 &&
            sizes[static_cast<size_t>(i)] %
                    msizes[static_cast<size_t>(target[static_cast<size_t>(i)])] !=
                0)
          divisible = false;
      if (!divisible) {
        ++r.not_divisible;
        continue;
      }
      bool conflict = false;
      for (Mask m : masks)
        for (Mask t : tensor_masks)
          if (popcount(m & t) >= 2)
            conflict = true;
      if (conflict) {
        ++r.tensor_conflicts;
        continue;
      }
      // Analyse the class once, on its canonical order.
      const std::vector<std::string> names = mesh_dim_names(masks, batch_bit);
      std::vector<Dimension> mdims;
      for (int a = 0; a < k; ++a)
        mdims.push_back({names[static_cast<size_t>(a)], msizes[static_cast<size_t>(a)]});
      if (k == 0)
        mdims.push_back({"all", 1});
      std::vector<std::pair<std::string, std::string>> rule_list;
      for (int i = 0; i < D; ++i)
        if (target[static_cast<size_t>(i)] >= 0)
          rule_list.emplace_back(r.dims[static_cast<size_t>(i)],
                                 names[static_cast<size_t>(target[static_cast<size_t>(i)])]);
      const LayoutRules rules(rule_list);
      const MeshShape canonical(mdims);
      ++r.analyzed;
      const Counters counters = analyze(graph, canonical, rules)->counters();
      any_valid = true;
      if (r.min_peak_bytes < 0 || counters.peak_bytes < r.min_peak_bytes)
        r.min_peak_bytes = counters.peak_bytes;
      if (limit > 0 && counters.peak_bytes > limit) {
        ++r.over_memory;
        continue;
      }
      // Time it in every order of its mesh dims.
      std::vector<int> perm(mdims.size());
      std::iota(perm.begin(), perm.end(), 0);
      do {
        std::vector<Dimension> ordered;
        std::vector<int> position(perm.size());  // canonical axis -> position in this order
        for (size_t p = 0; p < perm.size(); ++p) {
          ordered.push_back(mdims[static_cast<size_t>(perm[p])]);
          position[static_cast<size_t>(perm[p])] = static_cast<int>(p);
        }
        Candidate cand;
        cand.mesh = MeshShape(ordered);
        cand.rules = rules;
        cand.counters = counters;
        cand.counters.group_bytes.clear();
        cand.counters.group_calls.clear();
        cand.counters.group_sizes.clear();
        for (const auto& [g, bytes] : counters.group_bytes) {
          std::vector<int> axes;
          for (int a : g.second)
            axes.push_back(position[static_cast<size_t>(a)]);
          std::sort(axes.begin(), axes.end());
          const Counters::CommGroup key{g.first, axes};
          cand.counters.group_bytes[key] += bytes;
          cand.counters.group_calls[key] += counters.group_calls.at(g);
          if (const auto it = counters.group_sizes.find(g); it != counters.group_sizes.end())
            for (const auto& [size_key, bc] : it->second) {
              auto& [b, c] = cand.counters.group_sizes[key][size_key];
              b += bc.first;
              c += bc.second;
            }
        }
        cand.time = predict_step_time(cand.counters, cand.mesh, machine, options.time);
        const double rate = options.time.bf16 && machine.matmul_bf16_flops > 0
                                ? machine.matmul_bf16_flops
                                : machine.matmul_flops;
        cand.mfu = r.model_flops / (options.processors * cand.time.total_s * rate);
        r.ranked.push_back(std::move(cand));
      } while (std::next_permutation(perm.begin(), perm.end()));
    }
  }

  if (r.ranked.empty()) {
    std::string sizes_text;
    for (int i = 0; i < D; ++i)
      sizes_text +=
          cat(i ? ", " : "", r.dims[static_cast<size_t>(i)], "=", sizes[static_cast<size_t>(i)]);
    if (!any_valid)
      fail(where, cat("no mesh of ", options.processors, " processors (up to ",
                      options.max_mesh_dims, " dims, every mesh dim splitting some tensor dim) has",
                      " a valid layout for splittable dims ", sizes_text, ": ", r.not_divisible,
                      " mappings not divisible, ", r.tensor_conflicts,
                      " with two dims of one tensor on one mesh dim",
                      "; choose a processor count that divides these sizes"));
    fail(where, cat("every one of the ", r.analyzed, " valid layouts on ", options.processors,
                    " processors needs more than the memory limit of ", limit,
                    " bytes per processor; the smallest peak is ", r.min_peak_bytes,
                    " bytes; use more processors or more memory"));
  }
  std::stable_sort(r.ranked.begin(), r.ranked.end(), [](const Candidate& a, const Candidate& b) {
    return std::make_tuple(a.time.total_s, a.mesh.ndims(), a.mesh.to_string(),
                           a.rules.to_string()) <
           std::make_tuple(b.time.total_s, b.mesh.ndims(), b.mesh.to_string(), b.rules.to_string());
  });
  return r;
}

}  // namespace mtk::cost
