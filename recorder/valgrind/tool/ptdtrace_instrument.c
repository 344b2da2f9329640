/* ptdtrace's instrumentation: each superblock described once (its instructions, how its
   last one leaves) and made to store its id in the buffer each time it runs. */
#include "pub_tool_basics.h"
#include "pub_tool_tooliface.h"
#include "pub_tool_aspacemgr.h"
#include "pub_tool_clientstate.h"
#include "pub_tool_libcassert.h"
#include "pub_tool_libcbase.h"
#include "pub_tool_libcfile.h"
#include "pub_tool_libcprint.h"
#include "pub_tool_libcproc.h"
#include "pub_tool_machine.h"
#include "pub_tool_mallocfree.h"
#include "pub_tool_options.h"
#include "pub_tool_threadstate.h"
#include "pub_tool_transtab.h"
#include "pub_tool_vki.h"
#include "pub_tool_vkiscnums.h"

#include "vgpt_stream.h"
#include "ptdtrace.h"

static UInt next_block_id = 1;

static Bool is_client_request_preamble(Addr a, UInt len) {
  /* rol rdi,3; rol rdi,13; rol rdi,61; rol rdi,51; xchg r,r: VEX makes one IMark of
     the five instructions the CPU runs. */
  static const UChar preamble[4] = {0x48, 0xc1, 0xc7, 0x03};
  return len == 19 && VG_(memcmp)((const void*)a, preamble, 4) == 0;
}

/* What the CPU sees in the last instruction of a block. Direct and indirect transfers
   are told apart by the opcode, not by whether VEX knows the target: VEX folds constants
   (`mov $f,%rax; call *%rax` has a constant next), PT still writes a TIP for it; and a
   jcc whose condition VEX folded away still costs a TNT bit. */
enum { OP_OTHER, OP_JCC, OP_JMP, OP_CALL, OP_IJMP, OP_ICALL, OP_RET, OP_REP_STRING };

static UInt decode_last(Addr a, UInt len, Addr end, ULong* target) {
  const UChar* p = (const UChar*)a;
  const UChar* stop = p + len;
  Bool rep = False;
  while (p < stop) {
    UChar b = *p;
    if (b == 0xf2 || b == 0xf3) {
      rep = True;
      ++p;
    } else if (b == 0xf0 || b == 0x2e || b == 0x36 || b == 0x3e || b == 0x26 || b == 0x64 ||
               b == 0x65 || b == 0x66 || b == 0x67 || (b >= 0x40 && b <= 0x4f)) {
      ++p;
    } else {
      break;
    }
  }
  if (p >= stop) return OP_OTHER;
  UChar op = p[0];
  if ((op >= 0x70 && op <= 0x7f) || (op >= 0xe0 && op <= 0xe3)) {
    if (p + 2 > stop) return OP_OTHER;
    *target = end + (Long)(Char)p[1];
    return OP_JCC;
  }
  if (op == 0x0f && p + 6 <= stop && p[1] >= 0x80 && p[1] <= 0x8f) {
    Int rel;
    VG_(memcpy)(&rel, p + 2, 4);
    *target = end + (Long)rel;
    return OP_JCC;
  }
  if ((op == 0xe8 || op == 0xe9) && p + 5 <= stop) {
    Int rel;
    VG_(memcpy)(&rel, p + 1, 4);
    *target = end + (Long)rel;
    return op == 0xe8 ? OP_CALL : OP_JMP;
  }
  if (op == 0xeb && p + 2 <= stop) {
    *target = end + (Long)(Char)p[1];
    return OP_JMP;
  }
  if (op == 0xff && p + 2 <= stop) {
    UInt reg = (p[1] >> 3) & 7;
    if (reg == 2) return OP_ICALL;
    if (reg == 4) return OP_IJMP;
  }
  if (op == 0xc3 || op == 0xc2) return OP_RET;
  if (rep && ((op >= 0xa4 && op <= 0xa7) || (op >= 0xaa && op <= 0xaf) || (op >= 0x6c && op <= 0x6f)))
    return OP_REP_STRING;
  return OP_OTHER;
}

static UInt classify(IRSB* sb, Addr last_ip, Addr end, ULong* target) {
  *target = 0;
  switch (sb->jumpkind) {
    case Ijk_Sys_syscall:
    case Ijk_Sys_int128:
    case Ijk_Sys_int129:
    case Ijk_Sys_int130:
    case Ijk_Sys_int145:
    case Ijk_Sys_int210:
    case Ijk_Sys_sysenter:
      *target = end;
      return VGPT_KIND_SYSCALL;
    case Ijk_SigTRAP:
    case Ijk_SigILL:
    case Ijk_SigSEGV:
    case Ijk_SigBUS:
    case Ijk_SigFPE:
    case Ijk_SigFPE_IntDiv:
    case Ijk_SigFPE_IntOvf:
    case Ijk_NoDecode:
      return VGPT_KIND_TRAP;
    default:
      break;
  }
  switch (decode_last(last_ip, (UInt)(end - last_ip), end, target)) {
    case OP_JCC: return VGPT_KIND_COND;
    case OP_JMP: return VGPT_KIND_JUMP;
    case OP_CALL: return VGPT_KIND_CALL;
    case OP_IJMP: return VGPT_KIND_IJUMP;
    case OP_ICALL: return VGPT_KIND_ICALL;
    case OP_RET: return VGPT_KIND_RET;
    case OP_REP_STRING:
      *target = last_ip;
      return VGPT_KIND_REP;
    default:
      /* Falls through: VEX cut the block, or a client request, pause, cpuid... */
      *target = end;
      return VGPT_KIND_NONE;
  }
}

