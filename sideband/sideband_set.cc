#include "sideband/sideband_set.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <tuple>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/hex.h"
#include "common/trace_dir.h"
#include "sideband/record_reader.h"

namespace ptd {
namespace {

std::string HexBuildId(const Mmap2Record& r) {
  return HexString(absl::MakeConstSpan(r.build_id.data(), std::min<size_t>(r.build_id_size, r.build_id.size())));
}

// What MMAP and MMAP2 records both say.
template <class MmapLike>
Mapping CommonFieldsOf(const MmapLike& r) {
  Mapping m;
  m.start = r.addr;
  m.end = r.addr + r.len;
  m.pgoff = r.pgoff;
  m.path = r.filename;
  m.executable = !r.data;
  return m;
}

Mapping MappingOf(const MmapRecord& r) {
  Mapping m = CommonFieldsOf(r);
  m.prot = r.data ? 0 : 4;  // PROT_EXEC: MMAP records without the data flag are code
  return m;
}

Mapping MappingOf(const Mmap2Record& r) {
  Mapping m = CommonFieldsOf(r);
  m.prot = r.prot;
  m.flags = r.flags;
  if (r.has_build_id) {
    m.build_id = HexBuildId(r);
  } else {
    m.maj = r.maj;
    m.min = r.min;
    m.ino = r.ino;
  }
  return m;
}

int AsInt(uint32_t v) { return static_cast<int>(v); }


// Synthesized records are merged as state at time 0, but a synthesized schedule (the
// emulator's virtual CPUs) is only useful with the times it carries.
uint64_t SwitchTime(const SampleId& id, uint64_t merged_time) { return id.has_time ? id.time : merged_time; }

class SidebandBuilder {
 public:
  explicit SidebandBuilder(Sideband& sideband) : sb_(sideband) {}

  void Apply(const MergedRecord& merged) {
    const PerfRecord& record = merged.record;
    const uint64_t t = merged.time_ns;
    const SampleId& id = record.sample_id;
    const SidebandSourceInfo& source = sb_.sources[merged.source];
    ++sb_.stats.records;
    if (id.has_tid && record.type != kPerfRecordFork) {
      sb_.threads.OnSeen(AsInt(id.pid), AsInt(id.tid));
    }
    const int cpu = id.has_cpu ? AsInt(id.cpu) : source.cpu;
    std::visit(
        [&](const auto& r) {
          using T = std::decay_t<decltype(r)>;
          if constexpr (std::is_same_v<T, MmapRecord> || std::is_same_v<T, Mmap2Record>) {
            sb_.threads.OnSeen(AsInt(r.pid), AsInt(r.tid));
            sb_.mmaps.AddMapping(AsInt(r.pid), MappingOf(r), t);
          } else if constexpr (std::is_same_v<T, CommRecord>) {
            sb_.threads.OnComm(AsInt(r.pid), AsInt(r.tid), r.comm, r.exec, t);
            if (r.exec) sb_.mmaps.Exec(AsInt(r.pid), t, r.comm);
          } else if constexpr (std::is_same_v<T, ForkRecord>) {
            sb_.threads.OnFork(AsInt(r.pid), AsInt(r.ppid), AsInt(r.tid), AsInt(r.ptid), t);
            sb_.mmaps.Fork(AsInt(r.ppid), AsInt(r.pid), t);
          } else if constexpr (std::is_same_v<T, ExitRecord>) {
            sb_.threads.OnExit(AsInt(r.pid), AsInt(r.tid), t);
            // The address space goes with the last thread the table knows of.
            if (!sb_.threads.AnyThreadAlive(AsInt(r.pid))) sb_.mmaps.Exit(AsInt(r.pid), t);
          } else if constexpr (std::is_same_v<T, SwitchRecord>) {
            if (!id.has_tid || cpu < 0) {
              ++unplaced_switches_;
              return;
            }
            sb_.schedule.AddSwitch(cpu, AsInt(id.pid), AsInt(id.tid), r.out, SwitchTime(id, t));
          } else if constexpr (std::is_same_v<T, SwitchCpuWideRecord>) {
            if (!id.has_tid || cpu < 0) {
              ++unplaced_switches_;
              return;
            }
            sb_.schedule.AddSwitchCpuWide(cpu, AsInt(id.pid), AsInt(id.tid), r.out,
                                          AsInt(r.next_prev_pid), AsInt(r.next_prev_tid), SwitchTime(id, t));
          } else if constexpr (std::is_same_v<T, LostRecord>) {
            lost_per_source_[merged.source] += r.lost;
          } else if constexpr (std::is_same_v<T, LostSamplesRecord>) {
            sb_.stats.lost_samples += r.lost;
          } else if constexpr (std::is_same_v<T, AuxRecord>) {
            ++sb_.stats.aux_records;
            sb_.stats.aux_truncated += r.truncated();
            sb_.stats.aux_partial += r.partial();
            sb_.stats.aux_collision += r.collision();
            sb_.stats.aux_overwrite += r.overwrite();
          } else if constexpr (std::is_same_v<T, OtherRecord>) {
            ++sb_.stats.other_records;
          }
        },
        record.body);
  }

