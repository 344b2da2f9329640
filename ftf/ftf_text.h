#pragma once
// One line of text per record, for `ftf-dump` and test failure messages.

#include <string>

#include "ftf/ftf_record.h"

namespace ptd::ftf {

std::string FormatRecord(const FtfRecord& record);
std::string FormatArg(const ArgValue& arg);

}  // namespace ptd::ftf
