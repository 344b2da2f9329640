// The Valgrind tool's stream turned into PT and sideband, on hand-made streams: which
// packets each kind of block exit makes, rep iterations, faults, thread switches, forks
// waiting for their parent, exec, damaged input. Packets are read back with libipt's
// packet decoder; sideband with our record reader.
#include "recorder/valgrind/vgpt_converter.h"

#include <intel-pt.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/trace_dir.h"
#include "gtest/gtest.h"
#include "recorder/valgrind/tool/vgpt_stream.h"
#include "sideband/record_reader.h"
#include "tests/testing/test_util.h"
#include "tests/valgrind/vgpt_stream_builder.h"

namespace ptd {
namespace {

using ::ptd::testing::StreamBuilder;
using ::ptd::testing::TempDir;

struct Packets {
  int tnt_bits = 0;
  std::string tnt;  // '1' taken, '0' not, oldest first
  int tips = 0;
  int pges = 0;
  int pgds = 0;
  int fups = 0;
  std::vector<uint64_t> fup_ips;
  std::vector<uint64_t> tip_ips;
};

Packets ReadPackets(const std::string& path) {
  absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(path);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  Packets out;
  if (!bytes.ok() || bytes->empty()) return out;
  pt_config config;
  pt_config_init(&config);
  config.begin = bytes->data();
  config.end = bytes->data() + bytes->size();
  pt_packet_decoder* decoder = pt_pkt_alloc_decoder(&config);
  EXPECT_GE(pt_pkt_sync_forward(decoder), 0);
  pt_packet packet;
  uint64_t last_ip = 0;
  while (pt_pkt_next(decoder, &packet, sizeof(packet)) >= 0) {
    auto ip = [&]() {
      // Reconstruct the IP against the last one (only the compressions the generator uses).
      const pt_packet_ip& p = packet.payload.ip;
      switch (p.ipc) {
        case pt_ipc_update_16: last_ip = (last_ip & ~0xffffull) | (p.ip & 0xffff); break;
        case pt_ipc_update_32: last_ip = (last_ip & ~0xffffffffull) | (p.ip & 0xffffffff); break;
        case pt_ipc_update_48: last_ip = (last_ip & ~0xffffffffffffull) | (p.ip & 0xffffffffffffull); break;
        case pt_ipc_sext_48:
        case pt_ipc_full: last_ip = p.ip; break;
        default: break;
      }
      return last_ip;
    };
    switch (packet.type) {
      case ppt_tnt_8:
      case ppt_tnt_64:
        for (int b = packet.payload.tnt.bit_size - 1; b >= 0; --b) out.tnt += ((packet.payload.tnt.payload >> b) & 1) ? '1' : '0';
        out.tnt_bits += packet.payload.tnt.bit_size;
        break;
      case ppt_tip: ++out.tips; out.tip_ips.push_back(ip()); break;
      case ppt_tip_pge: ++out.pges; ip(); break;
      case ppt_tip_pgd: ++out.pgds; break;
      case ppt_fup: ++out.fups; out.fup_ips.push_back(ip()); break;
      case ppt_psb: last_ip = 0; break;
      default: break;
    }
  }
  pt_pkt_free_decoder(decoder);
  return out;
}

class ConverterTest : public ::testing::Test {
 protected:
  ConverterTest() : dir_(*TraceDirWriter::Create(tmp_.Sub("trace.dir"), false)) {
    PtStreamSetOptions options;
    options.generator.psb_period = 0;  // one PSB: easier to read back
    streams_ = std::make_unique<PtStreamSet>(options, &dir_);
    converter_ = std::make_unique<VgptConverter>(VgptConverterOptions{}, streams_.get(), &dir_);
  }
  // Feeds all of `stream` as one instance; returns the instance.
  int FeedAll(const StreamBuilder& stream) {
    const int instance = converter_->OpenInstance("test");
    bool waiting = false;
    EXPECT_EQ(converter_->Feed(instance, absl::MakeConstSpan(stream.words()), &waiting), stream.words().size());
    EXPECT_FALSE(waiting);
    return instance;
  }
  TraceMeta Finish() {
    TraceMeta meta;
    EXPECT_TRUE(converter_->Finish(&meta).ok());
    return meta;
  }
  Packets StreamOf(int tid) { return ReadPackets(dir_.FilePath("aux/tid" + std::to_string(tid) + ".pt")); }
  std::vector<PerfRecord> Sideband() {
    absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(dir_.FilePath("sideband/valgrind.data"));
    std::vector<PerfRecord> out;
    if (!bytes.ok()) return out;
    RecordReader reader(*bytes, "valgrind.data", RecordFormat{});
    for (auto r = reader.Next(); r.ok() && r->has_value(); r = reader.Next()) out.push_back(**r);
    return out;
  }

