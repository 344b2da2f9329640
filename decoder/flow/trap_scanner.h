#pragma once
// Finds OCaml exception-handler operations inside runs of decoded instructions, which
// PT does not report (they are plain pushes, pops and stack-pointer moves). Recognised
// by shape (decoded with Zydis), for any trap slot X (a register or a memory operand; OCaml 4.x
// amd64 keeps it at 0x10(%r14), older versions in %r14 itself):
//   push X; mov %rsp,X                      → trap push (try)
//   pop X;  add $8,%rsp | lea 8(%rsp),%rsp  → trap pop (end of try body)
//   mov X,%rsp; pop X                       → raise (the next ret/jmp enters the handler)
// Only processes whose image holds OCaml code are scanned (C traces pay one test per
// run). Results are cached per run (start address, instruction count), so a run costs
// nothing on its second visit.

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "decoder/flow/flow_event.h"
#include "image/process_image.h"

namespace ptd::decoder {

struct TrapMark {
  uint32_t index = 0;  // instruction index in the run (0 = first)
  FlowKind kind = FlowKind::kTrapPush;
  uint64_t ip = 0;
};

class TrapScanner {
 public:
  explicit TrapScanner(image::ProcessImage* image) : image_(image) {}

  // The trap operations in the `count` instructions starting at `first_ip`, in order.
  absl::Span<const TrapMark> Scan(uint64_t first_ip, uint64_t count) {
    if (!image_->has_ocaml()) return {};
    return ScanCached(first_ip, count);
  }
  // The code changed (another image, or mappings replaced): cached runs are dropped.
  void SetImage(image::ProcessImage* image) {
    image_ = image;
    cache_.clear();
  }

 private:
  absl::Span<const TrapMark> ScanCached(uint64_t first_ip, uint64_t count);
  std::vector<TrapMark> ScanRun(uint64_t first_ip, uint64_t count);

  image::ProcessImage* image_;
  absl::flat_hash_map<std::pair<uint64_t, uint64_t>, std::vector<TrapMark>> cache_;
};

}  // namespace ptd::decoder
