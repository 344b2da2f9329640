#pragma once
// DynamoRIO's drcov format (`coverage --format drcov`), as lighthouse and bncov read it:
// a text header and module table (version 2: id, base, end, entry, path), then
// "BB Table: N bbs" and N binary entries {u32 offset from the module's base, u16 size,
// u16 module id}, little-endian.

#include <string>

#include "decoder/coverage/collector.h"

namespace ptd::decoder {

std::string CoverageDrcov(const CoverageCollector& coverage);

}  // namespace ptd::decoder
