#include "decoder/trap_scanner.h"

#include <capstone/capstone.h>

#include <cstring>

namespace ptd::decoder {
namespace {

bool SameOperand(const cs_x86_op& a, const cs_x86_op& b) {
  if (a.type != b.type || a.size != b.size) return false;
  if (a.type == X86_OP_REG) return a.reg == b.reg;
  if (a.type == X86_OP_MEM) {
    return a.mem.segment == b.mem.segment && a.mem.base == b.mem.base && a.mem.index == b.mem.index &&
           a.mem.scale == b.mem.scale && a.mem.disp == b.mem.disp;
  }
  return false;
}

bool IsRsp(const cs_x86_op& op) { return op.type == X86_OP_REG && op.reg == X86_REG_RSP; }

// A plausible trap slot: memory, or a register that is not the stack or frame pointer
// (`mov %rbp,%rsp; pop %rbp` is an ordinary epilogue).
bool IsSlot(const cs_x86_op& op) {
  if (op.type == X86_OP_MEM) return op.mem.base != X86_REG_RIP && op.mem.base != X86_REG_RSP;
  return op.type == X86_OP_REG && op.size == 8 && op.reg != X86_REG_RSP && op.reg != X86_REG_RBP;
}

// One decoded instruction: what the shapes need.
struct Insn {
  bool valid = false;
  unsigned id = 0;
  uint8_t size = 0;
  uint8_t op_count = 0;
  cs_x86_op ops[2];
};

}  // namespace

TrapScanner::TrapScanner(image::ProcessImage* image) : image_(image) {
  csh handle;
  ok_ = cs_open(CS_ARCH_X86, CS_MODE_64, &handle) == CS_ERR_OK;
  if (ok_) {
    cs_option(handle, CS_OPT_DETAIL, CS_OPT_ON);
    handle_ = handle;
  }
}

TrapScanner::~TrapScanner() {
  if (ok_) {
    csh handle = handle_;
    cs_close(&handle);
  }
}

absl::Span<const TrapMark> TrapScanner::ScanCached(uint64_t first_ip, uint64_t count) {
  auto key = std::make_pair(first_ip, count);
  auto it = cache_.find(key);
  if (it == cache_.end()) it = cache_.emplace(key, ScanRun(first_ip, count)).first;
  return it->second;
}

std::vector<TrapMark> TrapScanner::ScanRun(uint64_t first_ip, uint64_t count) {
  std::vector<TrapMark> marks;
  if (!ok_) return marks;
  csh handle = handle_;
  cs_insn* scratch = cs_malloc(handle);
  auto decode = [&](uint64_t ip) {
    Insn insn;
    uint8_t bytes[16];
    size_t n = image_->ReadCode(ip, bytes, sizeof bytes);
    const uint8_t* code = bytes;
    uint64_t address = ip;
    if (n == 0 || !cs_disasm_iter(handle, &code, &n, &address, scratch)) return insn;
    insn.valid = true;
    insn.id = scratch->id;
    insn.size = static_cast<uint8_t>(scratch->size);
    const cs_x86& x86 = scratch->detail->x86;
    insn.op_count = static_cast<uint8_t>(std::min<int>(x86.op_count, 2));
    for (int i = 0; i < insn.op_count; ++i) insn.ops[i] = x86.operands[i];
    return insn;
  };
  uint64_t ip = first_ip;
  Insn current = decode(ip);
  for (uint64_t i = 0; i < count && current.valid; ++i) {
    uint64_t next_ip = ip + current.size;
    // Only the three shapes' first instructions need the one after them.
    bool candidate = (current.id == X86_INS_PUSH || current.id == X86_INS_POP ||
                      current.id == X86_INS_MOV) && current.op_count >= 1;
    Insn next;
    if (candidate) {
      next = decode(next_ip);
      const cs_x86_op& x = current.id == X86_INS_MOV ? current.ops[1] : current.ops[0];
      if (next.valid && IsSlot(x)) {
        if (current.id == X86_INS_PUSH && next.id == X86_INS_MOV && next.op_count == 2 &&
            SameOperand(next.ops[0], x) && IsRsp(next.ops[1])) {
          // The handler is installed once the mov ran: the event is at the mov.
          marks.push_back({static_cast<uint32_t>(i + 1 < count ? i + 1 : i), FlowKind::kTrapPush, next_ip});
        } else if (current.id == X86_INS_POP && next.op_count == 2 && IsRsp(next.ops[0]) &&
                   ((next.id == X86_INS_ADD && next.ops[1].type == X86_OP_IMM && next.ops[1].imm == 8) ||
                    (next.id == X86_INS_LEA && next.ops[1].type == X86_OP_MEM &&
                     next.ops[1].mem.base == X86_REG_RSP && next.ops[1].mem.index == X86_REG_INVALID &&
                     next.ops[1].mem.disp == 8))) {
          marks.push_back({static_cast<uint32_t>(i), FlowKind::kTrapPop, ip});
        } else if (current.id == X86_INS_MOV && current.op_count == 2 && IsRsp(current.ops[0]) &&
                   next.id == X86_INS_POP && next.op_count >= 1 && SameOperand(next.ops[0], x)) {
          marks.push_back({static_cast<uint32_t>(i), FlowKind::kRaise, ip});
        }
      }
    }
    ip = next_ip;
    current = candidate ? next : decode(ip);
    if (i + 1 < count && !current.valid) break;
  }
  cs_free(scratch, 1);
  return marks;
}

}  // namespace ptd::decoder
