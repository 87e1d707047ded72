#include <algorithm>
#include <mtk/base/error.hpp>
#include <mtk/kernels/kernels.hpp>
#include <mtk/lower/lowering.hpp>
#include <mtk/parallel/collectives.hpp>
#include <mtk/parallel/relayout.hpp>
#include <set>

namespace mtk {

using kernels::FView;
using kernels::IView;
using Buffers = std::vector<Program::Buffer>;

/// Builds a Program op by op; see mtk_lowering.hpp for the rules.
class Lowering {
 public:
  // `shape`/`coords`: the mesh and the processor to lower for. They equal `mesh`'s own unless
  // `dry` (analysis only: nothing is allocated and the program must not run).
  Lowering(Graph& g, const Mesh& mesh, const LayoutRules& rules, const MeshShape& shape,
           const std::vector<int>& coords, bool dry)
      : g_(g),
        mesh_(mesh),
        shape_(shape),
        coords_(coords),
        dry_(dry),
        rules_(rules),
        p_(new Program(mesh)) {
    p_->dry_ = dry;
  }

  std::unique_ptr<Program> run() {
    p_->graph_ = &g_;
    for (int t = 0; t < g_.num_tensors(); ++t) {
      const auto& info = g_.tensor_info(t);
      p_->layouts_.emplace_back(info.shape, rules_, shape_, info.name);
    }
    pending_.assign(static_cast<size_t>(g_.num_tensors()), {});
    for (int i = 0; i < g_.num_ops(); ++i)
      lower_op(i);
    p_->pending_ = pending_;
    finish();
    return std::move(p_);
  }

 private:
  // ------------------------------------------------------------------ bookkeeping helpers
  const TensorLayout& L(int t) const { return p_->layouts_[static_cast<size_t>(t)]; }
  Shape local(int t) const { return L(t).slice_shape(); }
  std::vector<int> axes(int t) const { return L(t).mesh_axes(); }
  const Operation& op() const { return g_.op(op_index_); }
  std::string label() const { return cat(op_kind_name(op().kind), " '", op().name, "'"); }
  std::string describe(int t) const {
    const std::string name = t < g_.num_tensors() ? g_.tensor_info(t).name : "temporary";
    return cat("'", name, "' ", L(t).to_string());
  }
  bool is_float(int t) const { return L_dtype(t) == DType::float32; }
  DType L_dtype(int t) const {
    return t < g_.num_tensors() ? g_.tensor_info(t).dtype : temp_dtype_.at(t);
  }

  void add_step(const std::string& what, std::vector<int> reads, std::vector<int> writes,
                std::function<void(Buffers&)> fn, const std::string& flop_kind = "",
                double flops = 0, Program::Category category = Program::Category::compute) {
    p_->steps_.push_back({what, category, std::move(reads), std::move(writes), std::move(fn)});
    if (!flop_kind.empty())
      p_->counters_.flops[flop_kind] += flops;
  }

  void count_comm(const std::string& kind, std::int64_t bytes) {
    p_->counters_.comm_bytes[kind] += bytes;
    p_->counters_.comm_calls[kind] += 1;
  }

  // A temporary buffer (not a graph tensor) with its own layout.
  int new_temp(Shape shape, const std::vector<int>& ax, DType dtype) {
    int id = static_cast<int>(p_->layouts_.size());
    p_->layouts_.emplace_back(shape, ax, shape_, "tmp");
    pending_.emplace_back();
    temp_dtype_[id] = dtype;
    return id;
  }

  // Emits the allreduce of a pending partial sum, in place.
  void materialize(int t) {
    auto ax = pending_[static_cast<size_t>(t)];
    if (ax.empty())
      return;
    pending_[static_cast<size_t>(t)].clear();
    count_comm("allreduce", local(t).num_elements() * 4);
    const Mesh mesh = mesh_;
    std::string names;
    for (int a : ax)
      names += (names.empty() ? "" : ",") + shape_[a].name;
    add_step(
        cat("allreduce(sum) of ", describe(t), " over ", names), {t}, {t},
        [mesh, ax, t](Buffers& b) { allreduce<float>(mesh, ax, b[static_cast<size_t>(t)].f); }, "",
        0, Program::Category::collective);
  }

  // A copy of tensor t laid out with per-dim axes `to` (t itself when nothing changes).
  int relayout(int t, const std::vector<int>& to) {
    if (to == axes(t))
      return t;
    materialize(t);
    const Shape& s = L(t).shape();
    auto plan = plan_relayout(s, axes(t), to, shape_);
    int out = new_temp(s, to, L_dtype(t));
    for (const auto& m : plan) {
      const std::int64_t bytes = m.local_before.num_elements() * 4;
      if (m.kind == RelayoutMove::Kind::allconcat)
        count_comm("allconcat", bytes);
      if (m.kind == RelayoutMove::Kind::alltoall)
        count_comm("alltoall", bytes);
    }
    const Mesh mesh = mesh_;
    const bool f = is_float(t);
    add_step(
        cat("relayout ", describe(t), ": ", describe_relayout(plan, shape_)), {t}, {out},
        [mesh, plan, t, out, f](Buffers& b) {
          auto& src = b[static_cast<size_t>(t)];
          auto& dst = b[static_cast<size_t>(out)];
          if (f)
            dst.f = run_relayout<float>(mesh, plan, src.f);
          else
            dst.i = run_relayout<std::int32_t>(mesh, plan, src.i);
        },
        "", 0, Program::Category::collective);
    return out;
  }

  // t with `dims` made whole.
  int gather_dims(int t, const std::set<std::string>& dims) {
    auto to = axes(t);
    for (int i = 0; i < L(t).shape().rank(); ++i)
      if (dims.count(L(t).shape()[i].name))
        to[static_cast<size_t>(i)] = -1;
    return relayout(t, to);
  }

  std::set<int> split_axes_of(int t) const {
    std::set<int> s;
    for (int a : axes(t))
      if (a >= 0)
        s.insert(a);
    return s;
  }

