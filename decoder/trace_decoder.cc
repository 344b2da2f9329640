#include "decoder/trace_decoder.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/cpu_clock.h"
#include "common/file_util.h"
#include "common/trace_dir.h"
#include "decoder/coverage/collector.h"
#include "decoder/decoding.h"
#include "decoder/flow/pt_stream_decoder.h"
#include "image/padded_chunk.h"

namespace ptd::decoder {
namespace {

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

}  // namespace

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
  std::string fallback = meta_.command.empty() ? "trace" : std::string(Basename(meta_.command[0]));
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

absl::StatusOr<DecodeResult> DecodeTrace(const std::string& trace_dir, const DecodeOptions& options,
                                         ThreadSinkFactory* sinks) {
  Decoding decoding(trace_dir, options, sinks);
  return decoding.Run();
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
