// FTF reader: any bytes give records or an error, never a crash or an out-of-bounds
// read; whatever is read also goes through the checker, the summary and the text output.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "ftf/byte_source.h"
#include "ftf/ftf_checker.h"
#include "ftf/ftf_reader.h"
#include "ftf/ftf_summary.h"
#include "ftf/ftf_text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ptd::ftf;
  std::unique_ptr<FtfReader> reader =
      FtfReader::FromSource(MakeMemorySource(absl::MakeConstSpan(data, size)), "fuzz.ftf");
  FtfChecker checker;
  FtfSummarizer summarizer;
  FtfRecord record;
  uint64_t last_offset = 0;
  for (;;) {
    absl::StatusOr<bool> more = reader->Next(&record);
    if (!more.ok() || !*more) break;
    // Records advance through the input and never past its end.
    if (record.offset < last_offset || reader->offset() > size) std::abort();
    last_offset = record.offset;
    checker.Add(record);
    summarizer.Add(record);
    FormatRecord(record);
  }
  checker.Finish();
  FormatFtfSummary(summarizer.Finish(), 10);
  return 0;
}