  static bool intersects(const std::vector<int>& a, const std::set<int>& b) {
    for (int x : a)
      if (b.count(x))
        return true;
    return false;
  }

  void require_whole(int t, const std::string& dim) {
    int i = L(t).shape().index_of(dim);
    if (i >= 0 && L(t).mesh_axis(i) >= 0 && shape_[L(t).mesh_axis(i)].size > 1)
      fail("mtk::lower",
           cat(label(), " needs dimension '", dim, "' whole, but tensor ", describe(t),
               " splits it over mesh dimension '", shape_[L(t).mesh_axis(i)].name, "' of size ",
               shape_[L(t).mesh_axis(i)].size, "; change the layout rule for '", dim, "'"));
  }

  // ------------------------------------------------------------------------ op handlers
  void lower_op(int i) {
    op_index_ = i;
    const Operation& o = op();
    switch (o.kind) {
      case OpKind::variable:
        lower_variable();
        break;
      case OpKind::placeholder:
        p_->placeholders_.push_back(o.outputs[0]);
        break;
      case OpKind::constant:
        lower_constant();
        break;
      case OpKind::range:
        lower_range();
        break;
      case OpKind::random_uniform:
      case OpKind::random_normal:
        lower_random();
        break;
      case OpKind::unary:
        lower_unary();
        break;
      case OpKind::binary:
        lower_binary();
        break;
      case OpKind::compare:
        lower_compare();
        break;
      case OpKind::where:
        lower_where();
        break;
      case OpKind::cast:
        lower_cast();
        break;
      case OpKind::einsum:
        lower_einsum();
        break;
      case OpKind::reduce:
        lower_reduce();
        break;
      case OpKind::softmax:
      case OpKind::log_softmax:
        lower_softmax();
        break;
      case OpKind::cumsum:
        lower_cumsum();
        break;
      case OpKind::top_1:
        lower_top_1();
        break;
      case OpKind::one_hot:
        lower_one_hot();
        break;
      case OpKind::gather:
        lower_gather();
        break;
      case OpKind::scatter_add:
        lower_scatter_add();
        break;
      case OpKind::softmax_cross_entropy:
        lower_cross_entropy();
        break;
      case OpKind::softmax_cross_entropy_grad:
        lower_cross_entropy_grad();
        break;
      case OpKind::adam_update:
        lower_adam_update();
        break;
      case OpKind::reshape:
        lower_reshape();
        break;
      case OpKind::broadcast:
        lower_broadcast();
        break;
      case OpKind::slice:
      case OpKind::pad:
      case OpKind::shift:
      case OpKind::concat:
        lower_along_dim();
        break;
      case OpKind::stop_gradient:
        lower_stop_gradient();
        break;
      case OpKind::assign:
        lower_assign();
        break;
    }
  }

  void lower_variable() {
    const Operation& o = op();
    const int t = o.outputs[0];
    const auto& l = L(t);
    const Shape ls = l.slice_shape();
    const auto origin = l.slice_origin(coords_);
    const Initializer& init = o.attrs.init;
    const std::uint64_t seed = kernels::hash_name(o.name) ^ (init.seed * 0x9E3779B97F4A7C15ull);
    Program::Buffer b;
    if (dry_) {
      // analysis only: no storage
    } else if (g_.tensor_info(t).dtype == DType::int32) {
      b.i = kernels::fill<std::int32_t>(
          mtk::ExecSpace(), ls.num_elements(),
          static_cast<std::int32_t>(init.kind == Initializer::Kind::ones       ? 1
                                    : init.kind == Initializer::Kind::constant ? init.a
                                                                               : 0));
    } else {
      switch (init.kind) {
        case Initializer::Kind::zeros:
          b.f = kernels::fill<float>(mtk::ExecSpace(), ls.num_elements(), 0.f);
          break;
        case Initializer::Kind::ones:
          b.f = kernels::fill<float>(mtk::ExecSpace(), ls.num_elements(), 1.f);
          break;
        case Initializer::Kind::constant:
          b.f = kernels::fill<float>(mtk::ExecSpace(), ls.num_elements(), init.a);
          break;
        case Initializer::Kind::uniform:
          b.f = kernels::random_uniform(mtk::ExecSpace(), l.shape(), ls, origin, seed, init.a,
                                        init.b);
          break;
        case Initializer::Kind::normal:
        case Initializer::Kind::truncated_normal:
          b.f = kernels::random_normal(mtk::ExecSpace(), l.shape(), ls, origin, seed, init.a,
                                       init.b, init.kind == Initializer::Kind::truncated_normal);
          break;
      }
    }
    p_->variables_[t] = b;
    p_->variable_tensor_[o.name] = t;
    p_->variable_order_.push_back(o.name);
    p_->persistent_.push_back(t);
    p_->counters_.variable_bytes += ls.num_elements() * 4;
  }

  void lower_constant() {
    const int t = op().outputs[0];
    const std::int64_t n = local(t).num_elements();
    const double v = op().attrs.scalar;
    const bool f = is_float(t);
    add_step(label(), {}, {t}, [t, n, v, f](Buffers& b) {
      if (f)
        b[static_cast<size_t>(t)].f =
            kernels::fill<float>(mtk::ExecSpace(), n, static_cast<float>(v));
      else
        b[static_cast<size_t>(t)].i =
            kernels::fill<std::int32_t>(mtk::ExecSpace(), n, static_cast<std::int32_t>(v));
    });
  }

  void lower_range() {
    const int t = op().outputs[0];
    const Shape ls = local(t);
    const std::int64_t origin = L(t).slice_origin(coords_)[0];
    const bool f = is_float(t);
    add_step(label(), {}, {t}, [t, ls, origin, f](Buffers& b) {
      if (f)
        b[static_cast<size_t>(t)].f = kernels::range<float>(mtk::ExecSpace(), ls, 0, origin);
      else
        b[static_cast<size_t>(t)].i = kernels::range<std::int32_t>(mtk::ExecSpace(), ls, 0, origin);
    });
  }

