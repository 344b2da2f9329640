#include "decoder/trace_decoder.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <map>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/cpu_clock.h"
#include "common/file_util.h"
#include "common/progress_bar.h"
#include "common/trace_dir.h"
#include "common/trace_meta.h"
#include "common/units.h"
#include "decoder/model/call_stack_model.h"
#include "decoder/packets/cycle_index.h"
#include "decoder/output/ftf_slice_sink.h"
#include "decoder/coverage/collector.h"
#include "decoder/output/function_stats_sink.h"
#include "decoder/output/output_size_plan.h"
#include "decoder/parallel/parallel_decode.h"
#include "decoder/packets/psb_window.h"
#include "decoder/flow/pt_stream_decoder.h"
#include "decoder/flow/section_block_cache.h"
#include "ftf/ftf_writer.h"
#include "image/mapped_file.h"
#include "image/module_cache.h"
#include "image/padded_chunk.h"
#include "image/process_image.h"
#include "image/timed_image.h"
#include "image/section_cache.h"
#include "sideband/sideband_set.h"

namespace ptd::decoder {
namespace {

std::string Basename(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// One thread's model and where its slices go.
struct ThreadState {
  int pid = 0;
  int tid = 0;
  std::unique_ptr<ImageFunctionResolver> resolver;
  std::unique_ptr<CallStackModel> model;
  SliceSink* sink = nullptr;  // the model's: the first of the sinks below in use
  std::unique_ptr<FunctionStatsSink> stats_sink;  // --summary: every slice
  std::unique_ptr<DetailFilterSink> detail_sink;  // level of detail

  uint64_t routed_instructions = 0;  // per-CPU streams: this thread's own count so far
  bool routed = false;
};

// Feeds a stream's events to the model of the thread that runs them: the stream's own
// thread, or (per-CPU streams) the thread the schedule says was on the CPU then.
// A thread switched out keeps its open frames: it continues where it stopped when it
// runs again. Per-CPU streams count instructions for the CPU, so each routed event
// carries the instructions of its own thread instead.
// DecodeOptions::flow_observer first, then the stream's own consumer.
class FlowTee : public FlowConsumer {
 public:
  FlowTee(FlowConsumer* observer, FlowConsumer* consumer) : observer_(observer), consumer_(consumer) {}
  void OnFlow(const FlowEvent& event) override {
    observer_->OnFlow(event);
    consumer_->OnFlow(event);
  }

 private:
  FlowConsumer* observer_;
  FlowConsumer* consumer_;
};

class ThreadRouter : public FlowConsumer {
 public:
  using ThreadLookup = std::function<ThreadState*(uint64_t time)>;
  // `fixed`: the stream's only thread; else `lookup` routes by time.
  ThreadRouter(ThreadState* fixed, ThreadLookup lookup) : fixed_(fixed), lookup_(std::move(lookup)) {}

  // User-only tracing: a context switch runs in the kernel, so one thread's user code
  // ends with a disable (TIP.PGD) and the next one's begins with an enable (TIP.PGE, or
  // the first run after a sync or an overflow). Each enabled stretch then goes as a
  // whole to the thread on the CPU at its enable: at the time of the timing packets
  // before its TIP.PGE (FlowEvent::enable_time), not at the interpolated event times,
  // which may run past a switch (and, never going back, stay there).
  void RouteWholeSegments() { whole_segments_ = true; }

  void OnFlow(const FlowEvent& event) override {
    if (fixed_ != nullptr) {
      fixed_->model->OnEvent(event);  // a tail call: nothing per event here
      return;
    }
    Route(event);
  }
  // `cycles`: the stream's total (only a fixed thread's model counts cycles).
  void Finish(uint64_t time, uint64_t instructions, uint64_t cycles) {
    if (fixed_ != nullptr) {
      fixed_->model->Finish(time, instructions, cycles);
      return;
    }
    for (ThreadState* thread : routed_) {
      thread->model->Finish(thread->model->last_time(), thread->routed_instructions, 0);
    }
  }

 private:
  // Out of line, so the fixed thread's path above stays a few instructions per event.
  [[gnu::noinline]] void Route(const FlowEvent& event) {
    // The instructions since the previous event ran on the thread that is on the CPU now.
    uint64_t executed = event.instructions - stream_instructions_;
    stream_instructions_ = event.instructions;
    ThreadState* thread = nullptr;
    if (in_segment_ && event.kind != FlowKind::kEnable) {
      thread = segment_thread_;
    } else if (lookup_) {
      thread = lookup_(whole_segments_ && event.enable_time != 0 ? event.enable_time : event.time);
    }
    if (whole_segments_) {
      if (event.kind == FlowKind::kEnable) {
        in_segment_ = true;
        segment_thread_ = thread;
      } else if (event.kind == FlowKind::kDisable || event.kind == FlowKind::kOverflow ||
                 event.kind == FlowKind::kError || event.kind == FlowKind::kLostData) {
        in_segment_ = false;  // this event still belongs to the stretch it ends
      }
    }
    if (thread == nullptr) return;
    if (!thread->routed) {
      thread->routed = true;
      routed_.push_back(thread);
    }
    thread->routed_instructions += executed;
    FlowEvent own = event;
    own.instructions = thread->routed_instructions;
    thread->model->OnEvent(own);
  }

  ThreadState* fixed_;
  ThreadLookup lookup_;
  bool whole_segments_ = false;
  bool in_segment_ = false;  // between an enable and what ends its stretch
  ThreadState* segment_thread_ = nullptr;
  uint64_t stream_instructions_ = 0;
  std::vector<ThreadState*> routed_;  // threads this per-CPU stream fed, to finish at its end
};

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

// Where a per-CPU stream's CPU starts running another process, in time order.
struct ProcessSwitch {
  uint64_t time_ns = 0;
  int pid = 0;
};

// One decoder's (or the models') view of a stream's code: the image of the stream's
// process, or for a per-CPU stream of the process the schedule runs at that time, each
// with the mappings of that time. Process images come from `images` (the models' shared
// ones, or a worker's own).
class StreamImageClock : public ImageClock {
 public:
  using Images = std::function<image::TimedProcessImage*(int pid)>;
  // `switches` empty: always `pid`.
  StreamImageClock(Images images, int pid, std::shared_ptr<const std::vector<ProcessSwitch>> switches)
      : images_(std::move(images)), switches_(std::move(switches)), current_(images_(pid)) {
    if (!switches_->empty()) current_ = images_(switches_->front().pid);
  }

  image::ProcessImage* AdvanceTo(uint64_t time_ns) override {
    uint64_t next_switch = UINT64_MAX;
    if (!switches_->empty()) {
      auto after = std::upper_bound(switches_->begin(), switches_->end(), time_ns,
                                    [](uint64_t t, const ProcessSwitch& s) { return t < s.time_ns; });
      // Before the first switch: the first process (the CPU ran nothing traced yet).
      current_ = images_(after == switches_->begin() ? after->pid : std::prev(after)->pid);
      if (after != switches_->end()) next_switch = after->time_ns;
    }
    current_->AdvanceTo(time_ns);
    next_change_ = std::min(current_->next_change_ns(), next_switch);
    return current_->image();
  }
  image::ProcessImage* image() override { return current_->image(); }
  uint64_t next_change() const override { return next_change_; }
  uint64_t version() const override { return current_->generation(); }

 private:
  Images images_;
  std::shared_ptr<const std::vector<ProcessSwitch>> switches_;
  image::TimedProcessImage* current_;
  uint64_t next_change_ = 0;
};

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

// Timed: the sideband's changes are applied as the decoder's time reaches them. Untimed
// (no timing packets): everything ever mapped, at once. Called
// from worker threads too (their own images): reads only what does not change.
std::unique_ptr<image::TimedProcessImage> Decoding::MakeImage(int pid, bool timed, image::SectionCache* sections) {
  std::unique_ptr<image::TimedProcessImage> image = image::MakeTraceProcessImage(
      sections, &modules_, dir_, meta_, sideband_ ? &*sideband_ : nullptr, pid);
  if (!timed) image->ApplyAll();
  return image;
}

image::TimedProcessImage* Decoding::ImageFor(int pid) {
  std::unique_ptr<image::TimedProcessImage>& image = images_[pid];
  if (image == nullptr) image = MakeImage(pid, images_timed_.value_or(false), &sections_);
  return image.get();
}

image::SectionCache* Decoding::ThreadSections() {
  std::lock_guard<std::mutex> lock(thread_sections_mutex_);
  std::unique_ptr<image::SectionCache>& sections = thread_sections_[std::this_thread::get_id()];
  if (sections == nullptr) sections = std::make_unique<image::SectionCache>();
  return sections.get();
}

ThreadState* Decoding::Thread(int pid, int tid, bool has_cycles) {
  if (options_.tid && *options_.tid != tid) return nullptr;
  auto it = threads_.find(tid);
  if (it != threads_.end()) return it->second.get();
  std::string thread_name, process_name;
  if (sideband_) {
    thread_name = sideband_->threads.LastName(tid);
    process_name = sideband_->threads.LastName(pid);
  }
  std::string fallback = meta_.command.empty() ? "trace" : Basename(meta_.command[0]);
  if (thread_name.empty()) thread_name = fallback;
  if (process_name.empty()) process_name = fallback;
  // A container's threads: the track also shows the tid inside its pid namespace.
  if (auto inner = meta_.namespace_tids.find(tid); inner != meta_.namespace_tids.end()) {
    absl::StrAppend(&thread_name, " (tid ", inner->second, " in its namespace)");
  }
  if (auto inner = meta_.namespace_tids.find(pid); inner != meta_.namespace_tids.end()) {
    absl::StrAppend(&process_name, " (pid ", inner->second, " in its namespace)");
  }
  auto state = std::make_unique<ThreadState>();
  state->pid = pid;
  state->tid = tid;
  // The process's shared image: at the time of the event being handed to the model.
  state->resolver = std::make_unique<ImageFunctionResolver>(ImageFor(pid)->image());
  SliceSink* sink = sinks_->ForThread(pid, tid, thread_name, process_name);
  if (options_.detail.active()) {
    state->detail_sink = std::make_unique<DetailFilterSink>(sink, options_.detail);
    sink = state->detail_sink.get();
  }
  if (options_.function_stats != nullptr) {
    state->stats_sink = std::make_unique<FunctionStatsSink>(options_.function_stats, pid, tid, sink);
    sink = state->stats_sink.get();
  }
  state->sink = sink;
  state->model = std::make_unique<CallStackModel>(state->resolver.get(), sink, has_cycles);
  ThreadState* raw = state.get();
  threads_.emplace(tid, std::move(state));
  return raw;
}

// A chunk that takes up the stream where the previous one stopped (the next bytes of the
// same AUX stream, next in the file, nothing lost between: a drain or a snapshot of a
// full-trace ring) is the same byte stream: decoded as one, so a packet or PSB interval
// cut at the border is not lost to a resync.
bool ContinuesChunk(const std::vector<PtChunk>& chunks, const PtChunk& chunk) {
  if (chunks.empty()) return false;
  const PtChunk& last = chunks.back();
  return !chunk.lost_before && !last.truncated && !last.overwrite && !chunk.overwrite &&
         chunk.file_offset == last.file_offset + last.size && chunk.aux_offset == last.aux_offset + last.size;
}

absl::StatusOr<std::unique_ptr<Decoding::StreamState>> Decoding::PrepareStream(const PtStream& stream,
                                                                                size_t index) {
  std::string path = ResolveTracePath(dir_, stream.file);
  absl::StatusOr<std::shared_ptr<const image::MappedFile>> file = image::MappedFile::Open(path);
  if (!file.ok()) return file.status();
  absl::Span<const uint8_t> bytes = (*file)->bytes();

  // Which process and thread this stream belongs to.
  int default_pid = meta_.pids.empty() ? 1 : meta_.pids[0];
  int tid = stream.tid;
  int pid = default_pid;
  if (tid >= 0 && sideband_ && sideband_->threads.PidOf(tid) >= 0) pid = sideband_->threads.PidOf(tid);
  if (tid >= 0 && tid == default_pid) pid = tid;
  bool route_by_schedule = false;
  if (stream.cpu >= 0 && sideband_ && !sideband_->schedule.Intervals(stream.cpu).empty()) {
    route_by_schedule = true;
    // The first interval that ran a traced process (not idle, pid 0, nor unknown).
    for (const CpuInterval& interval : sideband_->schedule.Intervals(stream.cpu)) {
      if (interval.pid > 0) {
        pid = interval.pid;
        break;
      }
    }
  }
  if (tid < 0 && !route_by_schedule) tid = stream.cpu >= 0 ? 0x7f000000 + stream.cpu : pid + static_cast<int>(index);

  auto state = std::make_unique<StreamState>();
  state->name = stream.file;
  PtDecodeConfig& config = state->job.config;
  config.kind = options_.decoder;
  config.section_blocks = &section_blocks_;
  // An emulated trace was written by no real CPU: it has no errata to apply or warn about.
  if (meta_.mode != TraceMode::kEmulated) config.cpu = meta_.host.cpu;
  config.pt = meta_.pt;
  config.conversion = meta_.time;
  // The time axis needs timing packets; without them instructions stand in for time.
  bool has_tsc = false;
  if (!stream.chunks.empty()) {
    const PtChunk& first = stream.chunks.front();
    if (first.file_offset < bytes.size()) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(first.size, bytes.size() - first.file_offset));
      has_tsc = StreamHasTsc(bytes.subspan(first.file_offset, n), n);
      // CYC: meta.json's cyc field when it says off (no look at all), else the first 64 KiB.
      auto cyc = meta_.pt.fields.find("cyc");
      if (cyc == meta_.pt.fields.end() || cyc->second != 0) config.cycles = StreamHasCyc(bytes.subspan(first.file_offset, n));
    }
  }
  config.axis = TimeAxis::kInstructions;
  if (options_.axis == TimeAxisChoice::kTime) {
    if (has_tsc) {
      config.axis = TimeAxis::kTime;
    } else {
      result_.time_axis_is_instructions = true;
      if (index == 0) result_.warnings.push_back(absl::StrCat(stream.file, ": no timing packets: the time axis counts instructions"));
    }
  } else if (options_.axis == TimeAxisChoice::kCycles) {
    if (config.cycles) {
      config.axis = TimeAxis::kCycles;
      result_.time_axis_is_cycles = true;
    } else {
      result_.time_axis_is_instructions = true;
      result_.warnings.push_back(absl::StrCat(stream.file, ": no CYC packets: its time axis counts instructions, not cycles"));
    }
  } else {
    result_.time_axis_is_instructions = true;
  }
  if (route_by_schedule && config.axis != TimeAxis::kTime) route_by_schedule = false;
  if (!route_by_schedule && tid < 0) tid = 0x7f000000 + stream.cpu;

