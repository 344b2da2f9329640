#include "decoder/parallel/parallel_decode.h"

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "common/cpu_clock.h"
#include "common/pt_psb.h"
#include "decoder/parallel/piece_decoder.h"
#include "decoder/flow/pt_stream_decoder.h"
#include "image/padded_chunk.h"

namespace ptd::decoder {
namespace {

// Bytes of one trace chunk, mapped (with libipt's zero padding) by the first piece that
// needs them and unmapped with the last piece.
struct Buffer {
  const uint8_t* source = nullptr;
  std::string path;  // of the file
  size_t size = 0;
  uint64_t file_offset = 0;
  std::vector<uint64_t> psbs;
  std::once_flag once;
  std::unique_ptr<image::PaddedChunk> padded;
  std::vector<uint8_t> copy;  // only when the file cannot be mapped again
  bool index_cycles = false;  // the stream has CYC: index the buffer when loading it
  bool scan_packets = false;  // the fast decoder reads it: PacketQuery's scan on loading
  PacketQuery::Scan packet_scan;
  int index_threads = 1;      // ... both on this many threads at once (the other pieces wait)
  CycleIndex cycles;
  std::shared_ptr<SharedTimeIndex> times = std::make_shared<SharedTimeIndex>();

  const uint8_t* bytes() const;
  const uint8_t* Load() {
    std::call_once(once, [this] {
      absl::StatusOr<std::unique_ptr<image::PaddedChunk>> mapped =
          image::PaddedChunk::Map(path, file_offset, size, kPtPadding);
      if (mapped.ok()) {
        padded = std::move(*mapped);
      } else {
        // The file went away since it was opened (its mapping still holds the bytes).
        copy.reserve(size + kPtPadding);
        copy.assign(source, source + size);
        copy.resize(size + kPtPadding, 0);
      }
      if (scan_packets) packet_scan = ScanPacketsForQuery(bytes(), size, index_threads);
      if (packet_scan.times != nullptr) times = packet_scan.times;  // one time index per buffer
      if (index_cycles) {
        cycles = packet_scan.cycles != nullptr ? std::move(*packet_scan.cycles)
                                               : CycleIndex::Build(bytes(), size, psbs, index_threads);
      }
    });
    return bytes();
  }
};

const uint8_t* Buffer::bytes() const { return padded != nullptr ? padded->data() : copy.data(); }

struct Piece {
  size_t stream = 0;
  size_t chunk = 0;
  std::shared_ptr<Buffer> buffer;
  PieceSpec spec;  // kContinue pieces guess the carried state (the common case)
  uint64_t bytes = 0;
  // Result.
  bool done = false;
  uint64_t cpu_ns = 0;         // its decode's thread CPU time (the first decode, not a redo)
  uint64_t load_cpu_ns = 0;    // ... loading its buffer, when it was the piece that did
  uint64_t start_cpu_ns = 0;   // of cpu_ns: its thread's decoder and images, made for it
  uint64_t serial_cpu_ns = 0;  // the stitching thread's time taking it in (a redo included)
  PieceSpec ran;  // the spec its events came from (`spec`, or a redo's)
  absl::Status status;
  PieceEvents events;
  TimeSteps steps;
  PieceOutcome outcome;
  std::vector<std::string> warnings;
  std::unique_ptr<PieceRuns> runs;  // what it ran (coverage): added if it is used
};

// A decoder per stream and thread, with images of its own (the worker is at its own
// time), so the classifier's cache and libipt's block cache are reused from piece to piece.
struct ThreadStream {
  explicit ThreadStream(const StreamJob& job)
      : clock(job.make_clock()), decoder(MakeFlowDecoder(job.config, clock->image(), nullptr)) {
    decoder->set_image_clock(clock.get());
    if (job.make_run_observer) {
      runs = job.make_run_observer(clock.get());
      decoder->set_block_observer(runs.get());
    }
  }
  std::unique_ptr<ImageClock> clock;
  std::unique_ptr<FlowDecoder> decoder;
  std::unique_ptr<PieceRunObserver> runs;  // null: no coverage
};

// Turns pieces back into the single decoder's event sequence for one stream.
class PieceStitcher {
 public:
  PieceStitcher(const PtDecodeConfig& config, FlowConsumer* consumer)
      : clock_(config.axis, config.conversion, consumer),
        cycles_(config.cycles),
        cycles_axis_(config.axis == TimeAxis::kCycles) {}

