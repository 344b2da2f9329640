#pragma once
// `coverage --format text`: per module and per function, the blocks and instructions
// executed and how often (hits: runs through the function's blocks), and the source
// lines executed where the module has a DWARF line table (decoder/coverage/lines.h).

#include <string>

#include "decoder/coverage/collector.h"

namespace ptd::decoder {

std::string CoverageText(const CoverageCollector& coverage);

}  // namespace ptd::decoder