  // The image timeline (docs/decoder.md): with timing packets each decoder's image
  // follows them, whatever the output axis (code replaced at run time decodes with the
  // bytes of its time); a per-CPU stream's follows the process the schedule runs.
  const bool timed = has_tsc;
  if (!images_timed_.has_value()) images_timed_ = timed;
  auto switches = std::make_shared<std::vector<ProcessSwitch>>();
  if (route_by_schedule) {
    for (const CpuInterval& interval : sideband_->schedule.Intervals(stream.cpu)) {
      if (interval.pid > 0 && (switches->empty() || switches->back().pid != interval.pid)) {
        switches->push_back({interval.begin_ns, interval.pid});
      }
    }
  }
  // A decoder's own images (workers, and a stream timed unlike the first).
  auto own_images = [this, timed]() -> StreamImageClock::Images {
    auto own = std::make_shared<std::map<int, std::unique_ptr<image::TimedProcessImage>>>();
    return [this, own, timed](int p) {
      std::unique_ptr<image::TimedProcessImage>& image = (*own)[p];
      if (image == nullptr) image = MakeImage(p, timed, ThreadSections());
      return image.get();
    };
  };
  StreamImageClock::Images shared = [this](int p) { return ImageFor(p); };
  state->clock = std::make_unique<StreamImageClock>(timed == *images_timed_ ? shared : own_images(), pid, switches);
  if (timed) state->job.clock = state->clock.get();
  // Workers decode with images of their own, timed or not (their own sections too).
  state->job.make_clock = [own_images, pid, switches]() -> std::unique_ptr<ImageClock> {
    return std::make_unique<StreamImageClock>(own_images(), pid, switches);
  };
  if (route_by_schedule) {
    int cpu = stream.cpu;
    state->router = std::make_unique<ThreadRouter>(nullptr, [this, cpu, pid](uint64_t time) -> ThreadState* {
      std::optional<CpuInterval> interval = sideband_->schedule.ThreadAt(cpu, time);
      if (!interval) return nullptr;
      return Thread(interval->pid >= 0 ? interval->pid : pid, interval->tid, false);
    });
    if (meta_.pt.user_only) state->router->RouteWholeSegments();
  } else {
    // --tid filtering: a stream of another thread feeds nothing.
    state->router = std::make_unique<ThreadRouter>(Thread(pid, tid, config.cycles), nullptr);
  }
  state->job.image = state->clock->image();
  state->job.consumer = state->router.get();
  state->job.file = *file;
  for (size_t c = 0; c < stream.chunks.size(); ++c) {
    PtChunk chunk = stream.chunks[c];
    if (chunk.file_offset >= bytes.size()) {
      result_.warnings.push_back(absl::StrFormat("%s: chunk %d [0x%x, +0x%x) is beyond the file's end (0x%x)",
                                                 stream.file, c, chunk.file_offset, chunk.size, bytes.size()));
      continue;
    }
    if (chunk.size > bytes.size() - chunk.file_offset) {
      // A truncated file (copy cut short, disk full): decode the bytes that are there.
      result_.warnings.push_back(absl::StrFormat(
          "%s: chunk %d [0x%x, +0x%x) reaches past the file's end (0x%x): decoding the 0x%x bytes there",
          stream.file, c, chunk.file_offset, chunk.size, bytes.size(), bytes.size() - chunk.file_offset));
      chunk.size = bytes.size() - chunk.file_offset;
      chunk.truncated = true;
    }
    if (ContinuesChunk(state->job.chunks, chunk)) {
      state->job.chunks.back().size += chunk.size;
      state->job.chunks.back().truncated = chunk.truncated;
      continue;
    }
    state->job.chunks.push_back(chunk);
  }
  return state;
}

void Decoding::MarkMissingStreams(const std::vector<const PtStream*>& missing,
                                  const std::vector<std::unique_ptr<StreamState>>& streams) {
  if (missing.empty()) return;
  uint64_t first_time = UINT64_MAX;
  for (const auto& state : streams) {
    if (state->job.config.axis != TimeAxis::kTime || state->job.chunks.empty()) continue;
    const PtChunk& chunk = state->job.chunks.front();
    absl::Span<const uint8_t> bytes = state->job.file->bytes();
    if (chunk.file_offset >= bytes.size()) continue;
    bytes = bytes.subspan(chunk.file_offset, std::min<uint64_t>(chunk.size, bytes.size() - chunk.file_offset));
    if (std::optional<PsbTime> t = FirstTimedPsbAtOrAfter(bytes, 0, meta_.time)) first_time = std::min(first_time, t->time);
  }
  if (first_time == UINT64_MAX) first_time = 0;
  for (const PtStream* stream : missing) {
    if (stream->tid < 0) continue;
    const int pid = sideband_ && sideband_->threads.PidOf(stream->tid) >= 0 ? sideband_->threads.PidOf(stream->tid)
                                                                            : stream->tid;
    if (ThreadState* thread = Thread(pid, stream->tid, false)) {
      thread->sink->Instant(first_time, "trace missing",
                            absl::StrCat(stream->file, " is missing from the trace directory: this thread's "
                                                       "execution is not in this file"));
    }
  }
}

absl::Status Decoding::CheckTidIsInTrace(int tid) const {
  std::set<int> known;
  for (const PtStream& stream : meta_.streams) {
    if (stream.tid >= 0) known.insert(stream.tid);
  }
  if (sideband_) {
    for (const ThreadInfo& thread : sideband_->threads.Threads()) known.insert(thread.tid);
  }
  if (known.empty() || known.count(tid) != 0) return absl::OkStatus();
  std::vector<std::string> listed;
  for (int t : known) {
    if (listed.size() == 20) {
      listed.push_back(absl::StrCat("... (", known.size(), " in all; `ptrace-direct info` lists them)"));
      break;
    }
    listed.push_back(absl::StrCat(t));
  }
  return absl::NotFoundError(absl::StrCat("--tid ", tid, ": no such thread in ", dir_, "; its threads: ",
                                          absl::StrJoin(listed, ", ")));
}

// Cuts every stream's chunks down to the PSB intervals the window needs. Errors (a window
// outside the trace, a time window on an untimed trace) come before any decoding.
absl::Status Decoding::ApplyWindow(const std::vector<std::unique_ptr<StreamState>>& streams) {
  const DecodeWindow& window = options_.window;
  const bool by_time = window.kind == DecodeWindow::Kind::kTime;
  auto chunk_bytes = [](const StreamState& state, const PtChunk& chunk) {
    return state.job.file->bytes().subspan(chunk.file_offset, chunk.size);
  };
  // The trace's span as its PSB+ groups give it: first and last PSB time of all streams.
  uint64_t first_time = UINT64_MAX, last_time = 0;
  uint64_t total_bytes = 0;
  for (const auto& state : streams) {
    if (by_time && state->job.config.axis != TimeAxis::kTime) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--window: ", state->name,
          " has no timing packets (or the time axis is not time): use --window-offset (PT byte offsets)"));
    }
    for (const PtChunk& chunk : state->job.chunks) {
      total_bytes += chunk.size;
      if (!by_time) continue;
      absl::Span<const uint8_t> bytes = chunk_bytes(*state, chunk);
      if (std::optional<PsbTime> first = FirstTimedPsbAtOrAfter(bytes, 0, meta_.time)) {
        first_time = std::min(first_time, first->time);
        last_time = std::max(last_time, first->time);
      }
      if (std::optional<uint64_t> last = LastPsbAtOrBefore(bytes, bytes.size())) {
        if (std::optional<PsbTime> t = FirstTimedPsbAtOrAfter(bytes, *last, meta_.time)) {
          last_time = std::max(last_time, t->time);
        }
      }
    }
  }
  uint64_t begin = window.begin, end = window.end;
  if (by_time && window.relative && first_time != UINT64_MAX) {
    begin = first_time + window.begin;
    end = window.end == UINT64_MAX ? UINT64_MAX : first_time + window.end;
  }
  // The trace goes on past its last PSB+, to the recording's end (meta.json's end_ns,
  // on the same clock when it is not before the first PSB+): a window that begins in
  // between decodes the last PSB's interval.
  const uint64_t trace_end = meta_.end_ns >= first_time && first_time != UINT64_MAX
                                 ? std::max(last_time, meta_.end_ns) : last_time;
  if (by_time && (first_time == UINT64_MAX || end <= first_time || begin > trace_end)) {
    return absl::InvalidArgumentError(
        first_time == UINT64_MAX
            ? std::string("--window: the trace has no PSB+ with a TSC")
            : absl::StrFormat("--window [%d, %d) lies outside the trace: its PSB+ times run from %d to %d "
                              "(+0 to +%s), and the trace ends at %d",
                              begin, end, first_time, last_time, FormatDurationNs(last_time - first_time),
                              trace_end));
  }
  uint64_t kept_bytes = 0;
  for (const auto& state : streams) {
    std::vector<PtChunk> kept;
    const std::vector<PtChunk>& chunks = state->job.chunks;
    for (size_t c = 0; c < chunks.size(); ++c) {
      absl::Span<const uint8_t> bytes = chunk_bytes(*state, chunks[c]);
      ByteRange range;
      if (by_time) {
        // A chunk whose successor starts at or before the window needs nothing.
        if (c + 1 < chunks.size()) {
          std::optional<PsbTime> next = FirstTimedPsbAtOrAfter(chunk_bytes(*state, chunks[c + 1]), 0, meta_.time);
          if (next && next->time <= begin) continue;
        }
        range = PsbRangeForTimes(bytes, begin, end, meta_.time);
      } else {
        // Offsets are stream file offsets; each chunk holds a part of them.
        const uint64_t lo = chunks[c].file_offset, hi = lo + chunks[c].size;
        if (end <= lo || begin >= hi) continue;
        range = PsbRangeForOffsets(bytes, begin > lo ? begin - lo : 0, end < hi ? end - lo : chunks[c].size);
      }
      if (range.empty()) continue;
      PtChunk part = chunks[c];
      part.file_offset += range.begin;
      part.size = range.end - range.begin;
      if (kept.empty()) part.lost_before = false;
      kept.push_back(part);
      kept_bytes += part.size;
      std::string times;
      if (by_time) {
        absl::Span<const uint8_t> cut = bytes.subspan(range.begin, range.end - range.begin);
        std::optional<PsbTime> t0 = FirstTimedPsbAtOrAfter(cut, 0, meta_.time);
        std::optional<PsbTime> t1 = FirstTimedPsbAtOrAfter(bytes, range.end, meta_.time);
        if (t0) times = absl::StrFormat(", times from %d (+%s)", t0->time, FormatDurationNs(t0->time - first_time));
        if (t0 && t1) absl::StrAppendFormat(&times, " to %d (+%s)", t1->time, FormatDurationNs(t1->time - first_time));
      }
      result_.notes.push_back(absl::StrFormat("window: %s: decoding PT bytes [0x%x, 0x%x)%s", state->name,
                                              part.file_offset, part.file_offset + part.size, times));
    }
    state->job.chunks = std::move(kept);
  }
  if (kept_bytes == 0) {
    return absl::InvalidArgumentError(absl::StrFormat("%s [%d, %d) holds no PT data (the streams hold %d bytes)",
                                                      by_time ? "--window" : "--window-offset", begin, end,
                                                      total_bytes));
  }
  result_.notes.push_back(absl::StrFormat("window: %s of %s of PT (%.1f%%)", FormatByteSize(kept_bytes),
                                          FormatByteSize(total_bytes), 100.0 * kept_bytes / std::max<uint64_t>(1, total_bytes)));
  total_bytes_ = kept_bytes;
  return absl::OkStatus();
}

