#include "recorder/pt/aux_ring.h"

#include <algorithm>
#include <cstring>

#include "common/pt_psb.h"

namespace ptd::pt {

namespace {
// Unchanged bytes past the head that show the ring did not lap since the last snapshot.
constexpr uint64_t kMinUnchanged = 64;
}  // namespace

AuxRing::AuxRing(perf_event_mmap_page* header, const uint8_t* aux, size_t aux_size,
                 bool overwrite)
    : header_(header), aux_(aux), size_(aux_size), overwrite_(overwrite) {}

uint64_t AuxRing::head() const {
  // Pairs with the kernel's release of aux_head: the AUX bytes below it are visible.
  return __atomic_load_n(&header_->aux_head, __ATOMIC_ACQUIRE);
}

void AuxRing::CopyOut(uint64_t pos, uint64_t size, std::string* out) const {
  const uint64_t start = pos % size_;
  const uint64_t first = std::min<uint64_t>(size, size_ - start);
  out->append(reinterpret_cast<const char*>(aux_) + start, first);
  if (first < size) out->append(reinterpret_cast<const char*>(aux_), size - first);
}

AuxCopy AuxRing::Drain(std::string* out) {
  AuxCopy copy;
  const uint64_t head = this->head();
  const uint64_t tail = __atomic_load_n(&header_->aux_tail, __ATOMIC_RELAXED);
  copy.aux_offset = tail;
  if (head == tail) return copy;
  // The kernel never writes more than size_ past aux_tail in linear mode; a larger gap
  // would be a corrupt header, and we clamp rather than read outside the mapping.
  uint64_t size = head - tail;
  if (size > size_) {
    copy.lost_before = true;
    copy.aux_offset = head - size_;
    size = size_;
  }
  CopyOut(copy.aux_offset, size, out);
  copy.size = size;
  // Release: our reads of the bytes happen before the kernel may overwrite them.
  __atomic_store_n(&header_->aux_tail, head, __ATOMIC_RELEASE);
  return copy;
}

bool AuxRing::Unchanged(uint64_t pos, uint64_t size) const {
  while (size > 0) {
    const uint64_t start = pos % size_;
    const uint64_t n = std::min<uint64_t>(size, size_ - start);
    const uint8_t* now = aux_ + start;
    if (seen_.empty()) {
      for (uint64_t i = 0; i < n; ++i) {
        if (now[i] != 0) return false;
      }
    } else if (std::memcmp(now, seen_.data() + start, n) != 0) {
      return false;
    }
    pos += n;
    size -= n;
  }
  return true;
}

void AuxRing::Remember(uint64_t pos, uint64_t size) {
  if (size == 0) return;  // an idle ring costs no copy
  if (seen_.empty()) seen_.assign(size_, '\0');
  while (size > 0) {
    const uint64_t start = pos % size_;
    const uint64_t n = std::min<uint64_t>(size, size_ - start);
    std::memcpy(seen_.data() + start, aux_ + start, n);
    pos += n;
    size -= n;
  }
}

std::string AuxRing::Bytes(uint64_t pos, uint64_t size) const {
  std::string bytes;
  CopyOut(pos, size, &bytes);
  return bytes;
}

std::optional<uint64_t> AuxRing::NewestTsc(uint64_t pos, uint64_t size) const {
  if (size == 0) return std::nullopt;
  const std::string bytes = Bytes(pos, size);
  std::optional<uint64_t> newest;
  for (const PsbTsc& psb : FindPsbsWithTsc(
           absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()))) {
    if (psb.tsc && (!newest || *psb.tsc > *newest)) newest = psb.tsc;
  }
  return newest;
}

AuxCopy AuxRing::CopyNew(std::string* out) {
  AuxCopy copy;
  const uint64_t head = this->head() % size_;
  // Without a full lap since the previous snapshot, `fresh` bytes were written, ending
  // at the head, and the rest of the ring is as we last saw it.
  const uint64_t fresh = (head + size_ - last_offset_) % size_;
  const uint64_t old = size_ - fresh;
  // The kernel tells nothing of laps: in snapshot mode the head is an offset in the ring
  // (pt_update_head) and every PERF_RECORD_AUX is sized to the whole buffer
  // (pt_event_stop). A lap is told by the bytes past the head, the "old" ones: changed
  // bytes, or a PSB+ there whose TSC is newer than any taken before, mean they were
  // written again. Unchanged bytes prove no lap only when they hold a timestamp (a TSC
  // rewritten later differs) or the trace has none at all (then at least kMinUnchanged
  // of them); otherwise a lap that happened to write the same bytes there (a loop's TNT
  // packets) cannot be ruled out: the fresh bytes are taken, marked as maybe following
  // a gap. Nothing is stored twice. Until the ring was filled once, its unwritten part
  // is the kernel's zero pages, compared as such (perf's intel_pt_first_wrap does too).
  const std::optional<uint64_t> old_tsc = filled_ ? NewestTsc(head, old) : std::nullopt;
  const bool lapped = !Unchanged(head, old) || (old_tsc && last_tsc_ && *old_tsc > *last_tsc_);
  copy.aux_offset = stream_pos_;
  const bool proven = old_tsc.has_value() || !last_tsc_.has_value() || !filled_;
  const bool unsure = !lapped && fresh != 0 && (old < kMinUnchanged || !proven);
  if (!lapped) {
    copy.size = fresh;
    copy.lost_before = unsure && copied_before_;
    CopyOut(last_offset_, fresh, out);
    Remember(last_offset_, fresh);
  } else {
    // Oldest byte is the one the hardware writes next: [head, end) then [0, head).
    copy.size = size_;
    copy.lost_before = copied_before_;
    CopyOut(head, size_, out);
    Remember(head, size_);
  }
  if (copy.size != 0) {
    const std::optional<uint64_t> taken = NewestTsc(lapped ? head : last_offset_, copy.size);
    if (taken && (!last_tsc_ || *taken > *last_tsc_)) last_tsc_ = taken;
  }
  stream_pos_ += copy.size;
  filled_ = filled_ || lapped || stream_pos_ >= size_;
  last_offset_ = head;
  copied_before_ = true;
  return copy;
}

}  // namespace ptd::pt
