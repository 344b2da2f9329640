// DecodeTrace's output as an FTF file: the sinks that write each thread's slices, the
// file written beside its name and renamed into place, and --max-output-size's passes.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/trace_meta.h"
#include "common/units.h"
#include "decoder/output/ftf_slice_sink.h"
#include "decoder/output/output_size_plan.h"
#include "decoder/trace_decoder.h"
#include "ftf/ftf_writer.h"

namespace ptd::decoder {
namespace {

// Every thread of one trace as one process of a file that holds other traces too
// (DecodeTracesToOneFtf): its koid, its name, and what is added to each tid.
struct OneProcess {
  uint64_t koid = 0;
  std::string name;
  uint64_t tid_base = 0;
};

class FtfSinks : public ThreadSinkFactory {
 public:
  FtfSinks(ftf::FtfWriter* writer, const DecodeOptions& options, const OneProcess* as_one_process = nullptr)
      : writer_(writer), options_(options), one_(as_one_process) {}
  SliceSink* ForThread(int pid, int tid, const std::string& thread_name,
                       const std::string& process_name) override {
    const uint64_t pid_koid = one_ != nullptr ? one_->koid : static_cast<uint64_t>(pid);
    const uint64_t tid_koid = one_ != nullptr ? one_->tid_base + static_cast<uint64_t>(tid) : static_cast<uint64_t>(tid);
    if (written_processes_.insert(pid_koid).second) {
      writer_->WriteProcess(pid_koid, one_ != nullptr ? one_->name : process_name);
    }
    writer_->WriteThread(pid_koid, tid_koid, absl::StrCat(thread_name, " ", tid));
    sinks_.push_back(
        std::make_unique<FtfSliceSink>(writer_, pid_koid, tid_koid, options_.window_begin, options_.window_end));
    return sinks_.back().get();
  }

 private:
  ftf::FtfWriter* writer_;
  DecodeOptions options_;
  const OneProcess* one_;
  std::set<uint64_t> written_processes_;
  std::vector<std::unique_ptr<FtfSliceSink>> sinks_;
};

// No output file (`decode --summary` without -o): slices go nowhere.
class DiscardSinks : public ThreadSinkFactory, public SliceSink {
 public:
  SliceSink* ForThread(int, int, const std::string&, const std::string&) override { return this; }
  void Begin(uint64_t, absl::string_view) override {}
  void End(uint64_t, const SliceCounts&) override {}
  void Instant(uint64_t, absl::string_view, absl::string_view) override {}
};

}  // namespace

// Puts a SamplingSliceSink in front of each thread's sink of another factory.
class SamplingSinks : public ThreadSinkFactory {
 public:
  SamplingSinks(ThreadSinkFactory* inner, SliceSample* sample) : inner_(inner), sample_(sample) {}
  SliceSink* ForThread(int pid, int tid, const std::string& thread_name, const std::string& process_name) override {
    sinks_.push_back(std::make_unique<SamplingSliceSink>(sample_, inner_->ForThread(pid, tid, thread_name, process_name)));
    return sinks_.back().get();
  }