void Decoding::Progress(uint64_t done_bytes) {
  if (progress_ != nullptr) progress_->Update(done_bytes);
}

// One libipt decoder over each chunk of the stream, in order (--jobs 1).
absl::Status Decoding::DecodeStream(StreamState* state) {
  StreamJob& job = state->job;
  FlowTee tee(options_.flow_observer, job.consumer);
  std::unique_ptr<FlowDecoder> owned =
      MakeFlowDecoder(job.config, job.image, options_.flow_observer != nullptr ? &tee : job.consumer);
  FlowDecoder& decoder = *owned;
  if (job.clock != nullptr) decoder.set_image_clock(job.clock);
  std::unique_ptr<BlockObserver> coverage;
  if (options_.coverage != nullptr) coverage = options_.coverage->ForStream(job.clock, job.image);
  decoder.set_block_observer(coverage != nullptr ? coverage.get() : options_.block_observer);
  decoder.set_cancel_flag(options_.cancel);
  if (progress_ != nullptr) decoder.set_progress([this](uint64_t offset) { Progress(done_bytes_ + offset); });
  bool previous_truncated = false;
  for (size_t c = 0; c < job.chunks.size() && !decoder.cancelled(); ++c) {
    const PtChunk& chunk = job.chunks[c];
    if (c > 0 && (chunk.lost_before || previous_truncated)) decoder.MarkLostData(chunk.file_offset);
    previous_truncated = chunk.truncated;
    // libipt reads past the end while searching for a PSB: give it zeros there.
    absl::StatusOr<std::unique_ptr<image::PaddedChunk>> padded =
        image::PaddedChunk::Map(job.file->path(), chunk.file_offset, static_cast<size_t>(chunk.size), kPtPadding);
    if (!padded.ok()) return padded.status();
    absl::Status s = decoder.DecodeChunk((*padded)->data(), chunk.size, chunk.file_offset);
    if (!s.ok()) return s;
    done_bytes_ += chunk.size;
    Progress(done_bytes_);
  }
  job.stats = decoder.stats();
  job.instructions = decoder.instructions();
  job.last_time = decoder.last_time();
  job.cycles = decoder.cycles_total();
  job.warnings = decoder.warnings();
  return absl::OkStatus();
}