  // A new chunk: its pieces' cycles are relative to its start, after the chunks before.
  void StartChunk() {
    cycles_base_ += chunk_cycles_;
    chunk_cycles_ = 0;
  }

  // A chunk's pieces are all in: what waits for a later timing update is timed without
  // one, as the single decoder does at the end of each chunk.
  void EndChunk() { clock_.Finish(CarriedTicket()); }

  void MarkLostData(uint64_t offset) {
    carried_.valid = false;
    FlowEvent event;
    event.kind = FlowKind::kLostData;
    event.target_known = false;
    event.instructions = instructions_;
    last_cycles_ = std::max(last_cycles_, cycles_base_);
    event.cycles = last_cycles_;
    event.time = cycles_axis_                         ? clock_.Now(last_cycles_)
                 : clock_.axis() == TimeAxis::kTime ? clock_.Sample(instructions_)
                                                    : clock_.Now(instructions_);
    event.offset = offset;
    clock_.Deliver(event);
  }

  // Streams with timing packets: `image_clock` is brought to each event's image time
  // (FlowEvent::image_tsc, as the piece's decoder had it) before the event goes on.
  void set_image_clock(ImageClock* image_clock, const TimeConversion& conversion) {
    image_clock_ = image_clock;
    conversion_ = conversion;
  }

  void Append(Piece& piece) {
    const uint64_t base = instructions_;
    const bool timed = clock_.axis() == TimeAxis::kTime;
    if (timed) {
      // The piece's samples become the clock's tickets (its events take them below), all
      // kept until then, as is the branch carried in.
      const std::vector<uint64_t>& steps = piece.steps.words;
      times_.resize(steps.size());
      const uint64_t kept = std::min(CarriedTicket(), clock_.next_ticket());
      for (size_t i = 0; i < steps.size(); ++i) {
        if (steps[i] & TimeSteps::kUpdate) {
          if (!(steps[i] & TimeSteps::kSeed) || !clock_.has_point()) {
            clock_.Update(steps[i] & ~(TimeSteps::kUpdate | TimeSteps::kAtEvent | TimeSteps::kSeed),
                          base + steps[i + 1], kept, (steps[i] & TimeSteps::kAtEvent) != 0);
          }
          ++i;
        } else {
          times_[i] = clock_.Sample(base + steps[i]);
        }
      }
    } else if (piece.outcome.recorded.sampled_time) {
      clock_.Now(base + piece.outcome.recorded.last_sample);
    }
    // Cycles come from the buffer's index: only the chunk's base is added (and the clamp
    // the single decoder's cursor applies). On the cycles axis they are the time.
    if (cycles_ && piece.buffer != nullptr) chunk_cycles_ = piece.buffer->cycles.total();
    auto fix_cycles = [&](uint64_t* cycles, uint64_t* time) {
      *cycles = std::max(last_cycles_, *cycles + cycles_base_);
      last_cycles_ = *cycles;
      if (cycles_axis_) *time = clock_.Now(*cycles);
    };
    auto fix = [&](uint64_t* instructions, uint64_t* time) {
      *instructions += base;
      *time = timed ? times_[*time] : *time + base;
    };
    const PieceOutcome& o = piece.outcome;
    const PieceRecording& r = o.recorded;
    PieceEvents::Reader events(piece.events);
    FlowEvent event;
    for (size_t i = 0; i <= piece.events.size(); ++i) {
      if (r.carried_flush && i == r.carried_flush_index && carried_.valid) {
        FlowEvent flushed;
        if (!CarriedStaysInFunction(r.carried_flush_target, r.carried_flush_known) &&
            PendingEvent(carried_, r.carried_flush_target, r.carried_flush_known, &flushed)) {
          clock_.Deliver(flushed);
        }
        carried_.valid = false;
      }
      if (!events.Next(&event)) break;
      // The same image time as the event before changes nothing (most events).
      if (image_clock_ != nullptr && event.image_tsc != 0 && event.image_tsc != last_image_tsc_) {
        last_image_tsc_ = event.image_tsc;
        AdvanceImage(conversion_.TscToNs(event.image_tsc));
      }
      fix(&event.instructions, &event.time);
      if (cycles_) fix_cycles(&event.cycles, &event.time);
      clock_.Deliver(event);
    }
    // The branch this piece ends with; kUnknown: the one carried in, still untouched.
    if (o.pending.valid && o.pending.klass != InsnClass::kUnknown) {
      carried_ = o.pending;
      fix(&carried_.instructions, &carried_.time);
      if (cycles_) fix_cycles(&carried_.cycles, &carried_.time);
    } else if (!o.pending.valid) {
      carried_.valid = false;
    }
    instructions_ += piece.outcome.stats[Stat::kInstructions];
  }

