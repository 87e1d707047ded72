#include <mtk/base/error.hpp>
#include <mtk/cost/impl/factorizations.hpp>
#include <mtk/cost/layout_search.hpp>
#include <mtk/lower/lowering.hpp>

#include <algorithm>
#include <bitset>
#include <limits>
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

// The dims to search (into r.dims, r.unsplittable) and their sizes: the dims the model's layers
// offer (or every dim), less those an op needs whole (its OpTraits), so the lowering never has to
// refuse a candidate.
std::vector<std::int64_t> choose_dims(const Graph& graph, const SearchOptions& options,
                                      SearchResult& r) {
  const char* where = "mtk::cost::search_layouts";
  std::map<std::string, std::int64_t> size_of;
  std::vector<std::string> every;
  // A dim's size: the gcd over the tensors with it (a microbatch's slice of `batch` is smaller
  // than the fed batch, and a split must divide both).
  for (int t = 0; t < graph.num_tensors(); ++t)
    for (const auto& d : graph.tensor_info(t).shape.dims()) {
      const auto [it, added] = size_of.emplace(d.name, d.size);
      if (added)
        every.push_back(d.name);
      else
        it->second = std::gcd(it->second, d.size);
    }
  const auto whole = graph.unsplittable_dims();
  const bool defaults = options.dims.empty();
  std::vector<std::string> wanted = defaults ? graph.offered_splits() : options.dims;
  if (wanted.empty())
    wanted = every;
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
  std::vector<std::int64_t> sizes;
  for (const auto& d : r.dims)
    sizes.push_back(size_of.at(d));
  return sizes;
}

// The sets of searched dims that share a tensor (two of them must not share a mesh dim).
std::set<Mask> shared_dims(const Graph& graph, const std::vector<std::string>& dims) {
  std::set<Mask> out;
  for (int t = 0; t < graph.num_tensors(); ++t) {
    Mask m = 0;
    for (size_t i = 0; i < dims.size(); ++i)
      if (graph.tensor_info(t).shape.contains(dims[i]))
        m |= Mask{1} << i;
    if (popcount(m) >= 2)
      out.insert(m);
  }
  return out;
}

// One mapping of the searched dims onto mesh dims of sizes `msizes`: per mesh dim the dims it
// splits, per dim its mesh dim (-1: whole).
struct Mapping {
  std::vector<Mask> masks;
  std::vector<int> target;
};

// Mapping number `code` (base-(k+1) digits, one per dim); false when it is not canonical: a mesh
// dim splitting nothing, or equal-size mesh dims out of increasing order.
bool decode_mapping(std::int64_t code, int dims, const std::vector<std::int64_t>& msizes, int k,
                    Mapping& m) {
  m.masks.assign(static_cast<size_t>(k), 0);
  m.target.assign(static_cast<size_t>(dims), -1);
  for (int i = 0; i < dims; ++i) {
    const int digit = static_cast<int>(code % (k + 1));
    code /= k + 1;
    if (digit > 0) {
      m.masks[static_cast<size_t>(digit - 1)] |= Mask{1} << i;
      m.target[static_cast<size_t>(i)] = digit - 1;
    }
  }
  for (int a = 0; a < k; ++a) {
    if (m.masks[static_cast<size_t>(a)] == 0)
      return false;
    if (a > 0 && msizes[static_cast<size_t>(a)] == msizes[static_cast<size_t>(a - 1)] &&
        !(m.masks[static_cast<size_t>(a - 1)] < m.masks[static_cast<size_t>(a)]))
      return false;
  }
  return true;
}

bool divisible(const Mapping& m, const std::vector<std::int64_t>& sizes,
               const std::vector<std::int64_t>& msizes) {
  for (size_t i = 0; i < sizes.size(); ++i)
    if (m.target[i] >= 0 && sizes[i] % msizes[static_cast<size_t>(m.target[i])] != 0)
      return false;
  return true;
}