void Decoding::FinishStream(StreamState* state) {
  StreamJob& job = state->job;
  // Open frames end with the stream: on the cycles axis at its last cycle.
  uint64_t end_time = job.config.axis == TimeAxis::kCycles ? std::max(job.last_time, job.cycles) : job.last_time;
  state->router->Finish(end_time, job.instructions, job.cycles);
  if (job.config.cycles) {
    result_.has_cycles = true;
    result_.stats.Add(Stat::kCycles, job.cycles);
  }
  result_.stats.Merge(job.stats);
  for (const std::string& w : job.warnings) AddWarningOnce(w);
}

absl::StatusOr<DecodeResult> Decoding::Run() {
  auto start = std::chrono::steady_clock::now();
  const uint64_t setup_started = ThreadCpuNs();
  absl::StatusOr<TraceMeta> meta = ReadTraceMeta(dir_);
  if (!meta.ok()) return meta.status();
  meta_ = *std::move(meta);
  for (const SidebandFile& file : meta_.sideband) {
    if (FileSize(ResolveTracePath(dir_, file.file)) < 0) {
      result_.missing_files.push_back(file.file);
      result_.warnings.push_back(absl::StrCat(
          file.file, " is missing from ", dir_,
          ": the memory maps, threads and exits it recorded are unknown, so code mapped only there "
          "is not decoded (decode errors) and threads may lack names"));
    }
  }
  if (!meta_.sideband.empty()) {
    SidebandLoadOptions sb_options;
    sb_options.keep_going = true;
    absl::StatusOr<Sideband> sideband = LoadSideband(dir_, meta_, sb_options);
    if (sideband.ok()) {
      sideband_ = *std::move(sideband);
      for (const std::string& p : sideband_->problems) {
        // A missing file is said once, above, with what it means.
        const bool about_missing = std::any_of(
            result_.missing_files.begin(), result_.missing_files.end(),
            [&](const std::string& f) { return absl::StrContains(p, ResolveTracePath(dir_, f)); });
        if (!about_missing) result_.warnings.push_back(p);
      }
    } else {
      result_.warnings.push_back(absl::StrCat("sideband unreadable, decoding without it: ", sideband.status().message()));
    }
  }
  if (meta_.mode != TraceMode::kEmulated && meta_.host.cpu.vendor != "intel") {
    result_.warnings.push_back("the recording CPU is not known: no libipt errata are applied");
  }
  for (const PtStream& s : meta_.streams) {
    for (const PtChunk& c : s.chunks) total_bytes_ += c.size;
  }
  std::vector<std::unique_ptr<StreamState>> streams;
  // A stream file that is missing costs its own thread only: the others decode, and the
  // thread's track says why it is empty (MarkMissingStreams).
  std::vector<const PtStream*> missing_streams;
  for (size_t i = 0; i < meta_.streams.size(); ++i) {
    absl::StatusOr<std::unique_ptr<StreamState>> state = PrepareStream(meta_.streams[i], i);
    if (!state.ok()) {
      if (!absl::IsNotFound(state.status()) || meta_.streams.size() == 1) return state.status();
      missing_streams.push_back(&meta_.streams[i]);
      result_.missing_files.push_back(meta_.streams[i].file);
      AddWarningOnce(absl::StrCat(meta_.streams[i].file, " is missing: ",
                                  meta_.streams[i].tid >= 0 ? absl::StrCat("thread ", meta_.streams[i].tid)
                                                            : absl::StrCat("cpu ", meta_.streams[i].cpu),
                                  " is not decoded; the other streams are"));
      continue;
    }
    streams.push_back(*std::move(state));
  }
  if (streams.empty()) {
    return absl::NotFoundError(absl::StrCat(dir_, ": every PT stream file is missing (aux/)"));
  }
  if (options_.tid) {
    if (absl::Status s = CheckTidIsInTrace(*options_.tid); !s.ok()) return s;
  }
  if (options_.window.kind != DecodeWindow::Kind::kNone) {
    if (absl::Status s = ApplyWindow(streams); !s.ok()) return s;
  }
  if (options_.progress) {
    progress_ = std::make_unique<ProgressBar>(options_.progress_label, total_bytes_, true);
  }
  size_t finished = 0;  // streams whose routers are finished
  const int jobs = DecodeJobs(options_.jobs, total_bytes_, std::thread::hardware_concurrency());
  // Coverage's blocks come from the runs its decoders report, and libipt's block decoder
  // ends runs where its own block cache says, which differs between the pieces' decoders
  // and one decoder's: coverage with it decodes on one thread.
  const bool in_pieces = jobs > 1 && options_.block_observer == nullptr && options_.flow_observer == nullptr &&
                         (options_.coverage == nullptr || options_.decoder != DecoderKind::kBlock);
  result_.stats.Set(Stat::kJobs, in_pieces ? static_cast<uint64_t>(jobs) : 1);
  const uint64_t decode_started = ThreadCpuNs();
  result_.stats.Set(Stat::kSetupCpuNs, decode_started - setup_started);
  if (!in_pieces) {
    for (; finished < streams.size() && !Cancelled(); ++finished) {
      absl::Status s = DecodeStream(streams[finished].get());
      if (!s.ok()) return s;
      if (Cancelled()) break;
      FinishStream(streams[finished].get());
    }
    result_.stats.Set(Stat::kSerialCpuNs, ThreadCpuNs() - decode_started);
  } else {
    std::vector<StreamJob*> stream_jobs;
    for (auto& state : streams) {
      if (options_.coverage != nullptr) {
        CoverageCollector* coverage = options_.coverage;
        state->job.make_run_observer = [coverage](ImageClock* clock) { return coverage->ForPieces(clock); };
      }
      stream_jobs.push_back(&state->job);
    }
    ParallelOptions parallel;
    parallel.jobs = jobs;
    parallel.piece_bytes = options_.piece_bytes;
    parallel.cancel = options_.cancel;
    parallel.progress = [this](uint64_t done) { Progress(done); };
    parallel.stream_done = [&](size_t index) {
      FinishStream(streams[index].get());
      finished = index + 1;
    };
    ParallelCosts costs;
    absl::Status s = DecodeStreamsInParallel(stream_jobs, parallel, &costs);
    if (!s.ok()) return s;
    result_.stats.Set(Stat::kPieces, costs.pieces.size());
    result_.stats.Set(Stat::kPieceRedos, costs.redos);
    result_.stats.Set(Stat::kSerialCpuNs, costs.serial_cpu_ns);
    result_.stats.Set(Stat::kLoadCpuNs, costs.load_cpu_ns);
    result_.stats.Set(Stat::kPieceStartCpuNs, costs.start_cpu_ns);
    uint64_t piece_cpu_ns = 0;
    for (const PieceCost& piece : costs.pieces) piece_cpu_ns += piece.cpu_ns;
    result_.stats.Set(Stat::kPieceCpuNs, piece_cpu_ns);
    result_.pieces = std::move(costs.pieces);
  }
  if (Cancelled()) {
    // Ctrl-C: close what the stream being decoded left open, then say so on every thread
    // seen, so the partial file reads as partial.
    result_.interrupted = true;
    if (finished < streams.size()) FinishStream(streams[finished].get());
    for (const auto& [tid, thread] : threads_) {
      thread->sink->Instant(thread->model->last_time(), "decode interrupted",
                            "decoding stopped by a signal: the trace after this point is not in this file");
    }
  }
  if (progress_ != nullptr) progress_->Finish(!Cancelled());
  MarkMissingStreams(missing_streams, streams);
  for (const auto& [tid, thread] : threads_) {
    result_.stats.Merge(thread->model->stats());
    if (thread->detail_sink != nullptr) result_.stats.Merge(thread->detail_sink->stats());
  }
  // Each process's image warns about the files it maps; a file several processes map
  // (libc, a damaged archive entry) is warned about once.
  std::set<std::string> image_warnings;
  for (const auto& [pid, image] : images_) {
    for (std::string& w : image->TakeWarnings()) {
      if (image_warnings.insert(w).second) result_.warnings.push_back(std::move(w));
    }
    result_.missing_binaries.Add(image->missing_binaries());
  }
  if (const image::DebuginfodFetcher* debuginfod = modules_.debuginfod()) {
    for (const std::string& w : debuginfod->warnings()) result_.warnings.push_back(w);
    if (std::string summary = debuginfod->Summary(); !summary.empty()) result_.notes.push_back(std::move(summary));
  }
  result_.stats.Set(Stat::kThreads, threads_.size());
  result_.stats.Set(Stat::kProcessCpuNs, ProcessCpuNs());
  result_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result_;
}

}  // namespace

