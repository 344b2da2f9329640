#pragma once
// Drives one libipt decoder (block or instruction flow) over the chunks of one PT stream
// and turns what it reports into FlowEvents. Both decoders give the same event sequence:
// blocks end on every call and jump (end_on_call, end_on_jump), so a block's last
// instruction is the only branch in it.
//
// libipt 2.0.5 quirks handled here: blocks classed ptic_error (classified with capstone),
// resync after an error that would skip a good PSB segment (sync_set on the first PSB at
// or after the offset of the call before the error), 16+ zero bytes after the buffer
// (the PSB search reads past the end), and -pte_bad_cpu (no errata, with a warning).
// No global state: one object per stream; streams may be decoded on separate threads as
// long as each has its own ProcessImage.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/host_info.h"
#include "common/trace_meta.h"
#include "decoder/flow_event.h"
#include "decoder/insn_classifier.h"
#include "image/process_image.h"

struct pt_block;
struct pt_event;

namespace ptd::decoder {

enum class DecoderKind { kBlock, kInsn };
enum class TimeAxis { kTime, kInstructions };

class FlowConsumer {
 public:
  virtual ~FlowConsumer() = default;
  virtual void OnFlow(const FlowEvent& event) = 0;
};

// Sees every run of instructions (tests expand them to compare against libipt's own
// output; nothing in the product needs it).
class BlockObserver {
 public:
  virtual ~BlockObserver() = default;
  // `count` instructions executed from `ip` to `end_ip` (the last one), in order.
  virtual void OnBlock(uint64_t ip, uint64_t end_ip, uint32_t count) = 0;
};

struct PtDecodeConfig {
  DecoderKind kind = DecoderKind::kBlock;
  TimeAxis axis = TimeAxis::kInstructions;
  CpuId cpu;                  // vendor "intel" selects errata
  PtSettings pt;              // cpuid 0x15, nom_freq, mtc_freq
  TimeConversion conversion;  // TSC → ns
};

struct PtDecodeStats {
  uint64_t instructions = 0;
  uint64_t blocks = 0;      // block decoder: blocks; instruction decoder: branches
  uint64_t errors = 0;
  uint64_t overflows = 0;
  uint64_t syncs = 0;
  uint64_t bytes = 0;
  uint64_t undecodable = 0; // instructions capstone could not classify
};

// Zero bytes every buffer handed to libipt must have after its end.
inline constexpr size_t kPtPadding = 64;

class PtStreamDecoder {
 public:
  PtStreamDecoder(const PtDecodeConfig& config, image::ProcessImage* image, FlowConsumer* consumer);

  // Decodes `padded[0, size)`; `padded` must hold size + kPtPadding bytes, the tail zero.
  // `base_offset` is the chunk's offset in the stream (for error messages). Decode errors
  // become kError events, not a failed status; a failed status means the decoder could
  // not run at all.
  absl::Status DecodeChunk(const uint8_t* padded, size_t size, uint64_t base_offset);

  const PtDecodeStats& stats() const { return stats_; }
  const std::vector<std::string>& warnings() const { return warnings_; }
  uint64_t instructions() const { return instructions_; }
  uint64_t last_time() const { return last_time_; }

  void set_block_observer(BlockObserver* observer) { observer_ = observer; }

  // Emits a kLostData event (gap between chunks).
  void MarkLostData(uint64_t offset);

 private:
  struct Pending {
    bool valid = false;
    InsnClass klass = InsnClass::kOther;
    uint64_t ip = 0;
    uint64_t fallthrough = 0;
    uint64_t instructions = 0;
    uint64_t time = 0;
  };

  absl::Status DecodeBlocks(const uint8_t* begin, size_t size, uint64_t base_offset,
                            const std::vector<uint64_t>& psbs);
  absl::Status DecodeInsns(const uint8_t* begin, size_t size, uint64_t base_offset,
                           const std::vector<uint64_t>& psbs);
  void OnInstructionRun(uint64_t first_ip, uint64_t count);
  void SetPending(InsnClass klass, uint64_t ip, uint64_t size);
  void FlushPending(uint64_t target, bool known);
  void HandleEvent(const pt_event& event);
  void Emit(FlowKind kind, uint64_t target, bool known, uint64_t offset = 0, const char* message = "");
  void UpdateTime(uint64_t tsc);
  uint64_t Now();

  PtDecodeConfig config_;
  image::ProcessImage* image_;
  FlowConsumer* consumer_;
  BlockObserver* observer_ = nullptr;
  InsnClassifier classifier_;
  bool errata_ok_ = true;
  bool need_enable_ = true;
  Pending pending_;
  uint64_t instructions_ = 0;
  // Time interpolation: ns at the last timing update and instructions then, and the
  // ns-per-instruction rate of the interval before.
  uint64_t last_tsc_ = 0;
  uint64_t time_base_ns_ = 0;
  uint64_t time_base_insns_ = 0;
  double ns_per_insn_ = 0;
  uint64_t last_time_ = 0;
  bool have_time_ = false;
  PtDecodeStats stats_;
  std::vector<std::string> warnings_;
};

// Offsets of every PSB in `bytes` (the resync remedy needs them).
std::vector<uint64_t> FindPsbOffsets(absl::Span<const uint8_t> bytes);

// True when the first `limit` bytes of the stream contain a TSC packet.
bool StreamHasTsc(absl::Span<const uint8_t> padded_bytes, size_t size, size_t limit = 1 << 20);

}  // namespace ptd::decoder