 private:
  ThreadSinkFactory* inner_;
  SliceSample* sample_;
  std::vector<std::unique_ptr<SamplingSliceSink>> sinks_;
};

// --max-output-size (DecodeOptions::max_output_bytes).
static absl::StatusOr<DecodeResult> DecodeTraceToFtfWithinSize(const std::string& trace_dir,
                                                               const std::string& output,
                                                               const DecodeOptions& options) {
  const uint64_t limit = options.max_output_bytes;
  // The count: what the FTF would take at the user's own detail, and a sample of its slices.
  uint64_t full_bytes = 0;
  SliceSample sample;
  DecodeResult counted;
  {
    std::unique_ptr<ftf::FtfWriter> counter = ftf::FtfWriter::ToSink(ftf::MakeCountingSink(&full_bytes), output);
    FtfSinks sinks(counter.get(), options);
    SamplingSinks sampling(&sinks, &sample);
    DecodeOptions first = options;
    first.max_output_bytes = 0;
    first.progress_label = "sizing";
    absl::StatusOr<DecodeResult> result = DecodeTrace(trace_dir, first, &sampling);
    if (!result.ok()) return result.status();
    if (absl::Status s = counter->Close(); !s.ok()) return s;
    counted = *std::move(result);
    if (counted.interrupted) return counted;  // no file: nothing to fit
  }
  DecodeOptions pass = options;
  pass.max_output_bytes = 0;
  pass.function_stats = nullptr;  // saw every slice in the count
  // Plan on a little less than the limit: bytes per slice vary along the trace.
  uint64_t budget = limit - limit / 20;
  std::vector<std::string> notes = counted.notes;
  // Sizes are planned on uncompressed bytes: a .gz output (or a plan that was too careful)
  // can come out far under the limit, and is then planned once more with a budget scaled
  // up by what it missed; should that one not fit, the last plan that fit is written again.
  uint64_t fitting_budget = 0;  // the largest budget whose output fit
  bool grown = false;
  bool last_try = false;
  for (int attempt = 0;; ++attempt) {
    const DetailPlan plan = PlanDetail(sample, full_bytes, budget, options.detail);
    pass.detail = plan.detail;
    absl::StatusOr<DecodeResult> result = DecodeTraceToFtf(trace_dir, output, pass);
    if (!result.ok()) return result.status();
    struct stat st = {};
    const uint64_t written = ::stat(output.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
    std::string what;
    if (plan.full) {
      what = "full detail";
    } else {
      what = absl::StrFormat("slices of at least %s", FormatDurationNs(plan.detail.min_duration));
      if (plan.detail.full_detail_from != UINT64_MAX) {
        const uint64_t from = plan.detail.full_detail_from;
        const uint64_t span = sample.last_end() > sample.first_begin() ? sample.last_end() - sample.first_begin() : 1;
        absl::StrAppendFormat(&what, " before %d (+%s), and every slice from there on (the last %.0f%% of the time)",
                              from, FormatDurationNs(from - std::min(from, sample.first_begin())),
                              100.0 * static_cast<double>(sample.last_end() - std::min(from, sample.last_end())) /
                                  static_cast<double>(span));
      }
    }
    notes.push_back(absl::StrFormat(
        "max-output-size %s: full detail would take %s (%d slices); %s: %s, wrote %s%s", FormatByteSize(limit),
        FormatByteSize(full_bytes), sample.total(), attempt == 0 ? "chose" : "planned again with", what,
        FormatByteSize(written), written > limit ? " (over the limit)" : ""));
    const double missed = static_cast<double>(limit) / static_cast<double>(std::max<uint64_t>(written, 1));
    bool done = plan.full || last_try || attempt == 4 || result->interrupted;
    if (!done && written <= limit) {
      fitting_budget = budget;
      if (grown || written >= limit / 2) {
        done = true;
      } else {
        grown = true;
        budget = static_cast<uint64_t>(static_cast<double>(budget) * missed * 0.9);
      }
    } else if (!done) {
      last_try = fitting_budget > 0;
      budget = last_try ? fitting_budget : static_cast<uint64_t>(static_cast<double>(budget) * missed * 0.9);
    }
    if (done) {
      result->notes.insert(result->notes.begin(), notes.begin(), notes.end());
      // The count decoded the same trace: its stats are the full-detail ones.
      result->seconds += counted.seconds;
      return result;
    }
  }
}

// Writes the FTF file `output` with what `fill` writes. A regular file is written beside
// its final name and renamed into place, so a decode rejected before it wrote any event
// (a window outside the trace, an unknown --tid) leaves no file and an earlier output
// untouched. A device or FIFO is written directly. The file is finished either way, so a
// decode that stopped early still opens.
static absl::Status WriteFtfFile(const std::string& output,
                                 const std::function<absl::Status(ftf::FtfWriter* writer)>& fill) {
  struct stat st;
  const bool special = ::stat(output.c_str(), &st) == 0 && !S_ISREG(st.st_mode);
  const std::string written_path =
      special ? output
              : absl::StrCat(output, ".", ::getpid(), ".partial", absl::EndsWith(output, ".gz") ? ".gz" : "");
  absl::StatusOr<std::unique_ptr<ftf::FtfWriter>> writer = ftf::FtfWriter::Open(written_path);
  if (!writer.ok()) return writer.status();
  const absl::Status filled = fill(writer->get());
  absl::Status closed = (*writer)->Close();
  const bool wrote_events = (*writer)->stats().events > 0;
  if (!special) {
    if (!closed.ok() || (!filled.ok() && !wrote_events)) {
      ::unlink(written_path.c_str());
    } else if (::rename(written_path.c_str(), output.c_str()) != 0) {
      const int error = errno;
      ::unlink(written_path.c_str());
      return ErrnoError("rename to " + output, written_path, error);
    }
  }
  if (!filled.ok()) return filled;
  return closed;
}

absl::StatusOr<DecodeResult> DecodeTraceToFtf(const std::string& trace_dir, const std::string& output,
                                              const DecodeOptions& options) {
  if (options.max_output_bytes > 0 && !output.empty()) return DecodeTraceToFtfWithinSize(trace_dir, output, options);
  if (output.empty()) {
    DiscardSinks discard;
    return DecodeTrace(trace_dir, options, &discard);
  }
  // An unreadable trace directory (no or corrupt meta.json) makes no output file.
  if (absl::StatusOr<TraceMeta> meta = ReadTraceMeta(trace_dir); !meta.ok()) return meta.status();
  absl::StatusOr<DecodeResult> result;
  absl::Status written = WriteFtfFile(output, [&](ftf::FtfWriter* writer) {
    FtfSinks sinks(writer, options);
    result = DecodeTrace(trace_dir, options, &sinks);
    return result.status();
  });
  if (!written.ok()) return written;
  return result;
}

absl::StatusOr<std::vector<DecodeResult>> DecodeTracesToOneFtf(const std::vector<FtfRun>& runs,
                                                               const std::string& output) {
  for (const FtfRun& run : runs) {
    if (absl::StatusOr<TraceMeta> meta = ReadTraceMeta(run.trace_dir); !meta.ok()) return meta.status();
  }
  std::vector<DecodeResult> results;
  absl::Status written = WriteFtfFile(output, [&](ftf::FtfWriter* writer) -> absl::Status {
    for (size_t i = 0; i < runs.size(); ++i) {
      // Linux's tids stay below 2^22 (its largest pid_max): each run's koids are its own.
      const uint64_t base = static_cast<uint64_t>(i + 1) << 22;
      const OneProcess process{base, runs[i].name, base};
      FtfSinks sinks(writer, runs[i].options, &process);
      absl::StatusOr<DecodeResult> result = DecodeTrace(runs[i].trace_dir, runs[i].options, &sinks);
      if (!result.ok()) return result.status();
      results.push_back(*std::move(result));
    }
    return absl::OkStatus();
  });
  if (!written.ok()) return written;
  return results;
}

}  // namespace ptd::decoder
