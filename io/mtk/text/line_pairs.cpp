#include <mtk/base/error.hpp>
#include <mtk/text/line_pairs.hpp>

namespace mtk::text {

LinePairs::LinePairs(const std::string& source_path, const std::string& target_path,
                     std::size_t keep)
    : source_(source_path, keep), target_(target_path, keep) {}

bool LinePairs::next(RawLine& source, RawLine& target) {
  const bool has_source = source_.next(source), has_target = target_.next(target);
  if (has_source && has_target)
    return true;
  if (!has_source && !has_target)
    return false;
  // Count the rest of the longer file so that the error gives both totals.
  RawLine rest;
  while (has_source && source_.next(rest)) {
  }
  while (has_target && target_.next(rest)) {
  }
  fail("mtk::text::LinePairs",
       cat("misaligned parallel files: '", source_.path(), "' has ", source_.line_number(),
           " lines but '", target_.path(), "' has ", target_.line_number()));
}

}  // namespace mtk::text
