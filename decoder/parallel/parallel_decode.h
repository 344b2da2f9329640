#pragma once
// Parallel decoding (`decode --jobs N`): every buffer of every stream is cut at PSBs into
// pieces; N − 1 worker threads and the calling thread decode pieces (the expensive part)
// into event lists, and the calling thread stitches them, in stream order (decoding
// pieces itself while the one it needs is not ready), into exactly the event
// sequence one decoder over each whole buffer gives, and feeds the stream's consumer
// (the call-stack models and the FTF writer stay on one thread, in order). Stitching:
// instruction counts and times are piece-relative until the pieces before are known;
// the branch that ends a piece is flushed by the next piece's first block; a piece that
// guessed the carried-in state wrong (rare: it starts while tracing waits to be
// enabled, or after a decode error at its border) is decoded again with the right one.
// Output is identical to --jobs 1 whatever the number of jobs or the piece size.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/trace_meta.h"
#include "decoder/flow/flow_decoder.h"
#include "decoder/stats.h"
#include "image/mapped_file.h"
#include "image/process_image.h"

namespace ptd::decoder {

// What one piece's decoder ran (coverage with --jobs N), kept until the stitcher knows
// whether it uses the piece: a piece decoded again, or past the part of the buffer a
// redo decoded, adds nothing.
class PieceRuns {
 public:
  virtual ~PieceRuns() = default;
  // Adds the piece's runs to the result: on the stitching thread, in stream order.
  virtual void Use() = 0;
};

// The block observer of one worker thread's decoder of a stream: it keeps each piece's
// runs apart, those the decoder keeps in piece mode (BlockObserver::ForgetRuns, ...).
class PieceRunObserver : public BlockObserver {
 public:
  // What it observes from now on is a new piece's.
  virtual void BeginPiece() = 0;
  virtual std::unique_ptr<PieceRuns> EndPiece() = 0;
};

// One stream to decode: its bytes, its chunks, and where its events go.
struct StreamJob {
  PtDecodeConfig config;
  image::ProcessImage* image = nullptr;
  FlowConsumer* consumer = nullptr;  // called on the thread that runs DecodeStreamsInParallel
  // Time axis, optional: the image follows the trace's time. `clock` is the consumer's
  // (the stitcher brings it to each event's time before handing the event on, so names
  // are resolved from the image the event was decoded with).
  ImageClock* clock = nullptr;
  // Required: images of its own for every worker's decoder (timed or not; workers are at
  // other times, and libipt sections shared between threads contend on their locks).
  std::function<std::unique_ptr<ImageClock>()> make_clock;
  // Optional (coverage): the observer of the runs a worker's decoder decodes, given the
  // worker's clock (the image each run ran in).
  std::function<std::unique_ptr<PieceRunObserver>(ImageClock* clock)> make_run_observer;
  std::shared_ptr<const image::MappedFile> file;
  std::vector<PtChunk> chunks;       // already checked to lie inside the file
  // Results, once the stream is done.
  Stats stats;  // the decoders' counters
  std::vector<std::string> warnings;
  uint64_t instructions = 0;
  uint64_t last_time = 0;
  uint64_t cycles = 0;  // config.cycles: every CYC payload of the stream
};

struct ParallelOptions {
  int jobs = 2;
  uint64_t piece_bytes = 0;  // 0: chosen from the trace size and the number of jobs
  const std::atomic<bool>* cancel = nullptr;
  // After each piece: PT bytes done so far.
  std::function<void(uint64_t bytes_done)> progress;
  // After each stream (index into `streams`), on the calling thread.
  std::function<void(size_t stream)> stream_done;
};

// What the decode cost, split into the phases a makespan model needs (CPU times).
struct ParallelCosts {
  std::vector<PieceCost> pieces;  // the pieces decoded, in the order they were handed out
  uint64_t serial_cpu_ns = 0;     // the calling thread's, its own pieces left out: planning,
                                  // stitching, redone pieces, the consumers (models, FTF)
  uint64_t redos = 0;             // pieces decoded again by the calling thread
  // Loading the buffers (mapping, packet scan, cycle index) on the thread of the piece that
  // needed one first, not in that piece's cost (the buffer's other pieces wait for it).
  uint64_t load_cpu_ns = 0;
  // Of the pieces' CPU time: each thread's decoder and images, made for its first piece of
  // a stream (the per-thread start-up).
  uint64_t start_cpu_ns = 0;
};

// Decodes `streams` in order; returns early (OK) when `cancel` turns true. `costs`
// (optional) receives what the pieces and the serial phase cost.
absl::Status DecodeStreamsInParallel(const std::vector<StreamJob*>& streams, const ParallelOptions& options,
                                     ParallelCosts* costs = nullptr);

}  // namespace ptd::decoder