bool conflicts(const Mapping& m, const std::set<Mask>& shared) {
  for (Mask a : m.masks)
    for (Mask t : shared)
      if (popcount(a & t) >= 2)
        return true;
  return false;
}

// `counters` with each collective group's mesh axes renumbered by `position`.
Counters reorder_groups(const Counters& counters, const std::vector<int>& position) {
  auto renumbered = [&](const std::vector<int>& from) {
    std::vector<int> axes;
    for (int a : from)
      axes.push_back(position[static_cast<size_t>(a)]);
    std::sort(axes.begin(), axes.end());
    return axes;
  };
  Counters out = counters;
  out.group_bytes.clear();
  out.group_calls.clear();
  out.group_sizes.clear();
  for (auto& e : out.halo_exchanges)  // each exchange's link too (step_time.hpp)
    e.group.second = renumbered(e.group.second);
  for (const auto& [g, bytes] : counters.group_bytes) {
    const Counters::CommGroup key{g.first, renumbered(g.second)};
    out.group_bytes[key] += bytes;
    out.group_calls[key] += counters.group_calls.at(g);
    if (const auto it = counters.group_sizes.find(g); it != counters.group_sizes.end())
      for (const auto& [size_key, bc] : it->second) {
        auto& [b, c] = out.group_sizes[key][size_key];
        b += bc.first;
        c += bc.second;
      }
  }
  return out;
}

// Times one analysed class in every order of its mesh dims (the order decides the links).
void rank_orders(const std::vector<Dimension>& mdims, const LayoutRules& rules,
                 const Counters& counters, const Machine& machine, const SearchOptions& options,
                 SearchResult& r) {
  std::vector<int> perm(mdims.size());
  std::iota(perm.begin(), perm.end(), 0);
  const double rate = options.time.bf16 && machine.matmul_bf16_flops > 0 ? machine.matmul_bf16_flops
                                                                         : machine.matmul_flops;
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
    cand.counters = reorder_groups(counters, position);
    cand.time = predict_step_time(cand.counters, cand.mesh, machine, options.time);
    cand.mfu = r.model_flops / (options.processors * cand.time.total_s * rate);
    r.ranked.push_back(std::move(cand));
  } while (std::next_permutation(perm.begin(), perm.end()));
}

[[noreturn]] void fail_no_candidate(const SearchResult& r, const SearchOptions& options,
                                    const std::vector<std::int64_t>& sizes, bool any_valid) {
  const char* where = "mtk::cost::search_layouts";
  std::string sizes_text;
  for (size_t i = 0; i < sizes.size(); ++i)
    sizes_text += cat(i ? ", " : "", r.dims[i], "=", sizes[i]);
  if (!any_valid && options.rules)
    fail(where, cat("no mesh of ", options.processors, " processors over the mesh dims of layout ",
                    options.rules->to_string(), " divides the tensor dims it splits (",
                    r.not_divisible, " meshes not divisible, ", r.tensor_conflicts,
                    " refused by the lowering); choose another processor count or layout"));
  if (!any_valid && options.mesh)
    fail(where, cat("no layout of splittable dims ", sizes_text, " is valid on mesh ",
                    options.mesh->to_string(), ": ", r.not_divisible, " mappings not divisible, ",
                    r.tensor_conflicts, " with two dims of one tensor on one mesh dim"));
  if (!any_valid)
    fail(where, cat("no mesh of ", options.processors, " processors (up to ", options.max_mesh_dims,
                    " dims, every mesh dim splitting some tensor dim) has",
                    " a valid layout for splittable dims ", sizes_text, ": ", r.not_divisible,
                    " mappings not divisible, ", r.tensor_conflicts,
                    " with two dims of one tensor on one mesh dim",
                    "; choose a processor count that divides these sizes"));
  fail_over_memory(r, options);
}

