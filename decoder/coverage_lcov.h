#pragma once
// `coverage --format lcov`: per source line how often it ran, from each module's DWARF
// line table (image/line_table.h), in lcov's tracefile format (genhtml renders it):
// TN, SF, FN/FNDA (the functions that ran: the line of their first executed address and
// how often that block ran), FNF/FNH, DA for every line the table has code for (0: never
// ran), LF/LH, end_of_record. A line's count is its most executed instruction's (as
// gcov counts a line); an instruction's, the runs of the blocks holding it.

#include <string>
#include <vector>

#include "decoder/coverage_collector.h"

namespace ptd::decoder {

// `notes`: the modules left out (no line table), one line each.
std::string CoverageLcov(const CoverageCollector& coverage, std::vector<std::string>* notes);

}  // namespace ptd::decoder
