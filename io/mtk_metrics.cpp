// (in progress)
#include <mtk_config.hpp>