  void lower_random() {
    const Operation& o = op();
    const int t = o.outputs[0];
    const Shape gs = L(t).shape(), ls = local(t);
    const auto origin = L(t).slice_origin(coords_);
    const bool uniform = o.kind == OpKind::random_uniform;
    const double a = o.attrs.scalar, c = o.attrs.scalar2;
    const std::uint64_t seed = o.attrs.seed;
    Program* p = p_.get();
    add_step(
        label(), {}, {t},
        [=](Buffers& b) {
          // Fresh values every run, identical on every mesh: mix the run counter into the seed.
          const std::uint64_t s =
              seed * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(p->step());
          b[static_cast<size_t>(t)].f =
              uniform ? kernels::random_uniform(mtk::ExecSpace(), gs, ls, origin, s,
                                                static_cast<float>(a), static_cast<float>(c))
                      : kernels::random_normal(mtk::ExecSpace(), gs, ls, origin, s,
                                               static_cast<float>(a), static_cast<float>(c), false);
        },
        "random", static_cast<double>(ls.num_elements()));
  }

  void lower_unary() {
    const Operation& o = op();
    const int x = o.inputs[0], y = o.outputs[0];
    const UnaryFn fn = o.attrs.unary;
    const double p = o.attrs.scalar;
    const bool linear =
        fn == UnaryFn::negative || fn == UnaryFn::mul_scalar || fn == UnaryFn::identity;
    if (linear)
      pending_[static_cast<size_t>(y)] = pending_[static_cast<size_t>(x)];
    else
      materialize(x);
    const bool f = is_float(x);
    add_step(
        label(), {x}, {y},
        [=](Buffers& b) {
          if (f)
            b[static_cast<size_t>(y)].f =
                kernels::unary<float>(mtk::ExecSpace(), fn, b[static_cast<size_t>(x)].f, p);
          else
            b[static_cast<size_t>(y)].i =
                kernels::unary<std::int32_t>(mtk::ExecSpace(), fn, b[static_cast<size_t>(x)].i, p);
        },
        "elementwise", static_cast<double>(local(y).num_elements()));
  }

  void lower_binary() {
    const Operation& o = op();
    int a = o.inputs[0], c = o.inputs[1];
    const int y = o.outputs[0];
    const BinaryFn fn = o.attrs.binary;
    auto& pa = pending_[static_cast<size_t>(a)];
    auto& pc = pending_[static_cast<size_t>(c)];
    std::vector<int> out_pending;
    if ((fn == BinaryFn::add || fn == BinaryFn::subtract) && !pa.empty() && pa == pc) {
      out_pending = pa;
    } else if ((fn == BinaryFn::multiply || fn == BinaryFn::divide) && !pa.empty() && pc.empty() &&
               !intersects(pa, split_axes_of(c))) {
      out_pending = pa;
    } else if (fn == BinaryFn::multiply && !pc.empty() && pa.empty() &&
               !intersects(pc, split_axes_of(a))) {
      out_pending = pc;
    } else {
      materialize(a);
      materialize(c);
    }
    pending_[static_cast<size_t>(y)] = out_pending;
    const Shape la = local(a), lc = local(c), ly = local(y);
    const bool f = is_float(a);
    add_step(
        label(), {a, c}, {y},
        [=](Buffers& b) {
          auto& A = b[static_cast<size_t>(a)];
          auto& C = b[static_cast<size_t>(c)];
          if (f)
            b[static_cast<size_t>(y)].f =
                kernels::binary<float>(mtk::ExecSpace(), fn, la, A.f, lc, C.f, ly);
          else
            b[static_cast<size_t>(y)].i =
                kernels::binary<std::int32_t>(mtk::ExecSpace(), fn, la, A.i, lc, C.i, ly);
        },
        "elementwise", static_cast<double>(ly.num_elements()));
  }

  void lower_compare() {
    const Operation& o = op();
    const int a = o.inputs[0], c = o.inputs[1], y = o.outputs[0];
    materialize(a);
    materialize(c);
    const CompareFn fn = o.attrs.compare;
    const Shape la = local(a), lc = local(c), ly = local(y);
    const bool f = is_float(a);
    add_step(
        label(), {a, c}, {y},
        [=](Buffers& b) {
          auto& A = b[static_cast<size_t>(a)];
          auto& C = b[static_cast<size_t>(c)];
          b[static_cast<size_t>(y)].f =
              f ? kernels::compare<float>(mtk::ExecSpace(), fn, la, A.f, lc, C.f, ly)
                : kernels::compare<std::int32_t>(mtk::ExecSpace(), fn, la, A.i, lc, C.i, ly);
        },
        "elementwise", static_cast<double>(ly.num_elements()));
  }

  void lower_where() {
    const Operation& o = op();
    const int c = o.inputs[0], a = o.inputs[1], d = o.inputs[2], y = o.outputs[0];
    for (int t : {c, a, d})
      materialize(t);
    const Shape lc = local(c), la = local(a), ld = local(d), ly = local(y);
    add_step(
        label(), {c, a, d}, {y},
        [=](Buffers& b) {
          b[static_cast<size_t>(y)].f =
              kernels::where(mtk::ExecSpace(), lc, b[static_cast<size_t>(c)].f, la,
                             b[static_cast<size_t>(a)].f, ld, b[static_cast<size_t>(d)].f, ly);
        },
        "elementwise", static_cast<double>(ly.num_elements()));
  }

  void lower_cast() {
    const int x = op().inputs[0], y = op().outputs[0];
    materialize(x);
    const bool to_float = is_float(y);
    add_step(
        label(), {x}, {y},
        [=](Buffers& b) {
          if (to_float)
            b[static_cast<size_t>(y)].f =
                kernels::cast<float, std::int32_t>(mtk::ExecSpace(), b[static_cast<size_t>(x)].i);
          else
            b[static_cast<size_t>(y)].i =
                kernels::cast<std::int32_t, float>(mtk::ExecSpace(), b[static_cast<size_t>(x)].f);
        },
        "elementwise", static_cast<double>(local(y).num_elements()));
  }