// A candidate left out by its memory's lower bound, kept in case it must be lowered after all
// (nothing fits: for the smallest peak, or to learn whether any layout is valid).
struct Skipped {
  std::vector<Dimension> mdims;  // open search: the class's canonical order
  MeshShape mesh;
  LayoutRules rules;
  std::int64_t bound = 0;
  bool fixed = false;  // constrained search: the lowering may refuse it; timed as given
};

// One search's state: the graph and options, the result being built, its unsplit analysis (for
// the model's FLOPs and the memory bound) and the candidates left out.
struct Search {
  Graph& graph;
  const Machine& machine;
  const SearchOptions& options;
  SearchResult& r;
  Counters unsplit;
  std::vector<Skipped> skipped;
  bool any_valid = false;

  bool bounded() const { return options.skip_by_memory_bound && options.memory_bytes > 0; }
  void poll() const {
    if (options.stop && options.stop())
      throw SearchStopped();
  }
  void report() const {
    if (!options.progress)
      return;
    SearchProgress p = options.progress_base;
    p.analyzed += r.analyzed;
    p.bounded += r.bounded;
    options.progress(p);
  }
  // The class's counters: the unsplit analysis again when it is that one (one processor).
  Counters lowered(const MeshShape& mesh, const LayoutRules& rules) const {
    poll();
    if (rules.rules().empty() && mesh.to_string() == "all:1")
      return unsplit;
    return analyze(graph, mesh, rules)->counters();
  }
  // Whether the class's lower bound is over the limit (then it is kept in `skipped`).
  bool skip(const std::vector<Dimension>& mdims, const MeshShape& mesh, const LayoutRules& rules,
            bool fixed) {
    if (!bounded())
      return false;
    const std::int64_t bound =
        memory_lower_bound(graph, mesh, rules, r.unsplit_live_peak_bytes, r.unsplit_variable_bytes);
    if (bound <= options.memory_bytes)
      return false;
    ++r.over_memory;
    ++r.bounded;
    skipped.push_back({mdims, mesh, rules, bound, fixed});
    report();
    return true;
  }
  void note_peak(const Counters& counters) {
    if (r.min_peak_bytes < 0 || counters.peak_bytes < r.min_peak_bytes)
      r.min_peak_bytes = counters.peak_bytes;
  }
};

double matmul_rate(const Machine& machine, const SearchOptions& options) {
  return options.time.bf16 && machine.matmul_bf16_flops > 0 ? machine.matmul_bf16_flops
                                                            : machine.matmul_flops;
}

// One class of the open search, lowered on its canonical order: counted, filtered by memory and
// timed in every order of its mesh dims.
void add_open(Search& S, const std::vector<Dimension>& mdims, const LayoutRules& rules) {
  SearchResult& r = S.r;
  ++r.analyzed;
  const Counters counters = S.lowered(MeshShape(mdims), rules);
  S.note_peak(counters);
  if (S.options.memory_bytes > 0 && counters.peak_bytes > S.options.memory_bytes)
    ++r.over_memory;
  else
    rank_orders(mdims, rules, counters, S.machine, S.options, r);
  S.report();
}

// One (mesh, layout) of a constrained search, lowered: counted, filtered by memory, timed on its
// mesh as given (the order is fixed). A layout the lowering refuses counts as not valid.
bool lower_fixed(Search& S, const MeshShape& mesh, const LayoutRules& rules) {
  SearchResult& r = S.r;
  const SearchOptions& options = S.options;
  Counters counters;
  try {
    counters = S.lowered(mesh, rules);
  } catch (const Error&) {
    ++r.tensor_conflicts;
    S.report();
    return false;
  }
  ++r.analyzed;
  S.note_peak(counters);
  if (options.memory_bytes > 0 && counters.peak_bytes > options.memory_bytes) {
    ++r.over_memory;
    S.report();
    return true;
  }
  Candidate cand;
  cand.mesh = mesh;
  cand.rules = rules;
  cand.counters = counters;
  cand.time = predict_step_time(cand.counters, cand.mesh, S.machine, options.time);
  cand.mfu =
      r.model_flops / (options.processors * cand.time.total_s * matmul_rate(S.machine, options));
  r.ranked.push_back(std::move(cand));
  S.report();
  return true;
}

