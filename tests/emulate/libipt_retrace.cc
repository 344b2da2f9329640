#include "tests/emulate/libipt_retrace.h"

#include <intel-pt.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <variant>

#include "common/file_util.h"
#include "common/trace_dir.h"
#include "gtest/gtest.h"
#include "sideband/record_reader.h"
#include "tests/testing/pt_config.h"

namespace ptd::testing {
namespace {

struct Switch {
  uint64_t time = 0;
  int tid = -1;
};

// MMAP2 records of every kernel sideband file, in time order, and every vCPU's
// switch-ins.
void ReadSideband(const std::string& trace_dir, const TraceMeta& meta,
                  std::vector<Mmap2Record>* maps, std::map<int, std::vector<Switch>>* switches) {
  std::vector<std::pair<uint64_t, Mmap2Record>> timed;
  for (const SidebandFile& file : meta.sideband) {
    absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(ResolveTracePath(trace_dir, file.file));
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    RecordFormat format;
    format.sample_type = file.sample_type;
    format.sample_id_all = file.sample_id_all;
    RecordReader reader(*bytes, file.file, format);
    for (;;) {
      absl::StatusOr<std::optional<PerfRecord>> record = reader.Next();
      ASSERT_TRUE(record.ok()) << record.status();
      if (!record->has_value()) break;
      const PerfRecord& r = **record;
      if (const auto* m = std::get_if<Mmap2Record>(&r.body)) {
        timed.emplace_back(r.sample_id.time, *m);
      } else if (const auto* s = std::get_if<SwitchCpuWideRecord>(&r.body)) {
        if (!s->out && file.origin == "synthesized") {
          (*switches)[file.cpu].push_back({r.sample_id.time, static_cast<int>(r.sample_id.tid)});
        }
      }
    }
  }
  std::stable_sort(timed.begin(), timed.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [time, m] : timed) maps->push_back(m);
}

}  // namespace

TraceMeta LoadMeta(const std::string& trace_dir) {
  absl::StatusOr<TraceMeta> meta = ReadTraceMeta(trace_dir);
  EXPECT_TRUE(meta.ok()) << meta.status();
  return meta.ok() ? *meta : TraceMeta{};
}

RetraceResult RetraceStream(const std::string& trace_dir, const TraceMeta& meta,
                            const PtStream& stream, const PtChunk* chunk) {
  RetraceResult result;
  std::vector<Mmap2Record> maps;
  std::map<int, std::vector<Switch>> switches;
  ReadSideband(trace_dir, meta, &maps, &switches);

  pt_image* image = pt_image_alloc("retrace");
  for (const Mmap2Record& m : maps) {
    if (m.data || (m.prot & PROT_EXEC) == 0) continue;
    if (m.filename.empty() || m.filename[0] == '[' || m.filename[0] != '/') continue;
    pt_image_add_file(image, m.filename.c_str(), m.pgoff, m.len, nullptr, m.addr);
  }
  for (const ImageEntry& entry : meta.images) {
    if (entry.kind != ImageKind::kVdso) continue;
    const std::string path = ResolveTracePath(trace_dir, entry.path);
    EXPECT_EQ(pt_image_add_file(image, path.c_str(), entry.file_offset, entry.size, nullptr,
                                entry.vaddr),
              0)
        << path;
  }

  absl::StatusOr<std::vector<uint8_t>> bytes =
      ReadFileBytes(ResolveTracePath(trace_dir, stream.file));
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  if (!bytes.ok() || bytes->empty()) {
    pt_image_free(image);
    return result;
  }
  if (chunk != nullptr) {
    EXPECT_LE(chunk->file_offset + chunk->size, bytes->size());
    if (chunk->file_offset + chunk->size > bytes->size()) {
      pt_image_free(image);
      return result;
    }
    bytes->erase(bytes->begin() + static_cast<long>(chunk->file_offset + chunk->size), bytes->end());
    bytes->erase(bytes->begin(), bytes->begin() + static_cast<long>(chunk->file_offset));
  }
  const size_t size = bytes->size();
  bytes->resize(size + 64, 0);  // libipt may read past the end while searching for PSB
  pt_config config = ptd::testing::TracePtConfig(meta, bytes->data(), size);
  pt_block_decoder* decoder = pt_blk_alloc_decoder(&config);
  pt_blk_set_image(decoder, image);

  const std::vector<Switch>* schedule =
      stream.cpu >= 0 && switches.count(stream.cpu) ? &switches[stream.cpu] : nullptr;
  int current_tid = stream.tid;
  auto note_error = [&](int status, const char* where) {
    ++result.errors;
    if (result.first_error.empty()) {
      uint64_t offset = 0;
      pt_blk_get_offset(decoder, &offset);
      result.first_error = std::string(where) + ": " + pt_errstr(pt_errcode(status)) +
                           " at offset " + std::to_string(offset);
    }
  };
  for (;;) {
    int status = pt_blk_sync_forward(decoder);
    if (status == -pte_eos) break;
    if (status < 0) {
      note_error(status, "sync");
      break;
    }
    for (;;) {
      while (status >= 0 && (status & pts_event_pending)) {
        pt_event event;
        status = pt_blk_event(decoder, &event, sizeof(event));
        if (status < 0) break;
        if (event.type == ptev_enabled) {
          ++result.enables;
          if (schedule != nullptr && event.has_tsc) {
            current_tid = -1;
            for (const Switch& s : *schedule) {
              if (s.time <= event.tsc) current_tid = s.tid;
            }
          }
        } else if (event.type == ptev_async_disabled) {
          ++result.async_disables;
          result.last_disable_ip = event.variant.async_disabled.at;
        } else if (event.type == ptev_overflow) {
          ++result.overflows;
        }
      }
      if (status < 0) break;
      pt_block block;
      std::memset(&block, 0, sizeof(block));
      status = pt_blk_next(decoder, &block, sizeof(block));
      result.instructions += block.ninsn;
      result.per_tid[current_tid] += block.ninsn;
      if (block.ninsn > 0 && result.block_ips.size() < (1u << 20)) {
        result.block_ips.push_back(block.ip);
        uint64_t tsc = 0;
        uint32_t lost_mtc = 0;
        uint32_t lost_cyc = 0;
        pt_blk_time(decoder, &tsc, &lost_mtc, &lost_cyc);
        result.block_ninsn.push_back(block.ninsn);
        result.block_times.push_back(tsc);
        result.lost_mtc += lost_mtc;
        result.lost_cyc += lost_cyc;
      }
      if (status < 0) break;
    }
    if (status == -pte_eos) break;
    note_error(status, "decode");
  }
  pt_blk_free_decoder(decoder);
  pt_image_free(image);
  return result;
}

}  // namespace ptd::testing
