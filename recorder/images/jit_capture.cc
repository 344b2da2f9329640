#include "recorder/images/jit_capture.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "image/jitdump.h"

namespace ptd {

void JitCodeCapture::Code(int pid, int tid, uint64_t address, absl::Span<const uint8_t> bytes, uint64_t time) {
  if (bytes.empty()) return;
  Process& process = processes_[pid];
  const uint64_t end = address + bytes.size();
  auto same = process.pieces.find(address);
  if (same != process.pieces.end() && same->second.end == end &&
      std::memcmp(same->second.bytes.data(), bytes.data(), bytes.size()) == 0) {
    same->second.last_run = std::max(same->second.last_run, time);
    return;
  }
  // Pieces overlapping this one with other bytes are the old code: it last ran at
  // `old_run`, and this code replaces it from just after.
  // What is left of them outside this piece stays (with its last run): code written
  // over it later is a rewrite too.
  uint64_t old_run = 0;
  bool rewritten = false;
  std::vector<std::pair<uint64_t, Piece>> remainders;
  for (auto it = process.pieces.begin(); it != process.pieces.end() && it->first < end;) {
    const Piece& p = it->second;
    if (p.end <= address) {
      ++it;
      continue;
    }
    const uint64_t a = std::max(address, it->first), b = std::min(end, p.end);
    const bool differs = std::memcmp(p.bytes.data() + (a - it->first), bytes.data() + (a - address), b - a) != 0;
    if (!differs && it->first != address) {
      ++it;
      continue;
    }
    if (differs) {
      rewritten = true;
      old_run = std::max(old_run, p.last_run);
    }
    if (it->first < address) {
      Piece left{address, std::vector<uint8_t>(p.bytes.begin(), p.bytes.begin() + (address - it->first)), p.last_run};
      remainders.push_back({it->first, std::move(left)});
    }
    if (p.end > end) {
      Piece right{p.end, std::vector<uint8_t>(p.bytes.begin() + (end - it->first), p.bytes.end()), p.last_run};
      remainders.push_back({end, std::move(right)});
    }
    it = process.pieces.erase(it);
  }
  for (auto& remainder : remainders) process.pieces.insert(std::move(remainder));
  Piece piece;
  piece.end = end;
  piece.bytes.assign(bytes.begin(), bytes.end());
  piece.last_run = time;
  process.pieces[address] = std::move(piece);

  if (process.dump.empty()) image::AppendJitDumpHeader(static_cast<uint32_t>(pid), time, &process.dump);
  image::JitCodeEvent load;
  load.timestamp = rewritten ? std::min(time, old_run + 1) : time;
  load.pid = static_cast<uint32_t>(pid);
  load.tid = static_cast<uint32_t>(tid);
  load.code_addr = address;
  load.code_index = process.next_index++;
  image::AppendJitCodeLoad(load, bytes, &process.dump);
  ++stats_.pieces;
  stats_.bytes += bytes.size();
  if (rewritten) {
    ++stats_.generations;
    ++process.generations;
  }
}

void JitCodeCapture::Ran(int pid, uint64_t address, uint64_t time) {
  auto process = processes_.find(pid);
  if (process == processes_.end()) return;
  auto piece = process->second.pieces.find(address);
  if (piece != process->second.pieces.end()) piece->second.last_run = std::max(piece->second.last_run, time);
}

void JitCodeCapture::Exec(int pid) {
  auto process = processes_.find(pid);
  if (process != processes_.end()) process->second.pieces.clear();
}

absl::Status JitCodeCapture::Write(const TraceDirWriter& dir, std::vector<std::string>* notes) const {
  absl::Status status;
  for (const auto& [pid, process] : processes_) {
    if (process.dump.empty()) continue;
    const std::string rel = absl::StrCat(kImagesSubdir, "/jit-capture-", pid, ".dump");
    absl::Status st = WriteFileAtomic(dir.FilePath(rel), absl::MakeConstSpan(process.dump));
    if (!st.ok()) {
      notes->push_back(absl::StrCat("JIT code captured in pid ", pid, " not written: ", st.message()));
      status.Update(st);
      continue;
    }
    notes->push_back(absl::StrFormat(
        "captured JIT code of pid %d (code run from memory no file backs): %d pieces, %d rewritten in place, in %s",
        pid, process.next_index - 1, process.generations, rel));
  }
  return status;
}

}  // namespace ptd
