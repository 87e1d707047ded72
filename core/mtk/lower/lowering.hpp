#pragma once
// Lowering: graph + mesh + layout rules -> the Program one rank runs.
//
// Rules (the paper's): every op runs on the local slice; an einsum or sum whose reduced dims are
// split leaves a partial sum that is allreduced over those mesh axes when first needed (pending
// sums merge through add/subtract, scaling, further sums and contractions with replicated
// operands, so several partial sums cost one collective; a partial sum laid out anew with a dim
// split over a mesh dim it is pending over is reduce-scattered along that dim); a reshape that
// changes which mesh dim splits a dim lowers to a local slice (newly split), an allconcat (no
// longer split) or an alltoall (moved); ops that need a whole dim that is split are rejected
// with an error naming op, tensor, dims and sizes. Validation runs on every rank with collective
// agreement.

#include <mtk/graph/graph.hpp>
#include <mtk/parallel/layout.hpp>
#include <mtk/parallel/mesh.hpp>
#include <mtk/runtime/program.hpp>

#include <memory>

namespace mtk {

/// Lowers every op of `graph` (which must outlive the program) with `options` (program.*).
/// Variables are initialised from their initializers. Collective over the mesh.
std::unique_ptr<Program> lower(Graph& graph, const Mesh& mesh, const LayoutRules& rules,
                               const ProgramOptions& options);
/// The same with the options the graph was built with (graph.options()).
inline std::unique_ptr<Program> lower(Graph& graph, const Mesh& mesh, const LayoutRules& rules) {
  return lower(graph, mesh, rules, graph.options());
}

/// Lowers for processor `processor` of a mesh of any size without the ranks, allocating nothing:
/// its counters() and explain() describe the real program (FLOPs, communication, memory), but it
/// cannot run. For sizing the paper's models on a laptop. Not collective.
std::unique_ptr<Program> analyze(Graph& graph, const MeshShape& mesh, const LayoutRules& rules,
                                 const ProgramOptions& options, int processor = 0);
/// The same with the options the graph was built with (graph.options()).
inline std::unique_ptr<Program> analyze(Graph& graph, const MeshShape& mesh,
                                        const LayoutRules& rules, int processor = 0) {
  return analyze(graph, mesh, rules, graph.options(), processor);
}

}  // namespace mtk
