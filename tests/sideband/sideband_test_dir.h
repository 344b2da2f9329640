#pragma once
// A trace directory with sideband written by RecordBuilder, for LoadSideband and `info`
// tests. The scenario (all times in ns):
//   synthesized: MMAP2 /bin/prog 0x400000-0x402000 and COMM "prog" for pid 100 (attach)
//   cpu0: 1000 FORK thread 101 of 100; 1100 COMM 101 "worker"; 1200 SWITCH_CPU_WIDE in
//         101; 1500 MMAP2 libdl-loaded.so at 0x7f0000000000 (pid 100);
//         1600 FORK process 200 from 100; 2000 SWITCH out 101; 2500 EXIT 101
//   cpu1: 1050 SWITCH_CPU_WIDE in 100; 1300 LOST 5; 1700 COMM exec 200 "child";
//         1800 MMAP2 [vdso] 0x7ffff7fc1000 for pid 200; 1900 AUX truncated; 3000 out 100

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/file_util.h"
#include "common/trace_dir.h"
#include "common/trace_meta.h"
#include "sideband/record_builder.h"

namespace ptd::testing {

inline SampleId SidAt(uint32_t pid, uint32_t tid, uint64_t time, uint32_t cpu) {
  SampleId s;
  s.has_tid = s.has_time = s.has_cpu = s.has_id = true;
  s.pid = pid, s.tid = tid, s.time = time, s.cpu = cpu, s.id = 1;
  return s;
}

inline Mmap2Record Map2(uint32_t pid, uint64_t addr, uint64_t len, uint64_t pgoff,
                        const std::string& path) {
  Mmap2Record m;
  m.pid = m.tid = pid;
  m.addr = addr, m.len = len, m.pgoff = pgoff;
  m.prot = 5, m.flags = 2;
  m.filename = path;
  return m;
}

struct SidebandTestFiles {
  std::vector<uint8_t> synthesized, cpu0, cpu1;
};

inline SidebandTestFiles MakeSidebandTestFiles() {
  SidebandTestFiles f;
  RecordBuilder syn, c0, c1;
  syn.Append(Map2(100, 0x400000, 0x2000, 0, "/bin/prog"), SidAt(100, 100, 900, 0));
  syn.Append(CommRecord{100, 100, "prog", false}, SidAt(100, 100, 900, 0));
  c0.Append(ForkRecord{100, 100, 101, 100, 1000}, SidAt(100, 100, 1000, 0));
  c0.Append(CommRecord{100, 101, "worker", false}, SidAt(100, 101, 1100, 0));
  c0.Append(SwitchCpuWideRecord{0, 0, false, false}, SidAt(100, 101, 1200, 0));
  c0.Append(Map2(100, 0x7f0000000000, 0x3000, 0x1000, "/usr/lib/libdl-loaded.so"),
            SidAt(100, 100, 1500, 0));
  c0.Append(ForkRecord{200, 100, 200, 100, 1600}, SidAt(100, 100, 1600, 0));
  c0.Append(SwitchCpuWideRecord{0, 0, true, false}, SidAt(100, 101, 2000, 0));
  c0.Append(ExitRecord{100, 100, 101, 101, 2500}, SidAt(100, 101, 2500, 0));
  c1.Append(SwitchCpuWideRecord{0, 0, false, false}, SidAt(100, 100, 1050, 1));
  c1.Append(LostRecord{1, 5}, SidAt(100, 100, 1300, 1));
  c1.Append(CommRecord{200, 200, "child", true}, SidAt(200, 200, 1700, 1));
  c1.Append(Map2(200, 0x7ffff7fc1000, 0x2000, 0, "[vdso]"), SidAt(200, 200, 1800, 1));
  c1.Append(AuxRecord{0, 4096, kPerfAuxFlagTruncated}, SidAt(200, 200, 1900, 1));
  c1.Append(SwitchCpuWideRecord{0, 0, true, false}, SidAt(100, 100, 3000, 1));
  f.synthesized = syn.Take();
  f.cpu0 = c0.Take();
  f.cpu1 = c1.Take();
  return f;
}

// Writes the scenario as `dir`; `cpu1_bytes` replaces cpu1's bytes when given.
inline absl::StatusOr<TraceMeta> WriteSidebandTestDir(const std::string& dir,
                                                      const std::vector<uint8_t>* cpu1_bytes =
                                                          nullptr) {
  SidebandTestFiles files = MakeSidebandTestFiles();
  absl::StatusOr<TraceDirWriter> writer = TraceDirWriter::Create(dir, false);
  if (!writer.ok()) return writer.status();
  TraceMeta meta;
  meta.mode = TraceMode::kEmulated;
  meta.command = {"/bin/prog", "--flag"};
  meta.pids = {100};
  meta.per = "cpu";
  meta.end_reason = "exit";
  meta.notes = {"test scenario"};
  struct Out {
    std::string name;
    const std::vector<uint8_t>* bytes;
    int cpu;
    std::string origin;
  };
  for (const Out& out : {Out{"sideband/synth.data", &files.synthesized, -1, "synthesized"},
                         Out{"sideband/cpu0.data", &files.cpu0, 0, "kernel"},
                         Out{"sideband/cpu1.data", cpu1_bytes ? cpu1_bytes : &files.cpu1, 1,
                             "kernel"}}) {
    if (absl::Status st = WriteFileAtomic(writer->FilePath(out.name), *out.bytes); !st.ok())
      return st;
    SidebandFile sb;
    sb.file = out.name;
    sb.cpu = out.cpu;
    sb.origin = out.origin;
    sb.sample_type = kSidebandSampleType;
    sb.sample_id_all = true;
    sb.lost_records = out.cpu == 1 ? 5 : 0;
    meta.sideband.push_back(sb);
  }
  std::vector<uint8_t> pt(4096, 0x02);
  if (absl::Status st = WriteFileAtomic(writer->FilePath("aux/cpu1.pt"), pt); !st.ok()) return st;
  PtStream stream;
  stream.file = "aux/cpu1.pt";
  stream.cpu = 1;
  PtChunk chunk;
  chunk.size = 4096;
  chunk.reason = "linear";
  chunk.truncated = true;
  stream.chunks.push_back(chunk);
  meta.streams.push_back(stream);
  ImageEntry vdso;
  vdso.path = "images/vdso.200.so";
  vdso.name = "[vdso]";
  vdso.vaddr = 0x7ffff7fc1000;
  vdso.size = 0x2000;
  vdso.pid = 200;
  vdso.kind = ImageKind::kVdso;
  meta.images.push_back(vdso);
  if (absl::Status st = writer->Commit(meta); !st.ok()) return st;
  return meta;
}

}  // namespace ptd::testing