  void lower_einsum() {
    const Operation& o = op();
    std::vector<int> in = o.inputs;
    const int y = o.outputs[0];
    const Shape& ys = L(y).shape();
    // 1. Mesh axes claimed by two different dim names: keep the output's (or the first), gather
    //    the others in the inputs, so the local products partition the work.
    std::map<int, std::vector<std::string>> names_on_axis;
    auto note = [&](int t) {
      for (int i = 0; i < L(t).shape().rank(); ++i) {
        int a = L(t).mesh_axis(i);
        if (a < 0)
          continue;
        auto& v = names_on_axis[a];
        if (std::find(v.begin(), v.end(), L(t).shape()[i].name) == v.end())
          v.push_back(L(t).shape()[i].name);
      }
    };
    note(y);
    for (int t : in)
      note(t);
    std::set<std::string> to_gather;
    for (auto& [axis, names] : names_on_axis)
      for (size_t k = 1; k < names.size(); ++k)
        to_gather.insert(names[k]);
    for (auto& t : in)
      t = gather_dims(t, to_gather);
    // 2. Pending partial sums of the inputs pass through when the other operand is identical on
    //    every member of the pending group.
    std::vector<int> out_pending;
    if (in.size() == 2) {
      auto& p0 = pending_[static_cast<size_t>(in[0])];
      auto& p1 = pending_[static_cast<size_t>(in[1])];
      if (!p0.empty() && !p1.empty())
        materialize(in[1]);
      for (int k = 0; k < 2; ++k) {
        auto& pk = pending_[static_cast<size_t>(in[static_cast<size_t>(k)])];
        if (!pk.empty() && intersects(pk, split_axes_of(in[static_cast<size_t>(1 - k)])))
          materialize(in[static_cast<size_t>(k)]);
      }
      for (int t : in)
        for (int a : pending_[static_cast<size_t>(t)])
          out_pending.push_back(a);
    } else {
      out_pending = pending_[static_cast<size_t>(in[0])];
    }
    // 3. Reduced dims that are split leave partial sums over their axes.
    for (int t : in)
      for (int i = 0; i < L(t).shape().rank(); ++i)
        if (!ys.contains(L(t).shape()[i].name) && L(t).mesh_axis(i) >= 0)
          out_pending.push_back(L(t).mesh_axis(i));
    std::sort(out_pending.begin(), out_pending.end());
    out_pending.erase(std::unique(out_pending.begin(), out_pending.end()), out_pending.end());
    for (int a : out_pending)
      if (L(y).tensor_dim_on(a) >= 0)
        fail("mtk::lower", cat(label(), ": output ", describe(y), " is split over mesh dimension '",
                               shape_[a].name, "' which also splits a summed dimension"));
    pending_[static_cast<size_t>(y)] = out_pending;
    const Shape ly = local(y);
    if (in.size() == 1) {
      const int a = in[0];
      const Shape la = local(a);
      add_step(
          label(), {a}, {y},
          [=](Buffers& b) {
            b[static_cast<size_t>(y)].f =
                kernels::einsum(mtk::ExecSpace(), la, b[static_cast<size_t>(a)].f, ly);
          },
          "einsum", static_cast<double>(la.num_elements()));
    } else {
      const int a = in[0], c = in[1];
      const Shape la = local(a), lc = local(c);
      const double flops = 2.0 * static_cast<double>(kernels::einsum_macs(la, lc, ly));
      add_step(
          cat(label(), " ", la.to_string(), " x ", lc.to_string(), " -> ", ly.to_string()), {a, c},
          {y},
          [=](Buffers& b) {
            b[static_cast<size_t>(y)].f =
                kernels::einsum(mtk::ExecSpace(), la, b[static_cast<size_t>(a)].f, lc,
                                b[static_cast<size_t>(c)].f, ly);
          },
          "einsum", flops);
    }
  }

  void lower_reduce() {
    const Operation& o = op();
    const int x = o.inputs[0], y = o.outputs[0];
    const ReduceFn fn = o.attrs.reduce;
    std::vector<int> reduced_axes;
    for (int i = 0; i < L(x).shape().rank(); ++i)
      if (!L(y).shape().contains(L(x).shape()[i].name) && L(x).mesh_axis(i) >= 0)
        reduced_axes.push_back(L(x).mesh_axis(i));
    if (fn != ReduceFn::sum)
      materialize(x);
    const Shape lx = local(x), ly = local(y);
    const bool f = is_float(x);
    add_step(
        label(), {x}, {y},
        [=](Buffers& b) {
          if (f)
            b[static_cast<size_t>(y)].f =
                kernels::reduce<float>(mtk::ExecSpace(), fn, lx, b[static_cast<size_t>(x)].f, ly);
          else
            b[static_cast<size_t>(y)].i = kernels::reduce<std::int32_t>(
                mtk::ExecSpace(), fn, lx, b[static_cast<size_t>(x)].i, ly);
        },
        "reduce", static_cast<double>(lx.num_elements()));
    if (fn == ReduceFn::sum) {
      auto p = pending_[static_cast<size_t>(x)];
      p.insert(p.end(), reduced_axes.begin(), reduced_axes.end());
      std::sort(p.begin(), p.end());
      p.erase(std::unique(p.begin(), p.end()), p.end());
      if (!f && !p.empty()) {  // integer sums are not deferred
        pending_[static_cast<size_t>(y)] = {};
        const Mesh mesh = mesh_;
        count_comm("allreduce", ly.num_elements() * 4);
        add_step(
            "allreduce(sum) of " + describe(y), {y}, {y},
            [mesh, p, y](Buffers& b) {
              allreduce<std::int32_t>(mesh, p, b[static_cast<size_t>(y)].i);
            },
            "", 0, Program::Category::collective);
      } else {
        pending_[static_cast<size_t>(y)] = p;
      }
    } else if (!reduced_axes.empty()) {
      const Mesh mesh = mesh_;
      const ReduceOp rop = fn == ReduceFn::max ? ReduceOp::max : ReduceOp::min;
      count_comm("allreduce", ly.num_elements() * 4);
      add_step(
          cat("allreduce(", reduce_name(fn), ") of ", describe(y)), {y}, {y},
          [=](Buffers& b) {
            if (f)
              allreduce<float>(mesh, reduced_axes, b[static_cast<size_t>(y)].f, rop);
            else
              allreduce<std::int32_t>(mesh, reduced_axes, b[static_cast<size_t>(y)].i, rop);
          },
          "", 0, Program::Category::collective);
    }
  }