  TempDir tmp_;
  TraceDirWriter dir_;
  std::unique_ptr<PtStreamSet> streams_;
  std::unique_ptr<VgptConverter> converter_;
};

TEST_F(ConverterTest, ConditionalLoopGivesOneTntBitPerIteration) {
  StreamBuilder s;
  s.Hello(100, 1)
      .Block(1, 0x1000, {4, 3, 2}, VGPT_KIND_COND, 0x1000)  // loops to itself
      .Block(2, 0x1009, {1}, VGPT_KIND_SYSCALL)
      .Run({1, 1, 1, 2})
      .Exit();
  FeedAll(s);
  Finish();
  EXPECT_EQ(converter_->stats().instructions, 3u * 3u + 1u);
  Packets p = StreamOf(100);
  EXPECT_EQ(p.tnt, "110");  // taken twice, then out of the loop
  EXPECT_EQ(p.pges, 1);
  EXPECT_EQ(p.pgds, 1);  // the system call
}

TEST_F(ConverterTest, IndirectBranchesAndUncompressedReturnsGetTips) {
  StreamBuilder s;
  s.Hello(100, 1)
      .Block(1, 0x1000, {2, 3}, VGPT_KIND_ICALL)        // call *%rax -> 0x5000
      .Block(2, 0x5000, {1}, VGPT_KIND_RET)              // ret -> 0x1005 (compressed)
      .Block(3, 0x1005, {2}, VGPT_KIND_RET)              // ret to a caller never seen: TIP
      .Block(4, 0x7000, {1}, VGPT_KIND_SYSCALL)
      .Run({1, 2, 3, 4})
      .Exit();
  FeedAll(s);
  Finish();
  Packets p = StreamOf(100);
  ASSERT_EQ(p.tip_ips.size(), 2u);
  EXPECT_EQ(p.tip_ips[0], 0x5000u);
  EXPECT_EQ(p.tip_ips[1], 0x7000u);
  EXPECT_EQ(p.tnt, "1");  // the compressed return
}

TEST_F(ConverterTest, RepInstructionRetiresOnceHoweverManyIterations) {
  StreamBuilder s;
  s.Hello(100, 1)
      .Block(1, 0x1000, {3, 2}, VGPT_KIND_REP, 0x1003)  // mov; rep movsb at 0x1003
      .Block(2, 0x1003, {2}, VGPT_KIND_REP, 0x1003)     // the rep alone, re-entered
      .Block(3, 0x1005, {1}, VGPT_KIND_SYSCALL)
      .Run({1, 2, 2, 2, 3})
      .Exit();
  FeedAll(s);
  Finish();
  EXPECT_EQ(converter_->stats().instructions, 3u);  // mov, rep movsb, syscall
}

TEST_F(ConverterTest, FaultRetiresOnlyWhatRanBeforeTheFaultingInstruction) {
  StreamBuilder s;
  s.Hello(100, 1)
      .Block(1, 0x1000, {2, 3, 4}, VGPT_KIND_JUMP, 0x2000)
      .Block(2, 0x3000, {1}, VGPT_KIND_SYSCALL)  // the handler
      .Run({1})
      .Signal(100, 0x1005)  // the third instruction faulted
      .Run({2})
      .Exit();
  FeedAll(s);
  Finish();
  EXPECT_EQ(converter_->stats().faults, 1u);
  EXPECT_EQ(converter_->stats().instructions, 2u + 1u);
  Packets p = StreamOf(100);
  ASSERT_FALSE(p.fup_ips.empty());
  EXPECT_EQ(p.fup_ips.back(), 0x1005u);  // FUP + TIP.PGD at the faulting instruction
  EXPECT_EQ(p.pges, 2);                   // start, handler
}

TEST_F(ConverterTest, SideExitInTheMiddleOfABlockRetiresOnlyWhatPrecedesIt) {
  // VEX leaves a block after fldcw when it warns that it cannot emulate the precision:
  // the next block starts at the instruction after it, inside the block.
  StreamBuilder s;
  s.Hello(100, 1)
      .Block(1, 0x1000, {4, 5, 5}, VGPT_KIND_CALL, 0x9000)  // fldcw; lea; call 0x9000
      .Block(2, 0x1004, {5, 5}, VGPT_KIND_CALL, 0x9000)
      .Block(3, 0x9000, {1}, VGPT_KIND_SYSCALL)
      .Run({1, 2, 3})
      .Exit();
  FeedAll(s);
  Finish();
  EXPECT_EQ(converter_->stats().side_exits, 1u);
  EXPECT_EQ(converter_->stats().instructions, 1u + 2u + 1u);  // fldcw once, lea and call once
}

TEST_F(ConverterTest, PreemptedThreadIsDisabledWhereItWillResume) {
  StreamBuilder s;
  s.Hello(100, 1)
      .Switch(100)
      .Block(1, 0x1000, {2}, VGPT_KIND_JUMP, 0x1100)
      .Block(2, 0x2000, {1}, VGPT_KIND_SYSCALL)
      .Block(3, 0x1100, {1}, VGPT_KIND_SYSCALL)
      .Run({1})
      .Switch(101, 100, 0x1100)  // 100 preempted before 0x1100
      .Run({2})
      .Switch(100, 101, 0x2001)
      .Run({3})
      .Exit();
  FeedAll(s);
  TraceMeta meta = Finish();
  EXPECT_EQ(meta.streams.size(), 2u);
  Packets main = StreamOf(100);
  ASSERT_EQ(main.fup_ips.size(), 1u);
  EXPECT_EQ(main.fup_ips[0], 0x1100u);
  EXPECT_EQ(main.pges, 2);  // start, resume
  bool fork_of_101 = false;
  for (const PerfRecord& r : Sideband()) {
    if (const auto* f = std::get_if<ForkRecord>(&r.body); f != nullptr && f->tid == 101 && f->pid == 100) fork_of_101 = true;
  }
  EXPECT_TRUE(fork_of_101);
  // Each switch is a context-switch record pair: out (preempted) and in.
  int outs = 0, ins = 0;
  for (const PerfRecord& r : Sideband()) {
    if (const auto* sw = std::get_if<SwitchRecord>(&r.body); sw != nullptr) (sw->out ? outs : ins) += 1;
  }
  EXPECT_EQ(outs, 2);
  EXPECT_EQ(ins, 3);
}

TEST_F(ConverterTest, ForkedChildWaitsForItsParentsForkAndStartsAtItsTime) {
  StreamBuilder parent;
  parent.Hello(100, 1).Block(1, 0x1000, {5}, VGPT_KIND_SYSCALL).Run({1, 1, 1}).Forking(1).Run({1}).Exit();
  StreamBuilder child;
  child.Hello(200, 100, VGPT_HELLO_FORK_CHILD, 1).Block(1, 0x1005, {1}, VGPT_KIND_SYSCALL).Run({1}).Exit();
  const int p = converter_->OpenInstance("parent");
  const int c = converter_->OpenInstance("child");
  bool waiting = false;
  EXPECT_EQ(converter_->Feed(c, absl::MakeConstSpan(child.words()), &waiting), 0u);
  EXPECT_TRUE(waiting);
  EXPECT_EQ(converter_->Feed(p, absl::MakeConstSpan(parent.words()), &waiting), parent.words().size());
  EXPECT_EQ(converter_->Feed(c, absl::MakeConstSpan(child.words()), &waiting), child.words().size());
  EXPECT_FALSE(waiting);
  Finish();
  uint64_t forking_time = 0, fork_record_time = 0;
  for (const PerfRecord& r : Sideband()) {
    if (const auto* f = std::get_if<ForkRecord>(&r.body); f != nullptr && f->pid == 200) {
      fork_record_time = f->time;
      EXPECT_EQ(f->ppid, 100u);
    }
  }
  // The parent's start (1000), its COMM record, then three blocks (3 x (one 5-byte
  // instruction + a system call's 1000 ns)) before forking.
  forking_time = 1000 + 1 + 3 * (1 + 1000);
  EXPECT_EQ(fork_record_time, forking_time);
  EXPECT_EQ(converter_->stats().forks, 1u);
}

TEST_F(ConverterTest, ExecedProgramContinuesItsProcessAfterTheOldOne) {
  StreamBuilder before;
  before.Hello(100, 1).Block(1, 0x1000, {5}, VGPT_KIND_SYSCALL).Run({1}).Exec();
  StreamBuilder after;
  after.Hello(100, 1, VGPT_HELLO_STARTUP, 0, "/bin/next", 1).Map(0x1000, 0x1000, "/bin/next")
      .Block(1, 0x1000, {7}, VGPT_KIND_SYSCALL).Run({1}).Exit();
  const int a = FeedAll(before);
  converter_->CloseInstance(a);
  FeedAll(after);
  Finish();
  EXPECT_EQ(converter_->stats().execs, 1u);
  EXPECT_EQ(converter_->stats().instructions, 1u + 1u);  // one system call in each program
  uint64_t exec_time = 0, map_time = 0;
  for (const PerfRecord& r : Sideband()) {
    if (const auto* c = std::get_if<CommRecord>(&r.body); c != nullptr && c->exec && c->comm == "next") exec_time = r.sample_id.time;
    if (const auto* m = std::get_if<Mmap2Record>(&r.body); m != nullptr && m->filename == "/bin/next") map_time = r.sample_id.time;
  }
  // After the execve (one instruction and its system call's 1000 ns), the new image's records.
  EXPECT_GT(exec_time, 1000u + 1u + 1000u);
  EXPECT_GT(map_time, exec_time);
  Packets p = StreamOf(100);
  EXPECT_EQ(p.pges, 2);  // one stream: the old program, then the new one
}

// A setuid program exec'd untraced: the process's trace ends at the exec, under the new
// program's name, and a note says which program and why.
TEST_F(ConverterTest, UntracedExecEndsTheProcessAtTheExecWithANote) {
  StreamBuilder stream;
  stream.Hello(100, 1).Block(1, 0x1000, {5}, VGPT_KIND_SYSCALL).Run({1}).ExecUntraced("/usr/bin/passwd");
  const int instance = FeedAll(stream);
  EXPECT_TRUE(converter_->Exited(instance));  // nothing more comes
  converter_->CloseInstance(instance);
  const TraceMeta meta = Finish();
  ASSERT_EQ(converter_->untraced_execs().size(), 1u);
  EXPECT_EQ(converter_->untraced_execs()[0].pid, 100);
  EXPECT_EQ(converter_->untraced_execs()[0].program, "/usr/bin/passwd");
  const std::string notes = absl::StrJoin(meta.notes, "\n");
  EXPECT_TRUE(absl::StrContains(notes, "pid 100 exec'd /usr/bin/passwd, which ran untraced (setuid")) << notes;
  uint64_t comm_time = 0, exit_time = 0;
  for (const PerfRecord& r : Sideband()) {
    const auto* c = std::get_if<CommRecord>(&r.body);
    if (c != nullptr && c->exec && c->comm == "passwd") comm_time = r.sample_id.time;
    if (std::holds_alternative<ExitRecord>(r.body)) exit_time = r.sample_id.time;
  }
  EXPECT_GT(comm_time, 0u);
  EXPECT_GT(exit_time, comm_time);
  EXPECT_EQ(converter_->stats().instructions, 1u);  // the execve
}

// An untraced exec that failed: the program goes on, traced, with nothing said.
TEST_F(ConverterTest, FailedUntracedExecLeavesTheProgramRunning) {
  StreamBuilder stream;
  stream.Hello(100, 1).Block(1, 0x1000, {5}, VGPT_KIND_SYSCALL).Run({1}).ExecUntraced("/usr/bin/passwd");
  stream.ExecFailed(100, 0x1005);
  const int instance = FeedAll(stream);
  EXPECT_FALSE(converter_->Exited(instance));  // more comes
  StreamBuilder rest;
  rest.Run({1}).Exit();
  bool waiting = false;
  EXPECT_EQ(converter_->Feed(instance, absl::MakeConstSpan(rest.words()), &waiting), rest.words().size());
  converter_->CloseInstance(instance);
  Finish();
  EXPECT_TRUE(converter_->untraced_execs().empty());
  EXPECT_EQ(converter_->stats().bad_records, 0u);
  EXPECT_EQ(converter_->stats().instructions, 2u);
}

// The loader calling a constructor of Valgrind's preload library: a call the program
// does not make without Valgrind. The trace leaves before the call (FUP at it) and comes
// back at its return address; the call never retires, so no frame of Valgrind's appears.
TEST_F(ConverterTest, CallIntoValgrindsCodeLeavesBeforeTheCall) {
  StreamBuilder stream;
  stream.Hello(100, 1)
      .Block(1, 0x1000, {3, 5}, VGPT_KIND_ICALL)
      .Block(2, 0x5000, {1}, VGPT_KIND_RET, 0, VGPT_BLOCK_HIDDEN)
      .Block(3, 0x1008, {2}, VGPT_KIND_SYSCALL)
      .Run({1, 2, 3})
      .Exit();
  converter_->CloseInstance(FeedAll(stream));
  Finish();
  EXPECT_EQ(converter_->stats().instructions, 2u);  // the one before the call, the syscall
  const Packets p = StreamOf(100);
  EXPECT_NE(std::find(p.fup_ips.begin(), p.fup_ips.end(), 0x1003u), p.fup_ips.end());
  EXPECT_EQ(std::find(p.tip_ips.begin(), p.tip_ips.end(), 0x5000u), p.tip_ips.end());
  EXPECT_EQ(p.pges, 2);  // the start, and the return address
}

// Each exec'd program counts its forks from 1 again: a child of the second program's
// first fork is not the first program's, and waits for its own fork even when the
// first program's stream is complete (its parent's next file not read yet).
TEST_F(ConverterTest, ForkAfterAnExecIsTheNewProgramsFork) {
  StreamBuilder first;
  first.Hello(100, 1).Block(1, 0x1000, {5}, VGPT_KIND_SYSCALL).Run({1}).Forking(1).Run({1}).Exec();
  StreamBuilder second;
  second.Hello(100, 1, VGPT_HELLO_STARTUP, 0, "/bin/next", 1).Map(0x1000, 0x1000, "/bin/next")
      .Block(1, 0x1000, {7}, VGPT_KIND_SYSCALL).Run({1, 1, 1}).Forking(1).Run({1}).Exit();
  StreamBuilder child_of_first;
  child_of_first.Hello(200, 100, VGPT_HELLO_FORK_CHILD, 1, "/bin/prog", 0, 0)
      .Block(1, 0x1005, {1}, VGPT_KIND_SYSCALL).Run({1}).Exit();
  StreamBuilder child_of_second;
  child_of_second.Hello(300, 100, VGPT_HELLO_FORK_CHILD, 1, "/bin/next", 0, 1)
      .Block(1, 0x1007, {1}, VGPT_KIND_SYSCALL).Run({1}).Exit();
  const int f = FeedAll(first);
  converter_->CloseInstance(f);
  FeedAll(child_of_first);
  const int c = converter_->OpenInstance("child of the second program");
  bool waiting = false;
  EXPECT_EQ(converter_->Feed(c, absl::MakeConstSpan(child_of_second.words()), &waiting), 0u);
  EXPECT_TRUE(waiting);
  FeedAll(second);
  EXPECT_EQ(converter_->Feed(c, absl::MakeConstSpan(child_of_second.words()), &waiting),
            child_of_second.words().size());
  EXPECT_FALSE(waiting);
  Finish();
  uint64_t exec_time = 0, first_fork = 0, second_fork = 0;
  for (const PerfRecord& r : Sideband()) {
    if (const auto* m = std::get_if<CommRecord>(&r.body); m != nullptr && m->exec && m->comm == "next") exec_time = r.sample_id.time;
    if (const auto* k = std::get_if<ForkRecord>(&r.body); k != nullptr && k->pid == 200) first_fork = k->time;
    if (const auto* k = std::get_if<ForkRecord>(&r.body); k != nullptr && k->pid == 300) second_fork = k->time;
  }
  EXPECT_GT(exec_time, 0u);
  EXPECT_LT(first_fork, exec_time);
  // Three system calls of the new program after its exec, then the fork: the child
  // inherits the new program's mappings, not the old one's.
  EXPECT_GT(second_fork, exec_time + 3 * 1000);
  EXPECT_EQ(converter_->stats().forks, 2u);
}

// A child whose parent's program was read to its end without the fork (the parent's
// stream was cut) does not wait for it: it starts at its parent's latest time.
TEST_F(ConverterTest, ChildOfAForkNeverWrittenStartsAtItsParentsLatestTime) {
  StreamBuilder parent;
  parent.Hello(100, 1).Block(1, 0x1000, {5}, VGPT_KIND_SYSCALL).Run({1, 1});  // cut: no fork, no exit
  StreamBuilder child;
  child.Hello(200, 100, VGPT_HELLO_FORK_CHILD, 1).Block(1, 0x1005, {1}, VGPT_KIND_SYSCALL).Run({1}).Exit();
  const int p = FeedAll(parent);
  const int c = converter_->OpenInstance("child");
  bool waiting = false;
  EXPECT_EQ(converter_->Feed(c, absl::MakeConstSpan(child.words()), &waiting), 0u);
  EXPECT_TRUE(waiting);
  converter_->CloseInstance(p);
  EXPECT_EQ(converter_->Feed(c, absl::MakeConstSpan(child.words()), &waiting), child.words().size());
  EXPECT_FALSE(waiting);
  Finish();
  EXPECT_EQ(converter_->stats().forks, 1u);
  EXPECT_EQ(converter_->stats().instructions, 2u + 1u);
}

TEST_F(ConverterTest, KilledProgramsThreadEndsWhereItsLastBlockBegan) {
  StreamBuilder s;
  s.Hello(100, 1).Block(1, 0x1000, {2, 2}, VGPT_KIND_JUMP, 0x1000).Run({1, 1});  // no exit record
  const int in = FeedAll(s);
  converter_->CloseInstance(in);
  Finish();
  EXPECT_EQ(converter_->stats().instructions, 2u);  // the first run; the second's end is unknown
  Packets p = StreamOf(100);
  ASSERT_FALSE(p.fup_ips.empty());
  EXPECT_EQ(p.fup_ips.back(), 0x1000u);
}

TEST_F(ConverterTest, DamagedStreamIsSkippedWithANote) {
  StreamBuilder s;
  s.Hello(100, 1).Block(1, 0x1000, {2}, VGPT_KIND_SYSCALL).Run({1, 7}).Raw({VGPT_TAG_BASE | VGPT_MAP, 0x7fffffff, 1, 2});
  FeedAll(s);
  TraceMeta meta = Finish();
  EXPECT_EQ(converter_->stats().unknown_blocks, 1u);  // id 7 was never described
  EXPECT_GE(converter_->stats().bad_records, 1u);
  bool noted = false;
  for (const std::string& n : meta.notes) noted |= n.find("damaged record") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST_F(ConverterTest, IncompleteRecordWaitsForTheRestOfIt) {
  StreamBuilder s;
  s.Hello(100, 1).Block(1, 0x1000, {2}, VGPT_KIND_SYSCALL);
  const std::vector<uint32_t>& w = s.words();
  const int in = converter_->OpenInstance("test");
  bool waiting = false;
  // All but the last word: the block record is not complete yet.
  const size_t taken = converter_->Feed(in, absl::MakeConstSpan(w.data(), w.size() - 1), &waiting);
  EXPECT_LT(taken, w.size() - 1);
  EXPECT_EQ(converter_->Feed(in, absl::MakeConstSpan(w.data() + taken, w.size() - taken), &waiting), w.size() - taken);
}

}  // namespace
}  // namespace ptd
