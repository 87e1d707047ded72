#include <mtk/base/allocation.hpp>
#include <mtk/base/error.hpp>
#include <mtk/base/runtime_options.hpp>
#include <mtk/kernels/bfloat16_storage.hpp>
#include <mtk/parallel/collectives.hpp>
#include <mtk/parallel/halo.hpp>
#include <mtk/runtime/program.hpp>
#include <mtk/runtime/reductions_in_flight.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <tuple>

namespace mtk {

void Program::Buffer::fail_dtype(DType asked) const {
  fail("mtk::Program::Buffer::view",
       cat("buffer holds ", dtype_name(dtype_), " values, not ", dtype_name(asked)));
}

Program::Program(const Mesh& mesh, const ProgramOptions& options)
    : mesh_(mesh), reuse_buffers_(options.buffer_reuse) {
  pool_->set_planning(options.buffer_plan);
}

void Program::set_buffer_reuse(bool on) {
  reuse_buffers_ = on;
  if (!on)
    pool_->clear();
}

void Program::adopt_variable_storage(const Buffer& b) {
  if (!reuse_buffers_ || b.empty())
    return;
  visit_storage_dtype(b.dtype(), [&](auto t) { pool_->adopt(b.view<decltype(t)>()); });
}

const TensorLayout& Program::layout(const Tensor& t) const {
  return layouts_.at(static_cast<size_t>(t.id()));
}

namespace {

template <class T>
Kokkos::View<T*> upload(const T* host, std::int64_t n, const std::string& label) {
  Kokkos::View<T*> v = uninitialized_view<T>(label, n);
  auto h = Kokkos::create_mirror_view(v);
  for (size_t k = 0; k < static_cast<size_t>(n); ++k)
    h(k) = host[k];
  Kokkos::deep_copy(v, h);
  return v;
}

template <class T>
std::vector<T> download(const Kokkos::View<T*>& v) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  return std::vector<T>(h.data(), h.data() + h.extent(0));
}

// Row-major copy of the block of `global` (shape gs) starting at `origin` with shape ls: a
// contiguous run per row of the dims before the trailing ones the block holds whole.
template <class T>
std::vector<T> host_slice(const T* global, const Shape& gs, const Shape& ls,
                          const std::vector<std::int64_t>& origin) {
  std::vector<T> out(static_cast<size_t>(ls.num_elements()));
  const int r = ls.rank();
  if (out.empty() || r == 0) {
    std::copy(global, global + out.size(), out.data());
    return out;
  }
  const auto gstr = gs.strides();
  int first = r - 1;  // the run: dims [first, r), those after `first` whole
  std::int64_t run = ls[r - 1].size;
  while (first > 0 && ls[first].size == gs[first].size) {
    --first;
    run *= ls[first].size;
  }
  std::vector<std::int64_t> idx(static_cast<size_t>(first), 0);
  const std::int64_t rows = ls.num_elements() / run;
  for (std::int64_t row = 0; row < rows; ++row) {
    std::int64_t off = origin[static_cast<size_t>(first)] * gstr[static_cast<size_t>(first)];
    for (int i = 0; i < first; ++i)
      off += (idx[static_cast<size_t>(i)] + origin[static_cast<size_t>(i)]) *
             gstr[static_cast<size_t>(i)];
    std::copy(global + off, global + off + run, out.data() + row * run);
    for (int i = first - 1; i >= 0; --i) {  // the next row
      if (++idx[static_cast<size_t>(i)] < ls[i].size)
        break;
      idx[static_cast<size_t>(i)] = 0;
    }
  }
  return out;
}

}  // namespace

Program::Buffer Program::slice_of_host(int tensor, const HostTensor& global) const {
  const auto& l = layouts_.at(static_cast<size_t>(tensor));
  const auto& info = graph_->tensor_info(tensor);
  if (global.shape() != l.shape() || global.dtype() != info.dtype)
    fail("mtk::Program::run",
         cat("feed for '", info.name, "' has shape ", global.shape().to_string(), " ",
             dtype_name(global.dtype()), "; expected ", l.shape().to_string(), " ",
             dtype_name(info.dtype)));
  if (global.size() != l.shape().num_elements())
    fail("mtk::Program::run", cat("feed for '", info.name, "' holds ", global.size(), " values; ",
                                  l.shape().to_string(), " needs ", l.shape().num_elements()));
  const auto origin = l.slice_origin(mesh_.coordinates());
  return visit_dtype(info.dtype, [&](auto t) {
    using T = decltype(t);
    const auto slice = host_slice(global.data<T>(), l.shape(), l.slice_shape(), origin);
    return Buffer(upload(slice.data(), static_cast<std::int64_t>(slice.size()), info.name));
  });
}

