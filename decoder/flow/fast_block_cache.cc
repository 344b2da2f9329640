// The fast decoder's block cache: runs decoded from the image's code with Zydis (or taken
// from the decode's SectionBlockCache), and the counts of the runs RunQuick took
// handed to the coverage observer.
#include "decoder/flow/fast_block_cache.h"

#include "decoder/flow/fast_block_decoder.h"
#include "decoder/flow/flow_decoder.h"
#include "decoder/flow/libipt_insn_oracle.h"

namespace ptd::decoder {
namespace {

// The instruction at `ip` in libipt's classes (the project's one x86 decoder, Zydis 4:
// it decodes what libipt's own decoder does and capstone 4 did not, CET shadow-stack
// instructions in libgcc's unwinder, ptwrite); iclass ptic_error when it cannot be decoded.
FastInsn DecodeFastInsn(pt_exec_mode mode, uint64_t ip, const uint8_t* bytes, size_t size) {
  FastInsn insn;
  static_cast<image::X86Insn&>(insn) = image::DecodeX86(mode, ip, bytes, size);
  insn.ip = ip;
  return insn;
}

}  // namespace

void FastBlockCache::FlushRuns() {
  if (run_sink_ == nullptr) return;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    Entry& entry = blocks_.data()[i];
    if (entry.hits == 0) continue;
    run_sink_->OnBlocks(entry.ip, entry.last.ip, entry.ninsn, entry.hits);
    entry.hits = 0;
  }
}

// Not cached per instruction: what the decode keeps are runs (Fill), and the event paths
// step through few instructions (~500 on the mruby sample, of 20,000 in its runs). A map
// of every instruction cost more in page faults and inserts than its hits saved (Fill
// decodes ~15% of its instructions a second time, for runs that start inside others).
int FastBlockDecoder::Decode(uint64_t ip, FastInsn* insn) {
  uint8_t bytes[pt_max_insn_size];
  size_t n = image_->ReadCode(ip, bytes, sizeof bytes);
  if (n == 0) return -pte_nomap;
  *insn = DecodeFastInsn(cache_->mode(), ip, bytes, n);
  // Zydis refuses some bytes libipt's length decoder accepts (and its block decoder walks
  // on over): then libipt says what they are. Rare.
  if (insn->iclass == ptic_error) DecodeInsnWithLibipt(cache_->mode(), ip, bytes, n, insn);
  return insn->iclass == ptic_error ? -pte_bad_insn : 0;
}

SectionBlocks* FastBlockDecoder::SharedRuns(const image::ProcessImage::SectionBytes& section) {
  if (section_blocks_ == nullptr) return nullptr;
  SharedSection& shared = shared_section_;
  const uint64_t size = section.end - section.start;
  if (shared.runs == nullptr || shared.module != section.module->get() || shared.file_offset != section.file_offset ||
      shared.size != size || shared.mode != cache_->mode()) {
    shared = {section_blocks_->Get(*section.module, section.file_offset, size, cache_->mode()), section.module->get(),
              section.file_offset, size, cache_->mode()};
  }
  return shared.runs;
}

void FastBlockDecoder::Fill(uint64_t ip, FastBlockCache::Entry* entry) {
  image::ProcessImage::SectionBytes section;
  if (!image_->SectionBytesAt(ip, &section)) {
    entry->error = -pte_nomap;
    return;
  }
  SectionBlocks* shared = SharedRuns(section);
  const uint64_t offset = ip - section.start;
  BlockSummary run;
  if (shared != nullptr && shared->Find(section.start, offset, &run)) {
    ++cache_->runs_shared_;
  } else {
    // Shared only if every instruction was read from this section's bytes alone: near its
    // end, Decode reads on into whatever the process maps next.
    bool section_bytes_only = true;
    uint64_t at = ip;
    while (true) {
      section_bytes_only &= section.end - at >= pt_max_insn_size;
      FastInsn insn;
      int status = Decode(at, &insn);
      if (status < 0) {
        run.error = status;
        break;
      }
      ++run.ninsn;
      run.last = insn;
      uint64_t next = insn.ip + insn.size;
      if (insn.iclass != ptic_other || next < section.start || next >= section.end ||
          run.ninsn == FastBlockCache::kMaxRunInstructions) {
        break;
      }
      at = next;
    }
    ++cache_->runs_decoded_;
    if (shared != nullptr && section_bytes_only) shared->Add(section.start, offset, run);
  }
  entry->ninsn = run.ninsn;
  entry->error = run.error;
  entry->last = run.last;
}

}  // namespace ptd::decoder
