#pragma once
// One function's statistics as a JSON object: FunctionStatsJson's entries, and each run's
// figures in FunctionStatsDiffJson (the same fields in both).

#include "ftf/function_stats.h"
#include "nlohmann/json.hpp"

namespace ptd::ftf {

nlohmann::ordered_json FunctionStatsObject(const FunctionStats& f);

}  // namespace ptd::ftf
