#include "decoder/flow/trap_scanner.h"

#include <Zydis/Decoder.h>

#include <algorithm>

#include "image/insn_classifier.h"

namespace ptd::decoder {
namespace {

// What the shapes look at of an operand (Intel order: the destination first).
struct Operand {
  ZydisOperandType type = ZYDIS_OPERAND_TYPE_UNUSED;
  uint16_t size = 0;  // bits
  ZydisRegister reg = ZYDIS_REGISTER_NONE;  // a register operand
  ZydisRegister segment = ZYDIS_REGISTER_NONE;
  ZydisRegister base = ZYDIS_REGISTER_NONE;
  ZydisRegister index = ZYDIS_REGISTER_NONE;
  uint8_t scale = 0;
  int64_t value = 0;  // the displacement, or the immediate
};

bool SameOperand(const Operand& a, const Operand& b) {
  if (a.type != b.type || a.size != b.size) return false;
  if (a.type == ZYDIS_OPERAND_TYPE_REGISTER) return a.reg == b.reg;
  if (a.type == ZYDIS_OPERAND_TYPE_MEMORY) {
    return a.segment == b.segment && a.base == b.base && a.index == b.index && a.scale == b.scale &&
           a.value == b.value;
  }
  return false;
}

bool IsRsp(const Operand& op) { return op.type == ZYDIS_OPERAND_TYPE_REGISTER && op.reg == ZYDIS_REGISTER_RSP; }

// A plausible trap slot: memory, or a register that is not the stack or frame pointer
// (`mov %rbp,%rsp; pop %rbp` is an ordinary epilogue).
bool IsSlot(const Operand& op) {
  if (op.type == ZYDIS_OPERAND_TYPE_MEMORY) return op.base != ZYDIS_REGISTER_RIP && op.base != ZYDIS_REGISTER_RSP;
  return op.type == ZYDIS_OPERAND_TYPE_REGISTER && op.size == 64 && op.reg != ZYDIS_REGISTER_RSP &&
         op.reg != ZYDIS_REGISTER_RBP;
}

// One decoded instruction: what the shapes need (its first two visible operands).
struct Insn {
  bool valid = false;
  ZydisMnemonic mnemonic = ZYDIS_MNEMONIC_INVALID;
  uint8_t size = 0;
  uint8_t op_count = 0;
  Operand ops[2];
};

Insn DecodeInsn(const uint8_t* bytes, size_t n) {
  Insn insn;
  ZydisDecodedInstruction z;
  ZydisDecodedOperand operands[ZYDIS_MAX_OPERAND_COUNT];
  if (n == 0 || !ZYAN_SUCCESS(ZydisDecoderDecodeFull(&image::ZydisDecoderFor(ptem_64bit), bytes, n, &z, operands))) return insn;
  insn.valid = true;
  insn.mnemonic = z.mnemonic;
  insn.size = z.length;
  insn.op_count = std::min<uint8_t>(z.operand_count_visible, 2);
  for (int i = 0; i < insn.op_count; ++i) {
    const ZydisDecodedOperand& from = operands[i];
    Operand& op = insn.ops[i];
    op.type = from.type;
    op.size = from.size;
    if (from.type == ZYDIS_OPERAND_TYPE_REGISTER) {
      op.reg = from.reg.value;
    } else if (from.type == ZYDIS_OPERAND_TYPE_MEMORY) {
      op.segment = from.mem.segment;
      op.base = from.mem.base;
      op.index = from.mem.index;
      op.scale = from.mem.scale;
      op.value = from.mem.disp.value;
    } else if (from.type == ZYDIS_OPERAND_TYPE_IMMEDIATE) {
      op.value = from.imm.value.s;
    }
  }
  return insn;
}

}  // namespace

absl::Span<const TrapMark> TrapScanner::ScanCached(uint64_t first_ip, uint64_t count) {
  auto key = std::make_pair(first_ip, count);
  auto it = cache_.find(key);
  if (it == cache_.end()) it = cache_.emplace(key, ScanRun(first_ip, count)).first;
  return it->second;
}

std::vector<TrapMark> TrapScanner::ScanRun(uint64_t first_ip, uint64_t count) {
  std::vector<TrapMark> marks;
  auto decode = [&](uint64_t ip) {
    uint8_t bytes[16];
    const size_t n = image_->ReadCode(ip, bytes, sizeof bytes);
    return DecodeInsn(bytes, n);
  };
  uint64_t ip = first_ip;
  Insn current = decode(ip);
  for (uint64_t i = 0; i < count && current.valid; ++i) {
    uint64_t next_ip = ip + current.size;
    // Only the three shapes' first instructions need the one after them.
    const ZydisMnemonic m = current.mnemonic;
    bool candidate = (m == ZYDIS_MNEMONIC_PUSH || m == ZYDIS_MNEMONIC_POP || m == ZYDIS_MNEMONIC_MOV) &&
                     current.op_count >= 1;
    Insn next;
    if (candidate) {
      next = decode(next_ip);
      const Operand& x = m == ZYDIS_MNEMONIC_MOV ? current.ops[1] : current.ops[0];
      if (next.valid && IsSlot(x)) {
        const Operand& source = next.ops[1];
        if (m == ZYDIS_MNEMONIC_PUSH && next.mnemonic == ZYDIS_MNEMONIC_MOV && next.op_count == 2 &&
            SameOperand(next.ops[0], x) && IsRsp(source)) {
          // The handler is installed once the mov ran: the event is at the mov.
          marks.push_back({static_cast<uint32_t>(i + 1 < count ? i + 1 : i), FlowKind::kTrapPush, next_ip});
        } else if (m == ZYDIS_MNEMONIC_POP && next.op_count == 2 && IsRsp(next.ops[0]) &&
                   ((next.mnemonic == ZYDIS_MNEMONIC_ADD && source.type == ZYDIS_OPERAND_TYPE_IMMEDIATE &&
                     source.value == 8) ||
                    (next.mnemonic == ZYDIS_MNEMONIC_LEA && source.type == ZYDIS_OPERAND_TYPE_MEMORY &&
                     source.base == ZYDIS_REGISTER_RSP && source.index == ZYDIS_REGISTER_NONE && source.value == 8))) {
          marks.push_back({static_cast<uint32_t>(i), FlowKind::kTrapPop, ip});
        } else if (m == ZYDIS_MNEMONIC_MOV && current.op_count == 2 && IsRsp(current.ops[0]) &&
                   next.mnemonic == ZYDIS_MNEMONIC_POP && next.op_count >= 1 && SameOperand(next.ops[0], x)) {
          marks.push_back({static_cast<uint32_t>(i), FlowKind::kRaise, ip});
        }
      }
    }
    ip = next_ip;
    current = candidate ? next : decode(ip);
    if (i + 1 < count && !current.valid) break;
  }
  return marks;
}

}  // namespace ptd::decoder