  uint64_t instructions() const { return instructions_; }
  uint64_t last_time() const { return clock_.last(); }
  uint64_t cycles_total() const { return cycles_base_ + chunk_cycles_; }
  // Whether the branch carried into the next piece becomes an event when it is flushed.
  bool CarriedMakesEvent(uint64_t target, bool known) {
    FlowEvent event;
    return carried_.valid && !CarriedStaysInFunction(target, known) &&
           PendingEvent(carried_, target, known, &event);
  }
  // The stream's image (untimed streams; timed ones follow the image clock).
  void set_image(const image::ProcessImage* image) { image_ = image; }

 private:
  // The decoders dropped the jumps that stay in their function; so does the stitcher
  // for the branch a piece ends with.
  bool CarriedStaysInFunction(uint64_t target, bool known) {
    const image::ProcessImage* image = image_clock_ != nullptr ? image_clock_->image() : image_;
    return image != nullptr && StaysInFunction(*image, carried_, target, known);
  }

  // The clock's ticket the carried branch holds (time axis), if any.
  uint64_t CarriedTicket() const {
    return carried_.valid && clock_.axis() == TimeAxis::kTime ? carried_.time : TimeInterpolator::kNoTicket;
  }

  // As the flow decoders' AdvanceImage: the same changes at the same events' times.
  void AdvanceImage(uint64_t ns) {
    if (ns == 0 || ns < next_image_change_) return;
    image_clock_->AdvanceTo(ns);
    next_image_change_ = std::max(image_clock_->next_change(), ns + 1);
  }

  TimeInterpolator clock_;
  ImageClock* image_clock_ = nullptr;
  const image::ProcessImage* image_ = nullptr;
  TimeConversion conversion_;
  uint64_t next_image_change_ = 0;  // 0: the first event places the image
  uint64_t last_image_tsc_ = 0;     // of the last event that advanced the image
  uint64_t instructions_ = 0;
  bool cycles_;
  bool cycles_axis_;
  uint64_t cycles_base_ = 0;   // CYC payloads of the chunks before this one
  uint64_t chunk_cycles_ = 0;  // ... of this chunk
  uint64_t last_cycles_ = 0;
  PendingBranch carried_;
  std::vector<uint64_t> times_;
};

class Engine {
 public:
  Engine(const std::vector<StreamJob*>& streams, const ParallelOptions& options, ParallelCosts* costs)
      : streams_(streams), options_(options), costs_(costs) {}

  absl::Status Run();

 private:
  void Plan();
  void Work();
  // Returns the CPU time it took to make this thread's decoder for the stream (0: it had one).
  uint64_t Decode(std::map<size_t, std::unique_ptr<ThreadStream>>* decoders, Piece* piece, const PieceSpec& spec);
  // Decodes a piece taken from the queue (next_) and tells the stitcher it is done.
  void DecodeTaken(std::map<size_t, std::unique_ptr<ThreadStream>>* decoders, Piece* piece);
  bool Cancelled() const { return options_.cancel != nullptr && options_.cancel->load(std::memory_order_relaxed); }

