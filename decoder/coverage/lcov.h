#pragma once
// `coverage --format lcov`: per source line how often it ran (decoder/coverage/lines.h),
// in lcov's tracefile format (genhtml renders it):
// TN, SF, FN/FNDA (the functions that ran: the line of their first executed address and
// how often that instruction ran), FNF/FNH, DA for every line the table has code for (0: never
// ran), LF/LH, end_of_record.

#include <string>
#include <vector>

#include "decoder/coverage/collector.h"

namespace ptd::decoder {

// `notes`: the modules left out (no line table), one line each.
std::string CoverageLcov(const CoverageCollector& coverage, std::vector<std::string>* notes);

}  // namespace ptd::decoder