  void lower_softmax() {
    const Operation& o = op();
    const int x = o.inputs[0], y = o.outputs[0];
    const bool log = o.kind == OpKind::log_softmax;
    materialize(x);
    const int d = L(x).shape().index_of(o.attrs.dim);
    const Shape lx = local(x);
    const int axis = L(x).mesh_axis(d);
    if (axis < 0) {
      add_step(
          label(), {x}, {y},
          [=](Buffers& b) {
            b[static_cast<size_t>(y)].f =
                kernels::softmax(mtk::ExecSpace(), lx, b[static_cast<size_t>(x)].f, d, log);
          },
          "softmax", 5.0 * static_cast<double>(lx.num_elements()));
      return;
    }
    // The dim is split: max and sum over it need an allreduce each.
    auto dims = lx.dims();
    dims.erase(dims.begin() + d);
    const Shape lr(dims);
    const Mesh mesh = mesh_;
    count_comm("allreduce", lr.num_elements() * 4 * 2);
    add_step(
        label() + " (split over " + shape_[axis].name + ")", {x}, {y},
        [=](Buffers& b) {
          const FView& X = b[static_cast<size_t>(x)].f;
          FView m = kernels::reduce<float>(mtk::ExecSpace(), ReduceFn::max, lx, X, lr);
          allreduce<float>(mesh, {axis}, m, ReduceOp::max);
          FView z = kernels::binary<float>(mtk::ExecSpace(), BinaryFn::subtract, lx, X, lr, m, lx);
          FView e = kernels::unary<float>(mtk::ExecSpace(), UnaryFn::exp, z);
          FView s = kernels::reduce<float>(mtk::ExecSpace(), ReduceFn::sum, lx, e, lr);
          allreduce<float>(mesh, {axis}, s, ReduceOp::sum);
          if (log) {
            FView ls = kernels::unary<float>(mtk::ExecSpace(), UnaryFn::log, s);
            b[static_cast<size_t>(y)].f =
                kernels::binary<float>(mtk::ExecSpace(), BinaryFn::subtract, lx, z, lr, ls, lx);
          } else {
            b[static_cast<size_t>(y)].f =
                kernels::binary<float>(mtk::ExecSpace(), BinaryFn::divide, lx, e, lr, s, lx);
          }
        },
        "softmax", 5.0 * static_cast<double>(lx.num_elements()));
  }

  void lower_cumsum() {
    const Operation& o = op();
    const int x = o.inputs[0], y = o.outputs[0];
    require_whole(x, o.attrs.dim);
    materialize(x);
    const int d = L(x).shape().index_of(o.attrs.dim);
    const Shape lx = local(x);
    const bool excl = o.attrs.flag;
    add_step(
        label(), {x}, {y},
        [=](Buffers& b) {
          b[static_cast<size_t>(y)].f =
              kernels::cumsum(mtk::ExecSpace(), lx, b[static_cast<size_t>(x)].f, d, excl);
        },
        "elementwise", static_cast<double>(lx.num_elements()));
  }

  void lower_top_1() {
    const Operation& o = op();
    const int x = o.inputs[0], v = o.outputs[0], ix = o.outputs[1];
    require_whole(x, o.attrs.dim);
    materialize(x);
    const int d = L(x).shape().index_of(o.attrs.dim);
    const Shape lx = local(x);
    add_step(
        label(), {x}, {v, ix},
        [=](Buffers& b) {
          kernels::top_1(mtk::ExecSpace(), lx, b[static_cast<size_t>(x)].f, d,
                         b[static_cast<size_t>(v)].f, b[static_cast<size_t>(ix)].i);
        },
        "reduce", static_cast<double>(lx.num_elements()));
  }

  void lower_one_hot() {
    const Operation& o = op();
    const int ids = o.inputs[0], y = o.outputs[0];
    const int d = L(y).shape().index_of(o.attrs.dim);
    const std::int64_t origin = L(y).slice_origin(coords_)[static_cast<size_t>(d)];
    const Shape li = local(ids), ly = local(y);
    const float on = static_cast<float>(o.attrs.scalar), off = static_cast<float>(o.attrs.scalar2);
    add_step(
        label(), {ids}, {y},
        [=](Buffers& b) {
          b[static_cast<size_t>(y)].f = kernels::one_hot(
              mtk::ExecSpace(), li, b[static_cast<size_t>(ids)].i, ly, d, origin, on, off);
        },
        "elementwise", static_cast<double>(ly.num_elements()));
  }