absl::StatusOr<DecodeResult> DecodeTrace(const std::string& trace_dir, const DecodeOptions& options,
                                         ThreadSinkFactory* sinks) {
  Decoding decoding(trace_dir, options, sinks);
  return decoding.Run();
}

namespace {

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

absl::StatusOr<DecoderKind> ParseDecoderKind(absl::string_view name) {
  if (name == "fast") return DecoderKind::kFast;
  if (name == "libipt-block" || name == "block") return DecoderKind::kBlock;
  if (name == "libipt-insn" || name == "insn") return DecoderKind::kInsn;
  return absl::InvalidArgumentError("--decoder must be fast, libipt-block or libipt-insn");
}

int DecodeJobs(int asked, uint64_t pt_bytes, unsigned cores) {
  if (asked > 0) return asked;
  // One per core, unless the trace is too small to gain: each worker has a decoder,
  // images and caches of its own to start, and its pieces record their events for the
  // stitcher (the 0.7 MB mruby sample took 1.8x the CPU time of one thread, and longer).
  if (pt_bytes < DecodeOptions::kMinParallelBytes) return 1;
  return static_cast<int>(std::max(1u, cores));
}

std::string DecodeStatsJson(const DecodeResult& result) {
  std::string json = "{";
  for (size_t i = 0; i < kStatCount; ++i) {
    const Stat stat = static_cast<Stat>(i);
    // "cycles" only when some stream had CYC packets.
    if (stat == Stat::kCycles && !result.has_cycles) continue;
    absl::StrAppend(&json, i == 0 ? "" : ", ", "\"", Stats::Key(stat), "\": ", result.stats[stat]);
    // Where it always was (scripts read the keys, but people read the file).
    if (stat == Stat::kSegments) absl::StrAppend(&json, absl::StrFormat(", \"seconds\": %.6f", result.seconds));
  }
  // Each piece's cost, in the order the pieces were handed out (the makespan model's input).
  auto list = [&](absl::string_view key, uint64_t PieceCost::*field) {
    absl::StrAppend(&json, ", \"", key, "\": [");
    for (size_t i = 0; i < result.pieces.size(); ++i) {
      absl::StrAppend(&json, i == 0 ? "" : ", ", result.pieces[i].*field);
    }
    json += "]";
  };
  list("piece_bytes_each", &PieceCost::bytes);
  list("piece_cpu_ns_each", &PieceCost::cpu_ns);
  list("piece_serial_cpu_ns_each", &PieceCost::serial_cpu_ns);
  json += "}\n";
  return json;
}

}  // namespace ptd::decoder