// One (mesh, layout) of a constrained search: left out by its bound, or lowered. True when it is
// known to be valid.
bool add_fixed(Search& S, const MeshShape& mesh, const LayoutRules& rules) {
  if (S.skip({}, mesh, rules, true))
    return false;
  return lower_fixed(S, mesh, rules);
}

// After the candidates: when nothing fits, the classes left out are lowered after all, by their
// bound from the least, while one could have a smaller peak than the smallest found (below
// exact_min_below) or no class is known to be valid yet.
void settle_skipped(Search& S) {
  SearchResult& r = S.r;
  auto& skipped = S.skipped;
  size_t i = 0;
  if (r.ranked.empty()) {
    std::stable_sort(skipped.begin(), skipped.end(),
                     [](const Skipped& a, const Skipped& b) { return a.bound < b.bound; });
    for (; i < skipped.size(); ++i) {
      const Skipped& k = skipped[i];
      const std::int64_t known =
          r.min_peak_bytes < 0 ? std::numeric_limits<std::int64_t>::max() : r.min_peak_bytes;
      if (S.any_valid && k.bound >= std::min(known, S.options.exact_min_below))
        break;
      --r.over_memory;  // counted again as it turns out
      --r.bounded;
      if (k.fixed) {
        S.any_valid = lower_fixed(S, k.mesh, k.rules) || S.any_valid;
      } else {
        add_open(S, k.mdims, k.rules);
        S.any_valid = true;
      }
    }
  }
  for (; i < skipped.size(); ++i)
    if (r.min_peak_bytes < 0 || skipped[i].bound < r.min_peak_bytes) {
      r.min_peak_exact = false;
      if (r.min_peak_bytes < 0)
        r.min_peak_bytes = skipped[i].bound;
    }
}

// `layout: auto` on a given mesh: every mapping of the splittable dims onto its dims.
void search_on_mesh(Search& S, const std::vector<std::int64_t>& sizes) {
  SearchResult& r = S.r;
  const MeshShape& mesh = *S.options.mesh;
  const int D = static_cast<int>(r.dims.size()), k = mesh.ndims();
  std::vector<std::int64_t> msizes;
  for (const auto& d : mesh.dims())
    msizes.push_back(d.size);
  const std::set<Mask> shared = shared_dims(S.graph, r.dims);
  r.meshes = 1;
  std::int64_t total = 1;
  for (int i = 0; i < D; ++i)
    total *= k + 1;
  for (std::int64_t code = 0; code < total; ++code) {
    Mapping m;
    m.masks.assign(static_cast<size_t>(k), 0);
    m.target.assign(static_cast<size_t>(D), -1);
    std::vector<std::pair<std::string, std::string>> rule_list;
    for (std::int64_t c = code, i = 0; i < D; ++i, c /= k + 1)
      if (const int digit = static_cast<int>(c % (k + 1)); digit > 0) {
        m.masks[static_cast<size_t>(digit - 1)] |= Mask{1} << i;
        m.target[static_cast<size_t>(i)] = digit - 1;
        rule_list.emplace_back(r.dims[static_cast<size_t>(i)], mesh[digit - 1].name);
      }
    ++r.mappings;
    if (!divisible(m, sizes, msizes)) {
      ++r.not_divisible;
    } else if (conflicts(m, shared)) {
      ++r.tensor_conflicts;
    } else {
      S.any_valid = add_fixed(S, mesh, LayoutRules(rule_list)) || S.any_valid;
    }
  }
}

void factor_into(std::int64_t n, size_t k, std::vector<std::int64_t>& cur,
                 std::vector<std::vector<std::int64_t>>& out) {
  if (cur.size() + 1 == k) {
    cur.push_back(n);
    out.push_back(cur);
    cur.pop_back();
    return;
  }
  for (std::int64_t f = 1; f <= n; ++f)
    if (n % f == 0) {
      cur.push_back(f);
      factor_into(n / f, k, cur, out);
      cur.pop_back();
    }
}