// A local feed is this rank's slice along every split dim, or whole along some of them (an app
// that reads its batch rows feeds them with every position; a split length is sliced here).
Program::Buffer Program::slice_of_local(int tensor, const HostTensor& local) const {
  const auto& l = layouts_.at(static_cast<size_t>(tensor));
  const auto& info = graph_->tensor_info(tensor);
  const Shape& ls = l.slice_shape();
  const Shape& hs = local.shape();
  bool fits = hs.rank() == ls.rank() && local.dtype() == info.dtype;
  std::vector<std::int64_t> origin(static_cast<size_t>(ls.rank()), 0);
  const auto slice_origin = l.slice_origin(mesh_.coordinates());
  for (int i = 0; fits && i < ls.rank(); ++i) {
    fits =
        hs[i].name == ls[i].name && (hs[i].size == ls[i].size || hs[i].size == l.shape()[i].size);
    if (fits && hs[i].size != ls[i].size)
      origin[static_cast<size_t>(i)] = slice_origin[static_cast<size_t>(i)];
  }
  if (!fits || local.size() != hs.num_elements())
    fail("mtk::Program::run", cat("local feed for '", info.name, "' has shape ", hs.to_string(),
                                  " ", dtype_name(local.dtype()), "; this rank's slice is ",
                                  ls.to_string(), " ", dtype_name(info.dtype),
                                  " (each dim its slice, or whole: ", l.shape().to_string(), ")"));
  return visit_dtype(info.dtype, [&](auto v) {
    using T = decltype(v);
    if (hs == ls)
      return Buffer(upload(local.data<T>(), local.size(), "feed"));
    const auto slice = host_slice(local.data<T>(), hs, ls, origin);
    return Buffer(upload(slice.data(), static_cast<std::int64_t>(slice.size()), info.name));
  });
}

HostTensor Program::gather_global(int tensor, const Buffer& buffer) {
  const auto& l = layouts_.at(static_cast<size_t>(tensor));
  return visit_dtype(graph_->tensor_info(tensor).dtype, [&](auto t) {
    using T = decltype(t);
    Kokkos::View<T*> v = buffer.view<T>();
    const auto& pend = pending_.at(static_cast<size_t>(tensor));
    if (!pend.empty()) {  // finish a deferred partial sum on a copy
      Kokkos::View<T*> copy =
          uninitialized_view<T>("mtk::fetch", static_cast<std::int64_t>(v.extent(0)));
      Kokkos::deep_copy(copy, v);
      allreduce<T>(mesh_, pend, copy);
      v = copy;
    }
    Shape cur = l.slice_shape();
    for (int i = 0; i < l.shape().rank(); ++i) {
      const int a = l.mesh_axis(i);
      if (a < 0)
        continue;
      v = allconcat<T>(mesh_, a, cur, i, v);
      auto dims = cur.dims();
      dims[static_cast<size_t>(i)] = l.shape()[i];
      cur = Shape(dims);
    }
    return HostTensor(l.shape(), download(v));
  });
}

// Every rank's placeholders from `feeds` (global values) or `local_feeds` (its slices); all ranks
// fail together when one is missing or has the wrong shape.
void Program::feed_placeholders(Buffers& buffers, const std::map<int, HostTensor>& feeds,
                                const std::map<int, HostTensor>& local_feeds) const {
  agree_on_failure(mesh_.comm(), [&] {
    for (int t : placeholders_) {
      auto g = feeds.find(t);
      auto l = local_feeds.find(t);
      if (g != feeds.end()) {
        buffers[static_cast<size_t>(t)] = slice_of_host(t, g->second);
      } else if (l != local_feeds.end()) {
        buffers[static_cast<size_t>(t)] = slice_of_local(t, l->second);
      } else {
        fail("mtk::Program::run",
             cat("placeholder '", graph_->tensor_info(t).name, "' ",
                 layouts_[static_cast<size_t>(t)].shape().to_string(), " was not fed"));
      }
    }
  });
}