  void lower_gather() {
    const Operation& o = op();
    int table = o.inputs[0];
    const int ids = o.inputs[1], y = o.outputs[0];
    materialize(table);
    int d = L(table).shape().index_of(o.attrs.dim);
    int axis = L(table).mesh_axis(d);
    if (axis >= 0 && L(y).tensor_dim_on(axis) >= 0) {
      table = gather_dims(table, {o.attrs.dim});
      axis = -1;
    }
    const std::int64_t origin = L(table).slice_origin(coords_)[static_cast<size_t>(d)];
    if (axis >= 0)
      pending_[static_cast<size_t>(y)] = {axis};  // rows outside the slice are 0
    const Shape lt = local(table), li = local(ids), ly = local(y);
    add_step(
        label(), {table, ids}, {y},
        [=](Buffers& b) {
          b[static_cast<size_t>(y)].f =
              kernels::gather(mtk::ExecSpace(), lt, b[static_cast<size_t>(table)].f, d, origin, li,
                              b[static_cast<size_t>(ids)].i, ly);
        },
        "gather", static_cast<double>(ly.num_elements()));
  }

  void lower_scatter_add() {
    const Operation& o = op();
    int ids = o.inputs[0], upd = o.inputs[1];
    const int y = o.outputs[0];
    materialize(upd);
    const Shape& ts = L(y).shape();
    // Dims summed away (in ids/updates, not in the table): their split axes leave partial sums.
    std::set<std::string> summed;
    for (int t : {ids, upd})
      for (const auto& dm : L(t).shape().dims())
        if (!ts.contains(dm.name))
          summed.insert(dm.name);
    std::set<std::string> conflict;
    for (int t : {ids, upd})
      for (int i = 0; i < L(t).shape().rank(); ++i)
        if (summed.count(L(t).shape()[i].name) && L(t).mesh_axis(i) >= 0 &&
            L(y).tensor_dim_on(L(t).mesh_axis(i)) >= 0)
          conflict.insert(L(t).shape()[i].name);
    ids = gather_dims(ids, conflict);
    upd = gather_dims(upd, conflict);
    std::vector<int> p;
    for (int i = 0; i < L(upd).shape().rank(); ++i)
      if (summed.count(L(upd).shape()[i].name) && L(upd).mesh_axis(i) >= 0)
        p.push_back(L(upd).mesh_axis(i));
    for (int i = 0; i < L(ids).shape().rank(); ++i)
      if (summed.count(L(ids).shape()[i].name) && L(ids).mesh_axis(i) >= 0)
        p.push_back(L(ids).mesh_axis(i));
    std::sort(p.begin(), p.end());
    p.erase(std::unique(p.begin(), p.end()), p.end());
    pending_[static_cast<size_t>(y)] = p;
    const int d = ts.index_of(o.attrs.dim);
    const std::int64_t origin = L(y).slice_origin(coords_)[static_cast<size_t>(d)];
    const Shape li = local(ids), lu = local(upd), ly = local(y);
    add_step(
        label(), {ids, upd}, {y},
        [=](Buffers& b) {
          b[static_cast<size_t>(y)].f =
              kernels::scatter_add(mtk::ExecSpace(), li, b[static_cast<size_t>(ids)].i, lu,
                                   b[static_cast<size_t>(upd)].f, ly, d, origin);
        },
        "gather", static_cast<double>(lu.num_elements()));
  }

  // Fused cross-entropy: row statistics of the local vocabulary slice, combined over the mesh axis
  // that splits the vocabulary (max, sum of exponentials, target logit and logit sum).
  void lower_cross_entropy() {
    const Operation& o = op();
    const int x = o.inputs[0], t = o.inputs[1], loss = o.outputs[0], lse_out = o.outputs[1];
    materialize(x);
    const int d = L(x).shape().index_of(o.attrs.dim);
    const int axis =
        L(x).mesh_axis(d) >= 0 && shape_[L(x).mesh_axis(d)].size > 1 ? L(x).mesh_axis(d) : -1;
    const std::int64_t origin = L(x).slice_origin(coords_)[static_cast<size_t>(d)];
    const std::int64_t V = L(x).shape()[d].size;
    const Shape lx = local(x), lr = local(loss);
    const double ls = o.attrs.scalar, z = o.attrs.scalar2;
    const Mesh mesh = mesh_;
    if (axis >= 0)
      count_comm("allreduce", lr.num_elements() * 4 * 4);
    add_step(
        label() + (axis >= 0 ? " (vocabulary split over " + shape_[axis].name + ")" : ""), {x, t},
        {loss, lse_out},
        [=](Buffers& b) {
          const FView& X = b[static_cast<size_t>(x)].f;
          FView m = kernels::reduce<float>(mtk::ExecSpace(), ReduceFn::max, lx, X, lr);
          if (axis >= 0)
            allreduce<float>(mesh, {axis}, m, ReduceOp::max);
          FView s = kernels::sum_exp_shifted(mtk::ExecSpace(), lx, X, d, m);
          FView xt, sx;
          kernels::target_logit_and_sum(mtk::ExecSpace(), lx, X, d, b[static_cast<size_t>(t)].i,
                                        origin, xt, sx);
          if (axis >= 0) {
            allreduce<float>(mesh, {axis}, s);
            allreduce<float>(mesh, {axis}, xt);
            allreduce<float>(mesh, {axis}, sx);
          }
          FView lse =
              kernels::binary<float>(mtk::ExecSpace(), BinaryFn::add, lr, m, lr,
                                     kernels::unary<float>(mtk::ExecSpace(), UnaryFn::log, s), lr);
          b[static_cast<size_t>(loss)].f =
              kernels::cross_entropy_from_stats(mtk::ExecSpace(), lse, xt, sx, ls, V, z);
          b[static_cast<size_t>(lse_out)].f = lse;
        },
        "softmax", 4.0 * static_cast<double>(lx.num_elements()));
  }

  void lower_cross_entropy_grad() {
    const Operation& o = op();
    const int x = o.inputs[0], t = o.inputs[1], lse = o.inputs[2], dy = o.inputs[3],
              dx = o.outputs[0];
    for (int k : {x, lse, dy})
      materialize(k);
    const int d = L(x).shape().index_of(o.attrs.dim);
    const std::int64_t origin = L(x).slice_origin(coords_)[static_cast<size_t>(d)];
    const std::int64_t V = L(x).shape()[d].size;
    const Shape lx = local(x);
    const double ls = o.attrs.scalar, z = o.attrs.scalar2;
    add_step(
        label(), {x, t, lse, dy}, {dx},
        [=](Buffers& b) {
          b[static_cast<size_t>(dx)].f = kernels::cross_entropy_grad(
              mtk::ExecSpace(), lx, b[static_cast<size_t>(x)].f, d, b[static_cast<size_t>(t)].i,
              origin, b[static_cast<size_t>(lse)].f, b[static_cast<size_t>(dy)].f, ls, V, z);
        },
        "softmax", 3.0 * static_cast<double>(lx.num_elements()));
  }