// `mesh: auto` with a given layout: every mesh of `processors` over the mesh dims the layout names
// on which each split tensor dim divides.
void search_for_layout(Search& S) {
  SearchResult& r = S.r;
  const LayoutRules& rules = *S.options.rules;
  std::vector<std::string> names;
  for (const auto& [tensor_dim, mesh_dim] : rules.rules())
    if (std::find(names.begin(), names.end(), mesh_dim) == names.end())
      names.push_back(mesh_dim);
  if (names.empty())
    names.push_back("batch");
  std::map<std::string, std::int64_t> size_of;
  for (int t = 0; t < S.graph.num_tensors(); ++t)
    for (const auto& d : S.graph.tensor_info(t).shape.dims()) {
      const auto [it, added] = size_of.emplace(d.name, d.size);
      if (!added)
        it->second = std::gcd(it->second, d.size);
    }
  std::vector<std::vector<std::int64_t>> meshes;
  std::vector<std::int64_t> cur;
  factor_into(S.options.processors, names.size(), cur, meshes);
  for (const auto& msizes : meshes) {
    ++r.meshes;
    ++r.mappings;
    std::vector<Dimension> mdims;
    for (size_t a = 0; a < names.size(); ++a)
      mdims.push_back({names[a], msizes[a]});
    const MeshShape mesh(mdims);
    bool ok = true;
    for (const auto& [tensor_dim, mesh_dim] : rules.rules())
      if (const auto it = size_of.find(tensor_dim); it != size_of.end())
        ok = ok && it->second % msizes[static_cast<size_t>(mesh.index_of(mesh_dim))] == 0;
    if (!ok) {
      ++r.not_divisible;
      continue;
    }
    S.any_valid = add_fixed(S, mesh, rules) || S.any_valid;
  }
}

}  // namespace

std::int64_t memory_lower_bound(const Graph& graph, const MeshShape& mesh, const LayoutRules& rules,
                                std::int64_t unsplit_live_peak, std::int64_t unsplit_variables) {
  // The variables as the lowering counts them (Lowering::add_variable): each slice in its storage
  // type, float32 unless stored as bfloat16.
  std::int64_t variables = 0;
  try {
    for (int i : graph.variable_ops()) {
      const TensorInfo& info = graph.tensor_info(graph.op(i).outputs[0]);
      const DType stored =
          graph.variable_attrs(i).storage == DType::bfloat16 ? DType::bfloat16 : DType::float32;
      variables += TensorLayout(info.shape, rules, mesh, info.name).slice_shape().num_elements() *
                   static_cast<std::int64_t>(dtype_bytes(stored));
    }
  } catch (const Error&) {
    return 0;  // not a valid layout: the lowering will say so
  }
  return variables + std::max<std::int64_t>(0, unsplit_live_peak - unsplit_variables) /
                         std::max(1, mesh.num_processors());
}