std::vector<HostTensor> Program::run(const std::map<int, HostTensor>& feeds,
                                     const std::vector<Tensor>& fetches,
                                     const std::map<int, HostTensor>& local_feeds) {
  if (dry_)
    fail("mtk::Program::run", "this program was built by mtk::analyze() for sizing only");
  Kokkos::Profiling::pushRegion("mtk::Program::run");
  const BufferPoolScope pool_scope(reuse_buffers_ ? pool_.get() : nullptr);
  if (reuse_buffers_)
    pool_->begin_run();
  using clock = std::chrono::steady_clock;
  auto mark = clock::now();
  auto charge = [&](const char* what, const Step* step = nullptr, const char* kind = nullptr) {
    if (!profiling_)
      return;
    Kokkos::fence();
    const auto now = clock::now();
    const double dt = std::chrono::duration<double>(now - mark).count();
    time_split_[what] += dt;
    if (step) {
      if (step->kind == reduction_wait_kind() || step->kind == gather_wait_kind())
        time_split_["collective waits"] += dt;
      time_by_kind_[step->kind.name()] += dt;
      if (runtime_options().profile_steps())  // MTK_PROFILE_STEPS
        time_by_kind_["step: " + step->what] += dt;
    }
    if (kind)
      time_by_kind_[kind] += dt;
    mark = now;
  };
  std::vector<Buffer> buffers(layouts_.size());
  std::vector<bool> keep(layouts_.size(), false);
  fetching_.clear();
  for (const auto& t : fetches) {
    keep.at(static_cast<size_t>(t.id())) = true;
    fetching_.insert(t.id());
  }
  for (const auto& [t, v] : variables_) {
    if (v.dtype() != graph_->tensor_info(t).dtype)
      continue;  // bfloat16 storage: a step of the program reads it as a float32 copy
    buffers[static_cast<size_t>(t)] = v;
    keep[static_cast<size_t>(t)] = true;
  }
  feed_placeholders(buffers, feeds, local_feeds);
  const std::set<int> keep_old = fetched_variables(fetches);
  charge("other");
  if (overlap_)
    overlap_->drain();    // left in flight by a failed run
  bf16_copies_->clear();  // left by a failed run
  for (size_t s = 0; s < steps_.size(); ++s) {
    if (overlap_ && overlap_->before_step(steps_[s], buffers))
      charge("collectives");
    for (const auto& [out, in] : steps_[s].in_place)  // mtk/lower/in_place_updates.hpp
      if (!keep_old.count(in))                        // and in_place_activations.hpp
        buffers[static_cast<size_t>(out)] = buffers[static_cast<size_t>(in)];
    forget_bf16_copies(steps_[s].writes, buffers);  // storage the step rewrites in place
    try {
      steps_[s].run(buffers, space_);
    } catch (const AllocationError& e) {
      throw AllocationError(
          cat(e.what(), "; in step ", s, " of ", steps_.size(), ": ", steps_[s].what));
    }
    charge(steps_[s].category == Category::collective ? "collectives"
           : steps_[s].category == Category::other    ? "other"
                                                      : "compute",
           &steps_[s]);
    if (overlap_ && overlap_->in_flight()) {  // MPI_Test between steps (time_by_kind())
      overlap_->progress();
      charge("collectives", nullptr, "allreduce_progress");
    }
    if (halos_ && !steps_[s].gemms.empty() && halos_->in_flight()) {  // after the long steps
      halos_->progress();
      charge("collectives", nullptr, "halo_progress");
    }
    if (bf16_kept_tensors_ > 0)
      forget_bf16_copies(bf16_drop_after_[s], buffers);
    // Free each buffer after the last use of its value, with its bf16 copy (the pool may hand
    // its storage to another tensor).
    forget_dead_bf16_copies(steps_[s], deaths_[s], buffers);
    for (int t : deaths_[s])
      if (!keep[static_cast<size_t>(t)])
        buffers[static_cast<size_t>(t)] = Buffer();
  }
  bf16_copies_->clear();
  std::vector<HostTensor> out;
  for (const auto& t : fetches)
    out.push_back(gather_global(t.id(), buffers[static_cast<size_t>(t.id())]));
  for (auto& a : assigns_)
    a.run(buffers, space_);
  charge("other");
  if (reuse_buffers_)
    pool_->end_run();
  ++step_;
  Kokkos::Profiling::popRegion();
  return out;
}