  void lower_adam_update() {
    const Operation& o = op();
    for (int t : o.inputs)
      materialize(t);
    const int p = o.inputs[0], m = o.inputs[1], v = o.inputs[2], gr = o.inputs[3], ss = o.inputs[4];
    const int np = o.outputs[0], nm = o.outputs[1], nv = o.outputs[2];
    const float b1 = static_cast<float>(o.attrs.scalar), b2 = static_cast<float>(o.attrs.scalar2),
                eps = static_cast<float>(o.attrs.scalar3);
    add_step(
        label(), {p, m, v, gr, ss}, {np, nm, nv},
        [=](Buffers& b) {
          kernels::adam_update(mtk::ExecSpace(), b[static_cast<size_t>(p)].f,
                               b[static_cast<size_t>(m)].f, b[static_cast<size_t>(v)].f,
                               b[static_cast<size_t>(gr)].f, b[static_cast<size_t>(ss)].f, b1, b2,
                               eps, b[static_cast<size_t>(np)].f, b[static_cast<size_t>(nm)].f,
                               b[static_cast<size_t>(nv)].f);
        },
        "optimizer", 8.0 * static_cast<double>(local(p).num_elements()));
  }

  void lower_reshape() {
    const int x = op().inputs[0], y = op().outputs[0];
    materialize(x);
    const Shape& xs = L(x).shape();
    const Shape& ys = L(y).shape();
    // A split dim survives a local reshape when it keeps its name, size and the product of the
    // dims before it. Every other split dim is gathered first.
    auto prefix = [](const Shape& s, int i) {
      std::int64_t p = 1;
      for (int k = 0; k < i; ++k)
        p *= s[k].size;
      return p;
    };
    std::vector<int> keep_axes(static_cast<size_t>(xs.rank()), -1);
    std::vector<int> y_axes_mid(static_cast<size_t>(ys.rank()), -1);
    for (int i = 0; i < xs.rank(); ++i) {
      int a = L(x).mesh_axis(i);
      if (a < 0)
        continue;
      // The same dim, possibly renamed: same size at the same row-major position.
      int j = ys.index_of(xs[i].name);
      if (j < 0 || ys[j].size != xs[i].size || prefix(xs, i) != prefix(ys, j)) {
        j = -1;
        for (int k = 0; k < ys.rank() && j < 0; ++k)
          if (ys[k].size == xs[i].size && prefix(ys, k) == prefix(xs, i) &&
              !xs.contains(ys[k].name))
            j = k;
      }
      if (j >= 0) {
        keep_axes[static_cast<size_t>(i)] = a;
        y_axes_mid[static_cast<size_t>(j)] = a;
      }
    }
    const int xin = relayout(x, keep_axes);
    // Local reshape: same data, new shape.
    const int mid = new_temp(ys, y_axes_mid, L_dtype(x));
    add_step(label(), {xin}, {mid},
             [=](Buffers& b) { b[static_cast<size_t>(mid)] = b[static_cast<size_t>(xin)]; });
    const int out = relayout(mid, axes(y));
    add_step("alias " + describe(y), {out}, {y},
             [=](Buffers& b) { b[static_cast<size_t>(y)] = b[static_cast<size_t>(out)]; });
  }

  void lower_broadcast() {
    const int x = op().inputs[0], y = op().outputs[0];
    materialize(x);
    const Shape lx = local(x), ly = local(y);
    const bool f = is_float(x);
    add_step(label(), {x}, {y}, [=](Buffers& b) {
      if (f)
        b[static_cast<size_t>(y)].f =
            kernels::broadcast<float>(mtk::ExecSpace(), lx, b[static_cast<size_t>(x)].f, ly);
      else
        b[static_cast<size_t>(y)].i =
            kernels::broadcast<std::int32_t>(mtk::ExecSpace(), lx, b[static_cast<size_t>(x)].i, ly);
    });
  }

  // slice / pad / shift / concat work on a whole dim: a split input dim is gathered first (an
  // allconcat, listed by explain()), the result is sliced again if the output splits its dim.
  void lower_along_dim() {
    const Operation& o = op();
    const int y = o.outputs[0];
    std::vector<int> ins;
    for (int t : o.inputs) {
      materialize(t);
      ins.push_back(gather_dims(t, {o.attrs.dim}));
    }
    const int d = L(ins[0]).shape().index_of(o.attrs.dim);
    auto mid_axes = axes(ins[0]);
    const int mid = new_temp(L(y).shape(), mid_axes, L_dtype(y));
    const Shape lmid = local(mid);
    std::vector<Shape> lin;
    for (int t : ins)
      lin.push_back(local(t));
    const OpKind kind = o.kind;
    const OpAttrs at = o.attrs;
    const bool f = is_float(y);
    add_step(
        label(), ins, {mid},
        [=](Buffers& b) {
          auto& out = b[static_cast<size_t>(mid)];
          auto& x0 = b[static_cast<size_t>(ins[0])];
          switch (kind) {
            case OpKind::slice:
              if (f)
                out.f = kernels::slice<float>(mtk::ExecSpace(), lin[0], x0.f, d, at.begin, at.size);
              else
                out.i = kernels::slice<std::int32_t>(mtk::ExecSpace(), lin[0], x0.i, d, at.begin,
                                                     at.size);
              break;
            case OpKind::pad:
              if (f)
                out.f =
                    kernels::pad<float>(mtk::ExecSpace(), lin[0], x0.f, d, at.begin, at.after, 0.f);
              else
                out.i = kernels::pad<std::int32_t>(mtk::ExecSpace(), lin[0], x0.i, d, at.begin,
                                                   at.after, 0);
              break;
            case OpKind::shift:
              if (f)
                out.f = kernels::shift<float>(mtk::ExecSpace(), lin[0], x0.f, d, at.begin, at.flag);
              else
                out.i = kernels::shift<std::int32_t>(mtk::ExecSpace(), lin[0], x0.i, d, at.begin,
                                                     at.flag);
              break;
            default: {
              if (f) {
                std::vector<FView> xs;
                for (int t : ins)
                  xs.push_back(b[static_cast<size_t>(t)].f);
                out.f = kernels::concat<float>(mtk::ExecSpace(), lin, xs, d);
              } else {
                std::vector<IView> xs;
                for (int t : ins)
                  xs.push_back(b[static_cast<size_t>(t)].i);
                out.i = kernels::concat<std::int32_t>(mtk::ExecSpace(), lin, xs, d);
              }
            }
          }
        },
        "elementwise", static_cast<double>(lmid.num_elements()));
    const int out = relayout(mid, axes(y));
    add_step("alias " + describe(y), {out}, {y},
             [=](Buffers& b) { b[static_cast<size_t>(y)] = b[static_cast<size_t>(out)]; });
  }