SearchResult search_layouts(Graph& graph, const Machine& machine, const SearchOptions& options) {
  const std::string where = "mtk::cost::search_layouts";
  machine.validate();
  if (options.processors < 1)
    fail(where, cat("processor count ", options.processors, " must be >= 1"));
  if (options.max_mesh_dims < 1 || options.max_mesh_dims > 4)
    fail(where, cat("max_mesh_dims ", options.max_mesh_dims, " must be in 1..4"));
  SearchResult r;
  Search S{graph, machine, options, r, {}, {}, false};
  const std::vector<std::int64_t> sizes = choose_dims(graph, options, r);
  const int D = static_cast<int>(r.dims.size());
  const std::set<Mask> shared = shared_dims(graph, r.dims);
  const auto batch_it = std::find(r.dims.begin(), r.dims.end(), "batch");
  const int batch_bit = batch_it == r.dims.end() ? -1 : static_cast<int>(batch_it - r.dims.begin());
  // The model's matmul FLOPs on one processor, for MFU; its live peak bounds every candidate's.
  S.poll();
  S.unsplit = analyze(graph, MeshShape::parse("all:1"), LayoutRules())->counters();
  r.model_flops = S.unsplit.flops_of(FlopClass::einsum);
  r.unsplit_live_peak_bytes = S.unsplit.live_peak_bytes;
  r.unsplit_variable_bytes = S.unsplit.variable_bytes;
  r.min_peak_bytes = -1;
  if (options.mesh && options.mesh->num_processors() != options.processors)
    fail(where, cat("mesh ", options.mesh->to_string(), " has ", options.mesh->num_processors(),
                    " processors, not ", options.processors));
  if (options.mesh && options.rules)
    fail(where, "a search needs the mesh or the layout open; both were given");
  if (options.mesh)
    search_on_mesh(S, sizes);
  else if (options.rules)
    search_for_layout(S);
  const bool open = !options.mesh && !options.rules;
  for (const auto& msizes :
       open ? impl::unordered_factorizations(options.processors, options.max_mesh_dims)
            : std::vector<std::vector<std::int64_t>>{}) {
    ++r.meshes;
    const int k = options.processors == 1 ? 0 : static_cast<int>(msizes.size());
    std::int64_t total = 1;  // every assignment dims -> {none, mesh dim 0..k-1}
    for (int i = 0; i < D; ++i)
      total *= k + 1;
    Mapping m;
    for (std::int64_t code = 0; code < total; ++code) {
      if (!decode_mapping(code, D, msizes, k, m))
        continue;
      ++r.mappings;
      if (!divisible(m, sizes, msizes)) {
        ++r.not_divisible;
        continue;
      }
      if (conflicts(m, shared)) {
        ++r.tensor_conflicts;
        continue;
      }
      // Analyse the class once, on its canonical order.
      const std::vector<std::string> names = mesh_dim_names(m.masks, batch_bit);
      std::vector<Dimension> mdims;
      for (int a = 0; a < k; ++a)
        mdims.push_back({names[static_cast<size_t>(a)], msizes[static_cast<size_t>(a)]});
      if (k == 0)
        mdims.push_back({"all", 1});
      std::vector<std::pair<std::string, std::string>> rule_list;
      for (int i = 0; i < D; ++i)
        if (m.target[static_cast<size_t>(i)] >= 0)
          rule_list.emplace_back(r.dims[static_cast<size_t>(i)],
                                 names[static_cast<size_t>(m.target[static_cast<size_t>(i)])]);
      const LayoutRules rules(rule_list);
      S.any_valid = true;
      if (!S.skip(mdims, MeshShape(mdims), rules, false))
        add_open(S, mdims, rules);
    }
  }
  settle_skipped(S);
  const bool any_valid = S.any_valid;
  if (r.ranked.empty() && (!any_valid || options.over_memory_fails))
    fail_no_candidate(r, options, sizes, any_valid);
  std::stable_sort(r.ranked.begin(), r.ranked.end(), [](const Candidate& a, const Candidate& b) {
    return std::make_tuple(a.time.total_s, a.mesh.ndims(), a.mesh.to_string(),
                           a.rules.to_string()) <
           std::make_tuple(b.time.total_s, b.mesh.ndims(), b.mesh.to_string(), b.rules.to_string());
  });
  return r;
}

void fail_over_memory(const SearchResult& r, const SearchOptions& options) {
  fail("mtk::cost::search_layouts",
       cat("every one of the ", r.analyzed + r.bounded, " valid layouts on ", options.processors,
           " processors needs more than the memory limit of ", options.memory_bytes,
           " bytes per processor; the smallest peak is ", r.min_peak_bytes,
           " bytes; use more processors or more memory"));
}

}  // namespace mtk::cost