  const std::vector<StreamJob*>& streams_;
  ParallelOptions options_;
  ParallelCosts* costs_;
  std::vector<std::unique_ptr<Piece>> pieces_;
  std::mutex mutex_;
  std::condition_variable changed_;
  size_t next_ = 0;      // next piece to hand to a worker
  size_t consumed_ = 0;  // pieces the stitcher is done with
  size_t window_ = 4;    // pieces decoded ahead of the stitcher, at most
  uint64_t largest_piece_bytes_ = 0;
  bool stop_ = false;
  std::mutex spare_mutex_;
  std::vector<PieceEvents> spare_events_;
  std::vector<TimeSteps> spare_steps_;
};

void Engine::Plan() {
  uint64_t total = 0;
  for (const StreamJob* s : streams_) {
    for (const PtChunk& c : s->chunks) total += c.size;
  }
  uint64_t piece_bytes = options_.piece_bytes;
  if (piece_bytes == 0) {
    // Enough pieces to keep every job busy; each large enough that a decoder's start-up
    // and the PSB interval it decodes past its stop (the tail digest: 1.6% of 256 KiB
    // at a 4 KiB PSB period, 12% of 32 KiB) are noise. Small enough that the event lists
    // of the pieces in flight stay small and are reused (no page faults once warm).
    piece_bytes = std::clamp<uint64_t>(total / (static_cast<uint64_t>(options_.jobs) * 8), uint64_t{32} << 10,
                                       uint64_t{256} << 10);
  }
  for (size_t s = 0; s < streams_.size(); ++s) {
    const StreamJob& job = *streams_[s];
    for (size_t c = 0; c < job.chunks.size(); ++c) {
      const PtChunk& chunk = job.chunks[c];
      auto buffer = std::make_shared<Buffer>();
      buffer->source = job.file->bytes().data() + chunk.file_offset;
      buffer->path = job.file->path();
      buffer->size = static_cast<size_t>(chunk.size);
      buffer->file_offset = chunk.file_offset;
      buffer->index_cycles = job.config.cycles;
      buffer->index_threads = options_.jobs;
      buffer->scan_packets = job.config.kind == DecoderKind::kFast;
      buffer->psbs = FindPsbOffsets(absl::MakeConstSpan(buffer->source, buffer->size));
      // Borders: PSBs at least piece_bytes apart (the first piece syncs on its own).
      std::vector<uint64_t> starts = {0};
      for (uint64_t psb : buffer->psbs) {
        if (psb > 0 && psb >= starts.back() + piece_bytes) starts.push_back(psb);
      }
      for (size_t k = 0; k < starts.size(); ++k) {
        auto piece = std::make_unique<Piece>();
        piece->stream = s;
        piece->chunk = c;
        piece->buffer = buffer;
        piece->spec.start.kind = k == 0 ? DecodeStart::Kind::kSyncForward : DecodeStart::Kind::kContinue;
        piece->spec.start.psb = starts[k];
        piece->spec.start.sync.previous_call = starts[k];
        piece->spec.stop_offset = k + 1 < starts.size() ? starts[k + 1] : UINT64_MAX;
        // The first PSB after the start and after the stop: digests compare the interval
        // a piece decodes first with the one its predecessor decodes past its stop.
        auto after = [&](uint64_t offset) -> uint64_t {
          auto it = std::upper_bound(buffer->psbs.begin(), buffer->psbs.end(), offset);
          return it == buffer->psbs.end() ? 0 : *it;
        };
        if (k > 0) piece->spec.head_psb = after(starts[k]);
        if (k + 1 < starts.size()) piece->spec.tail_psb = after(starts[k + 1]);
        piece->bytes = (k + 1 < starts.size() ? starts[k + 1] : buffer->size) - starts[k];
        largest_piece_bytes_ = std::max(largest_piece_bytes_, piece->bytes);
        pieces_.push_back(std::move(piece));
      }
    }
  }
  window_ = static_cast<size_t>(options_.jobs) * 2 + 2;
}

uint64_t Engine::Decode(std::map<size_t, std::unique_ptr<ThreadStream>>* decoders, Piece* piece,
                        const PieceSpec& spec) {
  uint64_t start_cpu_ns = 0;
  const StreamJob& job = *streams_[piece->stream];
  std::unique_ptr<ThreadStream>& ts = (*decoders)[piece->stream];
  if (ts == nullptr) {
    const uint64_t before_start = ThreadCpuNs();
    ts = std::make_unique<ThreadStream>(job);
    ts->decoder->set_cancel_flag(options_.cancel);
    start_cpu_ns = ThreadCpuNs() - before_start;
  }
  {
    // Reuse the lists of consumed pieces: their pages are already touched.
    std::lock_guard<std::mutex> lock(spare_mutex_);
    if (piece->events.capacity() == 0 && !spare_events_.empty()) {
      piece->events = std::move(spare_events_.back());
      spare_events_.pop_back();
    }
    if (piece->steps.capacity() == 0 && !spare_steps_.empty()) {
      piece->steps = std::move(spare_steps_.back());
      spare_steps_.pop_back();
    }
  }
  piece->events.clear();
  piece->steps.clear();
  // About one event (and time step) per PT byte or less: room once, not a doubling into
  // fresh pages each time. Room for the largest piece, so a reused list never moves (up
  // to 4 Mi: a buffer without PSBs is one piece, and its list grows as it must).
  const size_t room = static_cast<size_t>(std::min<uint64_t>(largest_piece_bytes_, uint64_t{4} << 20));
  piece->events.reserve(room);
  piece->steps.reserve(room);
  const uint64_t before_load = ThreadCpuNs();
  const uint8_t* padded = piece->buffer->Load();
  piece->load_cpu_ns += ThreadCpuNs() - before_load;
  const PtBuffer buffer{padded, piece->buffer->size, piece->buffer->file_offset, &piece->buffer->psbs,
                        piece->buffer->packet_scan, piece->buffer->times};
  if (ts->runs != nullptr) ts->runs->BeginPiece();
  absl::StatusOr<PieceOutcome> outcome =
      DecodePiece(ts->decoder.get(), buffer, job.config.cycles ? &piece->buffer->cycles : nullptr, spec,
                  &piece->events, &piece->steps);
  if (ts->runs != nullptr) piece->runs = ts->runs->EndPiece();
  piece->ran = spec;
  piece->status = outcome.status();
  if (outcome.ok()) piece->outcome = *outcome;
  // Only the errata warning comes from here: once per stream is enough.
  piece->warnings = ts->decoder->warnings();
  return start_cpu_ns;
}

void Engine::DecodeTaken(std::map<size_t, std::unique_ptr<ThreadStream>>* decoders, Piece* piece) {
  const uint64_t started = ThreadCpuNs();
  piece->start_cpu_ns = Decode(decoders, piece, piece->spec);
  piece->cpu_ns = ThreadCpuNs() - started - piece->load_cpu_ns;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    piece->done = true;
  }
  changed_.notify_all();
}

void Engine::Work() {
  std::map<size_t, std::unique_ptr<ThreadStream>> decoders;
  while (true) {
    Piece* piece = nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return stop_ || next_ >= pieces_.size() || next_ < consumed_ + window_; });
      if (stop_ || next_ >= pieces_.size()) return;
      piece = pieces_[next_++].get();
    }
    DecodeTaken(&decoders, piece);
  }
}

