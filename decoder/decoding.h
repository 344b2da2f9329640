#pragma once
// One decode of a trace directory (DecodeTrace): set-up of its sideband, images and
// streams (stream_setup.cc, decode_window.cc), then the streams decoded serially or in
// pieces, into each thread's call-stack model (trace_decoder.cc). Internal to decoder/.

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/progress_bar.h"
#include "common/trace_meta.h"
#include "decoder/flow/section_block_cache.h"
#include "decoder/parallel/parallel_decode.h"
#include "decoder/stream_image_clock.h"
#include "decoder/thread_router.h"
#include "decoder/trace_decoder.h"
#include "image/module_cache.h"
#include "image/section_cache.h"
#include "image/timed_image.h"
#include "sideband/sideband_set.h"

namespace ptd::decoder {

class Decoding {
 public:
  Decoding(std::string dir, const DecodeOptions& options, ThreadSinkFactory* sinks)
      : dir_(std::move(dir)), options_(options), sinks_(sinks), modules_(options.debug_root) {
    modules_.SetInlinedFrames(options.inlined_frames);
    if (options.debuginfod) modules_.SetDebuginfod(image::DebuginfodFetcher::FromEnvironment(options.progress));
  }

  absl::StatusOr<DecodeResult> Run();

 private:
  // A stream ready to decode: where its events go, its bytes and checked chunks.
  struct StreamState {
    std::string name;
    std::unique_ptr<ThreadRouter> router;
    std::unique_ptr<StreamImageClock> clock;  // the models' view (and --jobs 1's decoder's)
    StreamJob job;
  };

  image::TimedProcessImage* ImageFor(int pid);
  std::unique_ptr<image::TimedProcessImage> MakeImage(int pid, bool timed, image::SectionCache* sections);
  image::SectionCache* ThreadSections();
  ThreadState* Thread(int pid, int tid, bool has_cycles);
  absl::StatusOr<std::unique_ptr<StreamState>> PrepareStream(const PtStream& stream, size_t index);
  absl::Status ApplyWindow(const std::vector<std::unique_ptr<StreamState>>& streams);
  // A per-thread stream whose file is missing: an instant on the thread's track, at the
  // trace's first PSB+ time, says that its trace is missing.
  void MarkMissingStreams(const std::vector<const PtStream*>& missing,
                          const std::vector<std::unique_ptr<StreamState>>& streams);
  // --tid: the thread must be one the trace knows (a per-thread stream, or a thread of
  // the sideband), so that a mistyped tid is an error, not an empty output.
  absl::Status CheckTidIsInTrace(int tid) const;
  absl::Status DecodeStream(StreamState* state);
  void FinishStream(StreamState* state);
  void Progress(uint64_t done_bytes);
  bool Cancelled() const { return options_.cancel != nullptr && options_.cancel->load(std::memory_order_relaxed); }

  std::string dir_;
  DecodeOptions options_;
  ThreadSinkFactory* sinks_;
  TraceMeta meta_;
  std::optional<Sideband> sideband_;
  image::SectionCache sections_;
  // Workers' images take their sections from a cache of their thread's own: libipt locks
  // a section at every image read its decoder's cache misses (each enable, disable and
  // event IP), and workers sharing one section contended on those locks (futex waits).
  std::mutex thread_sections_mutex_;
  std::map<std::thread::id, std::unique_ptr<image::SectionCache>> thread_sections_;
  image::ModuleCache modules_;
  // The fast decoder's runs of code, shared by every stream and worker (the same library
  // code runs in every process).
  SectionBlockCache section_blocks_;
  // The models' images (names are resolved from them), one per process, shared by every
  // stream of the process; a stream that starts earlier than the last one ended rebuilds.
  std::map<int, std::unique_ptr<image::TimedProcessImage>> images_;
  std::optional<bool> images_timed_;  // as the first stream's (timing packets or not)
  std::map<int, std::unique_ptr<ThreadState>> threads_;
  // Warnings every stream repeats (the recording CPU's errata) are said once.
  void AddWarningOnce(const std::string& warning) {
    if (std::find(result_.warnings.begin(), result_.warnings.end(), warning) == result_.warnings.end()) {
      result_.warnings.push_back(warning);
    }
  }

  DecodeResult result_;
  uint64_t total_bytes_ = 0;
  uint64_t done_bytes_ = 0;
  std::unique_ptr<ProgressBar> progress_;
};

}  // namespace ptd::decoder