int Program::in_place_activations() const {
  int n = 0;
  for (const auto& st : steps_)
    for (const auto& pair : st.in_place)
      n += in_place_aliases_.count(pair.second) ? 0 : 1;
  return n;
}

std::set<int> Program::fetched_variables(const std::vector<Tensor>& fetches) const {
  std::set<int> fetched;
  for (const auto& [var, names] : in_place_aliases_)
    for (const auto& t : fetches)
      if (std::find(names.begin(), names.end(), t.id()) != names.end())
        fetched.insert(var);
  // The inputs of in-place elementwise steps whose group of names holds a fetched tensor.
  if (!in_place_group_.empty() && !fetches.empty()) {
    std::set<int> groups;
    for (const auto& t : fetches)
      groups.insert(in_place_group_.at(static_cast<size_t>(t.id())));
    for (const auto& st : steps_)
      for (const auto& [out, in] : st.in_place)
        if (!in_place_aliases_.count(in) && groups.count(in_place_group_[static_cast<size_t>(in)]))
          fetched.insert(in);
  }
  return fetched;
}

// A dead input's storage may live on as the step's in-place output, with the copy the step left.
void Program::forget_dead_bf16_copies(const Step& step, const std::vector<int>& dead,
                                      const Buffers& buffers) {
  if (bf16_kept_tensors_ == 0)
    return;
  for (int t : dead) {
    const void* at = buffers[static_cast<size_t>(t)].data();
    bool lives_on = false;
    for (int w : step.bf16_writes)
      lives_on = lives_on || (at && buffers[static_cast<size_t>(w)].data() == at);
    if (!lives_on)
      bf16_copies_->forget(at);
  }
}

void Program::forget_bf16_copies(const std::vector<int>& tensors, const Buffers& buffers) {
  if (bf16_kept_tensors_ > 0)
    for (int t : tensors)
      bf16_copies_->forget(buffers[static_cast<size_t>(t)].data());
}

kernels::Bf16Copies* Program::bf16_copies_for(int t) const {
  if (bf16_kept_tensors_ == 0 || !bf16_keep_[static_cast<size_t>(t)])
    return nullptr;
  return bf16_copies_.get();
}

bool Program::bf16_bits_only(int t) const {
  return bf16_copies_for(t) && static_cast<size_t>(t) < bf16_bits_only_.size() &&
         bf16_bits_only_[static_cast<size_t>(t)] && !fetching_.count(t);
}

int Program::bf16_bits_only_tensors() const {
  return bf16_kept_tensors_ == 0
             ? 0
             : static_cast<int>(std::count(bf16_bits_only_.begin(), bf16_bits_only_.end(), true));
}

kernels::Bf16Reuse Program::bf16_reuse(int a, int b) const {
  if (bf16_kept_tensors_ == 0)
    return {};
  return {bf16_copies_.get(), bf16_keep_[static_cast<size_t>(a)],
          bf16_keep_[static_cast<size_t>(b)]};
}

std::int64_t Program::overlapped_reductions() const {
  return overlap_ ? static_cast<std::int64_t>(overlap_->buckets().size()) : 0;
}

std::vector<std::string> Program::variable_names() const {
  return variable_order_;
}

const TensorLayout& Program::variable_layout(const std::string& name) const {
  auto it = variable_tensor_.find(name);
  if (it == variable_tensor_.end())
    fail("mtk::Program::variable_layout", cat("no variable '", name, "'"));
  return layouts_[static_cast<size_t>(it->second)];
}

Kokkos::View<float*> Program::variable_slice(const std::string& name) const {
  auto it = variable_tensor_.find(name);
  if (it == variable_tensor_.end())
    fail("mtk::Program::variable_slice", cat("no variable '", name, "'"));
  const Buffer& b = variables_.at(it->second);
  // Only float32 variables have a float slice; the others answer an empty View.
  return b.dtype() == DType::float32 ? b.view<float>() : Kokkos::View<float*>();
}