absl::Status Engine::Run() {
  // The serial phase: this thread's CPU time but for the pieces it decodes as a worker.
  const uint64_t run_started = ThreadCpuNs();
  uint64_t own_pieces_ns = 0;
  Plan();
  // The stitching thread is one of the jobs: it decodes pieces too while the one it
  // needs next is not ready (a third thread on two cores shared one with a worker).
  std::vector<std::thread> workers;
  for (int i = 0; i < std::max(1, options_.jobs - 1); ++i) workers.emplace_back([this] { Work(); });
  auto finish = [&] {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    for (std::thread& t : workers) t.join();
  };

  std::map<size_t, std::unique_ptr<ThreadStream>> redo_decoders;  // this thread's own (pieces and redos)
  absl::Status result = absl::OkStatus();
  uint64_t bytes_done = 0;
  size_t i = 0;
  for (size_t s = 0; s < streams_.size() && result.ok(); ++s) {
    StreamJob& job = *streams_[s];
    PieceStitcher stitcher(job.config, job.consumer);
    stitcher.set_image(job.image);
    if (job.clock != nullptr) stitcher.set_image_clock(job.clock, job.config.conversion);
    std::set<std::string> warned;
    bool previous_truncated = false;
    for (size_t c = 0; c < job.chunks.size() && result.ok(); ++c) {
      const PtChunk& chunk = job.chunks[c];
      stitcher.StartChunk();
      if (c > 0 && (chunk.lost_before || previous_truncated)) stitcher.MarkLostData(chunk.file_offset);
      previous_truncated = chunk.truncated;
      job.stats.Add(Stat::kBytes, chunk.size);
      PieceSpec expected;
      PieceOutcome::Digest previous_tail;
      bool ended = false;
      bool continuous = false;  // the rest of the buffer came from one decoder
      for (; i < pieces_.size() && pieces_[i]->stream == s && pieces_[i]->chunk == c; ++i) {
        Piece& piece = *pieces_[i];
        {
          std::unique_lock<std::mutex> lock(mutex_);
          while (!piece.done && !Cancelled()) {
            // Not ready: decode the next piece no worker has taken (this one, or one the
            // window lets a worker take), else wait.
            if (next_ < pieces_.size() && next_ < consumed_ + window_) {
              Piece* ahead = pieces_[next_++].get();
              lock.unlock();
              DecodeTaken(&redo_decoders, ahead);
              own_pieces_ns += ahead->cpu_ns + ahead->load_cpu_ns;
              lock.lock();
              continue;
            }
            changed_.wait(lock);
          }
          if (!piece.done) break;
        }
        if (Cancelled()) break;
        const uint64_t taking_started = ThreadCpuNs();
        const bool first = i == 0 || pieces_[i - 1]->chunk != c || pieces_[i - 1]->stream != s;
        if (first) {
          expected = piece.spec;
          continuous = false;
        }
        bool use = !ended && !continuous && expected.start.psb < piece.spec.stop_offset;
        // The head as the single decoder counts it: with the carried branch's event.
        PieceOutcome::Digest head = piece.outcome.head;
        const PieceRecording& r = piece.outcome.recorded;
        if (r.carried_flush && r.carried_flush_index <= head.events &&
            stitcher.CarriedMakesEvent(r.carried_flush_target, r.carried_flush_known)) {
          ++head.events;
        }
        if (use && !first && !SeamHolds(expected, previous_tail, piece.spec, piece.outcome, head)) {
          if (costs_ != nullptr) ++costs_->redos;
          bool rest_of_buffer = false;
          Decode(&redo_decoders, &piece, RedoSpec(expected, pieces_[i - 1]->ran, piece.spec, &rest_of_buffer));
          continuous = rest_of_buffer;
        }
        if (use && !piece.status.ok()) {
          result = piece.status;
          break;
        }
        if (use) {
          stitcher.Append(piece);
          if (piece.runs != nullptr) piece.runs->Use();
          job.stats.Merge(piece.outcome.stats);
          for (const std::string& w : piece.warnings) {
            if (warned.insert(w).second) job.warnings.push_back(w);
          }
          const PieceOutcome& o = piece.outcome;
          switch (o.end) {
            case PieceOutcome::End::kEnd:
              ended = true;
              break;
            case PieceOutcome::End::kBoundary:
              previous_tail = o.tail;
              expected = o.next;
              expected.start.kind = DecodeStart::Kind::kContinue;
              expected.start.psb = piece.spec.stop_offset;
              break;
            case PieceOutcome::End::kResyncAt:
              expected = PieceSpec();
              expected.start.kind = DecodeStart::Kind::kResync;
              expected.start.psb = o.resync_at;
              break;
          }
        }
        // Done with it: free its memory and let the workers go on.
        {
          std::lock_guard<std::mutex> lock(spare_mutex_);
          spare_events_.push_back(std::move(piece.events));
          spare_steps_.push_back(std::move(piece.steps));
        }
        piece.events = {};
        piece.steps = {};
        piece.buffer.reset();
        piece.runs.reset();
        bytes_done += piece.bytes;
        {
          std::lock_guard<std::mutex> lock(mutex_);
          consumed_ = i + 1;
        }
        changed_.notify_all();
        if (options_.progress) options_.progress(bytes_done);
        piece.serial_cpu_ns = ThreadCpuNs() - taking_started;
      }
      stitcher.EndChunk();
      if (Cancelled()) break;
    }
    job.instructions = stitcher.instructions();
    job.last_time = stitcher.last_time();
    job.cycles = stitcher.cycles_total();
    job.stats.Set(Stat::kInstructions, job.instructions);
    if (Cancelled() || !result.ok()) break;
    if (options_.stream_done) options_.stream_done(s);
  }
  finish();
  if (costs_ != nullptr) {
    for (const std::unique_ptr<Piece>& piece : pieces_) {
      costs_->load_cpu_ns += piece->load_cpu_ns;
      if (!piece->done) continue;
      costs_->pieces.push_back({piece->bytes, piece->cpu_ns, piece->serial_cpu_ns});
      costs_->start_cpu_ns += piece->start_cpu_ns;
    }
    costs_->serial_cpu_ns = ThreadCpuNs() - run_started - own_pieces_ns;
  }
  return result;
}

}  // namespace

absl::Status DecodeStreamsInParallel(const std::vector<StreamJob*>& streams, const ParallelOptions& options,
                                     ParallelCosts* costs) {
  Engine engine(streams, options, costs);
  return engine.Run();
}

}  // namespace ptd::decoder