  void lower_stop_gradient() {
    const int x = op().inputs[0], y = op().outputs[0];
    materialize(x);
    add_step(label(), {x}, {y},
             [=](Buffers& b) { b[static_cast<size_t>(y)] = b[static_cast<size_t>(x)]; });
  }

  void lower_assign() {
    const Operation& o = op();
    const int var = o.inputs[0], val = o.inputs[1];
    materialize(val);
    const AssignMode mode = o.attrs.assign;
    Program* p = p_.get();
    // Keep the value alive until the end of the run.
    keep_to_end_.push_back(val);
    p_->assigns_.push_back({label(), Program::Category::other, {val}, {var}, [=](Buffers& b) {
                              auto& storage = p->variables_[var];
                              auto& v = b[static_cast<size_t>(val)];
                              if (mode == AssignMode::set) {
                                if (v.f.data() != storage.f.data())
                                  storage.f = v.f;
                                storage.i = v.i;
                              } else {
                                kernels::axpy<float>(mtk::ExecSpace(),
                                                     mode == AssignMode::add ? 1.f : -1.f, v.f,
                                                     storage.f);
                              }
                            }});
    p_->counters_.flops["assign"] += static_cast<double>(local(val).num_elements());
  }

  // ---------------------------------------------------------------------------- finish
  void finish() {
    const int n = static_cast<int>(p_->layouts_.size());
    p_->last_use_.assign(static_cast<size_t>(n), -1);
    for (int s = 0; s < static_cast<int>(p_->steps_.size()); ++s)
      for (int t : p_->steps_[static_cast<size_t>(s)].reads)
        p_->last_use_[static_cast<size_t>(t)] = s;
    const int end = static_cast<int>(p_->steps_.size());
    for (int t : keep_to_end_)
      p_->last_use_[static_cast<size_t>(t)] = end;
    // Peak memory: variables plus the most bytes live at once.
    std::vector<std::int64_t> bytes(static_cast<size_t>(n), 0);
    for (int t = 0; t < n; ++t)
      bytes[static_cast<size_t>(t)] = L(t).slice_shape().num_elements() * 4;
    std::int64_t live = 0, peak = 0;
    std::vector<bool> alive(static_cast<size_t>(n), false);
    for (int t : p_->placeholders_) {
      alive[static_cast<size_t>(t)] = true;
      live += bytes[static_cast<size_t>(t)];
    }
    std::set<int> persistent(p_->persistent_.begin(), p_->persistent_.end());
    for (int s = 0; s < end; ++s) {
      const auto& st = p_->steps_[static_cast<size_t>(s)];
      for (int t : st.writes)
        if (!alive[static_cast<size_t>(t)] && !persistent.count(t)) {
          alive[static_cast<size_t>(t)] = true;
          live += bytes[static_cast<size_t>(t)];
        }
      peak = std::max(peak, live);
      for (int t = 0; t < n; ++t)
        if (alive[static_cast<size_t>(t)] && p_->last_use_[static_cast<size_t>(t)] <= s) {
          alive[static_cast<size_t>(t)] = false;
          live -= bytes[static_cast<size_t>(t)];
        }
    }
    p_->counters_.peak_bytes = p_->counters_.variable_bytes + peak;
  }

  Graph& g_;
  Mesh mesh_;
  MeshShape shape_;
  std::vector<int> coords_;
  bool dry_ = false;
  LayoutRules rules_;
  std::unique_ptr<Program> p_;
  int op_index_ = 0;
  std::vector<std::vector<int>> pending_;
  std::map<int, DType> temp_dtype_;
  std::vector<int> keep_to_end_;
};

std::unique_ptr<Program> lower(Graph& graph, const Mesh& mesh, const LayoutRules& rules) {
  Kokkos::Profiling::pushRegion("mtk::lower");
  std::unique_ptr<Program> program;
  std::string failure;
  try {
    program = Lowering(graph, mesh, rules, mesh.shape(), mesh.coordinates(), false).run();
  } catch (const std::exception& e) {
    failure = e.what();
  }
  Kokkos::Profiling::popRegion();
  agree(mesh.comm(), failure);  // every rank throws if any rank failed
  return program;
}

std::unique_ptr<Program> analyze(Graph& graph, const MeshShape& mesh, const LayoutRules& rules,
                                 int processor) {
  static const Mesh self(MeshShape::parse("self:1"), MPI_COMM_SELF);
  return Lowering(graph, self, rules, mesh, mesh.coordinates_of(processor), true).run();
}

}  // namespace mtk