void Program::set_variable_slice(const std::string& name, const Kokkos::View<float*>& slice) {
  auto it = variable_tensor_.find(name);
  if (it == variable_tensor_.end())
    fail("mtk::Program::set_variable_slice", cat("no variable '", name, "'"));
  const auto& ls = layouts_[static_cast<size_t>(it->second)].slice_shape();
  if (static_cast<std::int64_t>(slice.extent(0)) != ls.num_elements())
    fail("mtk::Program::set_variable_slice",
         cat("variable '", name, "' slice ", ls.to_string(), " needs ", ls.num_elements(),
             " values, got ", slice.extent(0)));
  Buffer& storage = variables_[it->second];
  if (storage.dtype() == DType::bfloat16) {  // rounded into the live storage (assign reads it)
    kernels::store_bfloat16(space_, slice, 0.f, storage.view<std::uint16_t>());
    space_.fence();
    return;
  }
  storage = Buffer(slice);
  adopt_variable_storage(storage);
}

DType Program::variable_storage_dtype(const std::string& name) const {
  auto it = variable_tensor_.find(name);
  if (it == variable_tensor_.end())
    fail("mtk::Program::variable_storage_dtype", cat("no variable '", name, "'"));
  const Buffer& b = variables_.at(it->second);
  if (!b.empty())
    return b.dtype();
  // Built by analyze(): no storage, the variable op says.
  const TensorInfo& info = graph_->tensor_info(it->second);
  const DType stored = graph_->variable_attrs(info.producer).storage;
  return stored == DType::bfloat16 ? stored : info.dtype;
}

Kokkos::View<float*> Program::variable_slice_float32(const std::string& name) const {
  if (variable_storage_dtype(name) != DType::bfloat16)
    return variable_slice(name);
  const Buffer& b = variables_.at(variable_tensor_.at(name));
  return kernels::widen_bfloat16(space_, b.view<std::uint16_t>());
}

HostTensor Program::variable_value(const std::string& name) {
  auto it = variable_tensor_.find(name);
  if (it == variable_tensor_.end())
    fail("mtk::Program::variable_value", cat("no variable '", name, "'"));
  const Buffer& b = variables_.at(it->second);
  if (b.dtype() == DType::bfloat16)
    return gather_global(it->second, Buffer(variable_slice_float32(name)));
  return gather_global(it->second, b);
}

std::string Program::explain() const {
  auto human = [](double b) {
    char buf[64];
    const char* unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (b >= 1024 && u < 4) {
      b /= 1024;
      ++u;
    }
    std::snprintf(buf, sizeof buf, "%.2f %s", b, unit[u]);
    return std::string(buf);
  };
  const MeshShape& shape = layouts_.empty() ? mesh_.shape() : layouts_.front().mesh();
  std::string s = cat("MTK program on mesh ", shape.to_string(), dry_ ? " (analysis)" : "",
                      ", rank ", dry_ ? 0 : mesh_.rank(), " (", steps_.size(), " steps, ",
                      assigns_.size(), " assignments)\n");
  s += "  variables (layout):\n";
  for (const auto& n : variable_order_)
    s += cat("    ", n, " ", layouts_[static_cast<size_t>(variable_tensor_.at(n))].to_string(),
             "\n");
  s += "  FLOPs per run (this rank):\n";
  for (const auto& [k, v] : counters_.flops) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.4g", v);
    s += cat("    ", to_string(k), ": ", buf, "\n");
  }
  s += "  communication per run (this rank, payload bytes / calls):\n";
  if (counters_.comm_bytes.empty())
    s += "    none\n";
  for (const auto& [k, v] : counters_.comm_bytes)
    s += cat("    ", to_string(k), ": ", human(static_cast<double>(v)), " in ",
             counters_.comm_calls.at(k), " calls\n");
  s += cat("  memory: variables ", human(static_cast<double>(counters_.variable_bytes)), ", peak ",
           human(static_cast<double>(counters_.peak_bytes)), "\n");
  s += "  collectives and relayouts, in order:\n";
  for (const auto& st : steps_)
    if (st.category == Category::collective || st.communicates)
      s += "    " + st.what + "\n";
  return s;
}

}  // namespace mtk