  uint64_t LostIn(int source) const {
    auto it = lost_per_source_.find(source);
    return it == lost_per_source_.end() ? 0 : it->second;
  }
  uint64_t unplaced_switches() const { return unplaced_switches_; }

 private:
  Sideband& sb_;
  std::map<int, uint64_t> lost_per_source_;
  uint64_t unplaced_switches_ = 0;
};

}  // namespace

Sideband BuildSideband(std::vector<SidebandSource> sources) {
  Sideband sb;
  // Kernel record times come from sample_id; records without one take the time of the
  // record before them in the same source. Synthesized records describe what existed
  // before the recording started, so they take effect at time 0 and come first.
  struct Key {
    bool kernel;
    uint64_t time;
    int source;
    size_t index;
  };
  std::vector<Key> keys;
  for (size_t s = 0; s < sources.size(); ++s) {
    SidebandSource& source = sources[s];
    source.info.records = source.records.size();
    uint64_t previous = 0;
    for (size_t i = 0; i < source.records.size(); ++i) {
      const SampleId& id = source.records[i].sample_id;
      if (id.has_time) {
        previous = id.time;
      } else {
        ++sb.stats.records_without_time;
      }
      uint64_t time = source.info.synthesized ? 0 : previous;
      keys.push_back(Key{!source.info.synthesized, time, static_cast<int>(s), i});
    }
    sb.sources.push_back(source.info);
  }
  std::stable_sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
    return std::tie(a.kernel, a.time) < std::tie(b.kernel, b.time);
  });
  sb.records.reserve(keys.size());
  for (const Key& key : keys) {
    sb.records.push_back(MergedRecord{
        key.time, key.source, std::move(sources[key.source].records[key.index])});
  }
  SidebandBuilder builder(sb);
  for (const MergedRecord& merged : sb.records) builder.Apply(merged);
  for (size_t s = 0; s < sb.sources.size(); ++s) {
    sb.stats.lost_records += builder.LostIn(static_cast<int>(s));
    if (!sb.sources[s].error.ok()) {
      ++sb.stats.parse_errors;
      sb.problems.push_back(std::string(sb.sources[s].error.message()));
    }
  }
  if (builder.unplaced_switches() > 0) {
    sb.problems.push_back(absl::StrCat(builder.unplaced_switches(),
                                       " context-switch records without tid or cpu ignored"));
  }
  return sb;
}

absl::StatusOr<Sideband> LoadSideband(const std::string& trace_dir, const TraceMeta& meta,
                                      const SidebandLoadOptions& options) {
  std::vector<SidebandSource> sources;
  uint64_t meta_lost = 0;
  std::vector<std::string> read_problems;
  for (const SidebandFile& file : meta.sideband) {
    SidebandSource source;
    source.info.file = file.file;
    source.info.synthesized = file.origin == "synthesized";
    source.info.cpu = file.cpu;
    source.info.tid = file.tid;
    const std::string path = ResolveTracePath(trace_dir, file.file);
    absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(path);
    if (!bytes.ok()) {
      if (!options.keep_going) return bytes.status();
      source.info.error = bytes.status();
      sources.push_back(std::move(source));
      continue;
    }
    source.info.bytes = bytes->size();
    RecordFormat format{file.sample_type, file.sample_id_all};
    RecordList list = ReadRecordsUpToError(*bytes, path, format);
    if (!list.error.ok()) {
      if (!options.keep_going) return list.error;
      source.info.error = list.error;
    }
    source.records = std::move(list.records);
    sources.push_back(std::move(source));
    meta_lost += file.lost_records;
  }
  Sideband sb = BuildSideband(std::move(sources));
  // The recorder sums PERF_RECORD_LOST into meta.json as well; a file cut short may have
  // lost its LOST records, so the larger count wins.
  sb.stats.lost_records = std::max(sb.stats.lost_records, meta_lost);
  return sb;
}

}  // namespace ptd