IRSB* instrument(VgCallbackClosure* closure, IRSB* in, const VexGuestLayout* layout,
                        const VexGuestExtents* vge, const VexArchInfo* archinfo,
                        IRType gWordTy, IRType hWordTy) {
  (void)closure;
  (void)layout;
  (void)vge;
  (void)archinfo;
  if (gWordTy != Ity_I64 || hWordTy != Ity_I64) VG_(tool_panic)("ptdtrace: amd64 only");

  /* Describe the block: its instructions and how it ends. */
  UChar lengths[512];
  UInt n = 0;
  Addr start = 0, last_ip = 0, end = 0;
  for (Int i = 0; i < in->stmts_used; ++i) {
    IRStmt* st = in->stmts[i];
    if (st->tag != Ist_IMark) continue;
    Addr a = st->Ist.IMark.addr;
    UInt len = st->Ist.IMark.len;
    if (n == 0) start = a;
    if (is_client_request_preamble(a, len) && n + 5 < sizeof(lengths)) {
      lengths[n++] = 4;
      lengths[n++] = 4;
      lengths[n++] = 4;
      lengths[n++] = 4;
      lengths[n++] = 3;
    } else if (n < sizeof(lengths)) {
      lengths[n++] = (UChar)len;
    }
    last_ip = a;
    end = a + len;
  }
  if (n == 0) return in; /* nothing the CPU would run */
  if (is_client_request_preamble(last_ip, (UInt)(end - last_ip))) last_ip = end - 3;

  ULong target = 0;
  UInt kind = classify(in, last_ip, end, &target);
  UInt id = next_block_id++;
  tl_assert(id < VGPT_TAG_BASE);
  begin(VGPT_BLOCK, 12 + (n + 3) / 4);
  put32(id);
  put64(start);
  put64(end);
  put64(last_ip);
  put64(target);
  put32(kind);
  put32(n);
  put32(is_valgrinds_code(start) ? VGPT_BLOCK_HIDDEN : 0);
  put_bytes(lengths, n);
  if (is_jit_code(start) && !is_valgrinds_code(start) && end - start < 4 * BUF_WORDS / 2) {
    begin(VGPT_CODE, 4 + (UInt)((end - start + 3) / 4));
    put32(id);
    put64(start);
    put32((UInt)(end - start));
    put_bytes((const void*)start, end - start);
  }

  /* Copy the statements, storing the id at the first instruction: after any
     self-check preamble, which may discard the block before it runs. */
  IRSB* out = deepCopyIRSBExceptStmts(in);
  Bool stored = False;
  for (Int i = 0; i < in->stmts_used; ++i) {
    IRStmt* st = in->stmts[i];
    if (!stored && st->tag == Ist_IMark) {
      stored = True;
      IRTemp pos = newIRTemp(out->tyenv, Ity_I64);
      IRTemp next_pos = newIRTemp(out->tyenv, Ity_I64);
      IRTemp full = newIRTemp(out->tyenv, Ity_I1);
      addStmtToIRSB(out, st);
      addStmtToIRSB(out, IRStmt_WrTmp(pos, IRExpr_Load(Iend_LE, Ity_I64,
                                                       mkIRExpr_HWord((HWord)&buf_pos))));
      addStmtToIRSB(out, IRStmt_Store(Iend_LE, IRExpr_RdTmp(pos),
                                      IRExpr_Const(IRConst_U32(id))));
      addStmtToIRSB(out, IRStmt_WrTmp(next_pos, IRExpr_Binop(Iop_Add64, IRExpr_RdTmp(pos),
                                                             IRExpr_Const(IRConst_U64(4)))));
      addStmtToIRSB(out, IRStmt_Store(Iend_LE, mkIRExpr_HWord((HWord)&buf_pos),
                                      IRExpr_RdTmp(next_pos)));
      IRTemp limit = newIRTemp(out->tyenv, Ity_I64);
      addStmtToIRSB(out, IRStmt_WrTmp(limit, IRExpr_Load(Iend_LE, Ity_I64,
                                                         mkIRExpr_HWord((HWord)&stamp_limit))));
      addStmtToIRSB(out, IRStmt_WrTmp(full, IRExpr_Binop(Iop_CmpLE64U, IRExpr_RdTmp(limit),
                                                         IRExpr_RdTmp(next_pos))));
      IRDirty* di = unsafeIRDirty_0_N(0, "ptdtrace_at_stamp_limit",
                                      VG_(fnptr_to_fnentry)(&at_stamp_limit), mkIRExprVec_0());
      di->guard = IRExpr_RdTmp(full);
      addStmtToIRSB(out, IRStmt_Dirty(di));
      continue;
    }
    addStmtToIRSB(out, st);
  }
  return out;
}
