#include "image/process_image.h"

#include <intel-pt.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "image/insn_classifier.h"

namespace ptd::image {

ProcessImage::ProcessImage(SectionCache* sections, ModuleCache* modules, std::string name)
    : sections_(sections), modules_(modules), name_(std::move(name)),
      image_(pt_image_alloc(name_.c_str())) {}

ProcessImage::~ProcessImage() { pt_image_free(image_); }

absl::Status ProcessImage::AddMapping(const Mapping& mapping) {
  absl::StatusOr<std::shared_ptr<const Module>> module = modules_->Get(mapping.path, mapping.name);
  if (!module.ok()) {
    warnings_.push_back(std::string(module.status().message()));
    return module.status();
  }
  uint64_t file_size = (*module)->file->bytes().size();
  if (mapping.file_offset >= file_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: mapping at 0x%x starts at file offset 0x%x, beyond the file's 0x%x bytes",
        mapping.path, mapping.vaddr, mapping.file_offset, file_size));
  }
  // A mapping may extend past the end of the file (bss, page rounding): only file bytes
  // hold code.
  uint64_t size = mapping.size == 0 ? file_size - mapping.file_offset
                                    : std::min(mapping.size, file_size - mapping.file_offset);
  if (size == 0) return absl::OkStatus();
  absl::StatusOr<int> isid = sections_->AddFile(mapping.path, mapping.file_offset, size, mapping.vaddr);
  if (!isid.ok()) return isid.status();
  int err = pt_image_add_cached(image_, sections_->get(), *isid, nullptr);
  if (err < 0) {
    return absl::InternalError(absl::StrFormat("%s: pt_image_add_cached: %s", mapping.path,
                                               pt_errstr(pt_errcode(err))));
  }
  const Module& m = **module;
  if (m.is_elf && !mapping.build_id.empty() && !m.elf.build_id.empty() &&
      mapping.build_id != m.elf.build_id) {
    warnings_.push_back(absl::StrFormat(
        "%s no longer matches the traced file (build-id %s, recorded %s): decoding may fail",
        mapping.path, m.elf.build_id, mapping.build_id));
  }

  Region region;
  region.start = mapping.vaddr;
  region.end = mapping.vaddr + size;
  region.file_offset = mapping.file_offset;
  region.module = *module;
  region.name = mapping.name.empty() ? mapping.path : mapping.name;
  region.memory_dump = mapping.memory_dump;
  if (m.is_elf) {
    // ELF addresses of the mapped bytes come from the PT_LOAD segment the mapping holds.
    if (const ElfSegment* seg = SegmentOfCodeMapping(m.elf, mapping.file_offset, size)) {
      region.bias = mapping.vaddr - (seg->vaddr - (seg->file_offset - mapping.file_offset));
      region.has_bias = true;
    }
  }

  // Newer mappings replace the parts of older ones they overlap.
  std::vector<Region> kept;
  kept.reserve(regions_.size() + 2);
  for (Region& old : regions_) {
    if (old.end <= region.start || old.start >= region.end) {
      kept.push_back(std::move(old));
      continue;
    }
    if (old.start < region.start) {
      Region left = old;
      left.end = region.start;
      kept.push_back(left);
    }
    if (old.end > region.end) {
      Region right = old;
      right.file_offset += region.end - old.start;
      right.start = region.end;
      kept.push_back(right);
    }
  }
  kept.push_back(std::move(region));
  if (!mapping.function.empty()) {
    // Named code replaces the names of what it overlaps, as its bytes replace theirs.
    const bool wider = mapping.function_end > mapping.function_start;
    const uint64_t start = wider ? mapping.function_start : mapping.vaddr;
    const uint64_t end = wider ? mapping.function_end : mapping.vaddr + size;
    auto it = jit_functions_.lower_bound(start);
    if (it != jit_functions_.begin() && std::prev(it)->second.end > start) --it;
    std::vector<std::pair<uint64_t, JitFunction>> pieces;
    while (it != jit_functions_.end() && it->first < end) {
      if (it->first < start) pieces.push_back({it->first, JitFunction{start, it->second.name}});
      if (it->second.end > end) pieces.push_back({end, JitFunction{it->second.end, it->second.name}});
      it = jit_functions_.erase(it);
    }
    for (auto& piece : pieces) jit_functions_.insert(piece);
    jit_functions_[start] = JitFunction{end, Intern(mapping.function)};
  }
  std::sort(kept.begin(), kept.end(), [](const Region& a, const Region& b) { return a.start < b.start; });
  regions_ = std::move(kept);
  ForgetResolved();
  has_ocaml_ = false;
  for (const Region& r : regions_) has_ocaml_ |= r.module->ocaml;
  return absl::OkStatus();
}

void ProcessImage::Clear() {
  pt_image_remove_by_asid(image_, nullptr);
  regions_.clear();
  jit_functions_.clear();
  ForgetResolved();
  has_ocaml_ = false;
  program_start_ = ProgramStart();
}

void ProcessImage::Exec(ProgramStart start) {
  Clear();
  program_start_ = std::move(start);
}

absl::Status ProcessImage::AddPerfMap(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    ++line_no;
    if (line.empty()) continue;
    std::vector<absl::string_view> parts = absl::StrSplit(line, absl::MaxSplits(' ', 2));
    uint64_t start = 0, size = 0;
    if (parts.size() != 3 || !absl::SimpleHexAtoi(parts[0], &start) ||
        !absl::SimpleHexAtoi(parts[1], &size)) {
      warnings_.push_back(absl::StrFormat("%s:%d: not a perf map line", path, line_no));
      continue;
    }
    jit_symbols_.Add(start, size, parts[2]);
  }
  jit_symbols_.Finish();
  ForgetResolved();
  return absl::OkStatus();
}

absl::Status ProcessImage::AddKallsyms(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  size_t named = 0;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    std::vector<absl::string_view> parts = absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    uint64_t start = 0;
    if (parts.size() < 3 || parts[1].size() != 1 || !absl::SimpleHexAtoi(parts[0], &start) || start == 0) continue;
    const char type = parts[1][0];
    if (type != 't' && type != 'T' && type != 'w' && type != 'W') continue;
    jit_symbols_.Add(start, 0, parts[2]);
    ++named;
  }
  jit_symbols_.Finish();
  ForgetResolved();
  if (named == 0) {
    warnings_.push_back(absl::StrFormat("%s: no kernel function with an address (kptr_restrict when recording?): "
                                        "kernel code is not named", path));
  }
  return absl::OkStatus();
}

const ProcessImage::Region* ProcessImage::FindRegion(uint64_t address) const {
  auto it = std::upper_bound(regions_.begin(), regions_.end(), address,
                             [](uint64_t a, const Region& r) { return a < r.start; });
  if (it == regions_.begin()) return nullptr;
  --it;
  return address < it->end ? &*it : nullptr;
}

const std::pair<const uint64_t, ProcessImage::JitFunction>* ProcessImage::FindJitFunction(uint64_t address) const {
  auto it = jit_functions_.upper_bound(address);
  if (it == jit_functions_.begin()) return nullptr;
  --it;
  return address < it->second.end ? &*it : nullptr;
}

absl::string_view ProcessImage::Intern(std::string name) {
  names_.push_back(std::move(name));
  return names_.back();
}

void ProcessImage::ForgetResolved() {
  resolved_.clear();
  source_runs_.clear();
  recent_runs_.Clear();
  recent_resolved_.Clear();
}

FunctionInfo ProcessImage::Resolve(uint64_t address) {
  if (const FunctionInfo* recent = recent_resolved_.Find(address)) return *recent;
  auto [it, inserted] = resolved_.try_emplace(address);
  if (inserted) it->second = ResolveUncached(address);
  return recent_resolved_.Put(address, it->second);
}

FunctionRange ProcessImage::RangeOf(uint64_t address) const {
  if (const auto* jit = FindJitFunction(address)) return FunctionRange{jit->first, jit->second.end, false, true, true};
  if (const Symbol* jit = jit_symbols_.Find(address)) return FunctionRange{jit->start, jit->end, false, true, true};
  const Region* region = FindRegion(address);
  if (region == nullptr) return FunctionRange{address, address + 1, false, false, false};
  FunctionRange range;
  range.mapped = true;
  if (region->has_bias) {
    const SymbolTable& table = region->module->symbols;
    uint64_t elf_address = address - region->bias;
    if (const Symbol* sym = table.Find(elf_address)) {
      range.start = std::max(sym->start + region->bias, region->start);
      range.end = std::min(sym->end + region->bias, region->end);
      range.plt = sym->plt;
      if (sym->parent_start != 0) range.parent_start = sym->parent_start + region->bias;
      range.symbol = true;
      range.inlines = region->module->inlines != nullptr &&
                      region->module->inlines->HasInlinedIn(sym->start, sym->end);
      return range;
    }
    // Between symbols: the gap is one unnamed function as far as we can tell.
    uint64_t gap_start = region->start, gap_end = region->end;
    const std::vector<Symbol>& all = table.symbols();
    auto next = std::upper_bound(all.begin(), all.end(), elf_address,
                                 [](uint64_t a, const Symbol& s) { return a < s.start; });
    if (next != all.end()) gap_end = std::min(gap_end, next->start + region->bias);
    if (next != all.begin()) gap_start = std::max(gap_start, std::prev(next)->end + region->bias);
    // A stripped file's unwind table still bounds each function it describes.
    const std::vector<FdeRange>& fdes = region->module->fde_ranges;
    auto next_fde = std::upper_bound(fdes.begin(), fdes.end(), elf_address,
                                     [](uint64_t a, const FdeRange& r) { return a < r.start; });
    if (next_fde != fdes.end()) gap_end = std::min(gap_end, next_fde->start + region->bias);
    if (next_fde != fdes.begin()) {
      const FdeRange& fde = *std::prev(next_fde);
      if (elf_address < fde.end) {
        gap_start = std::max(gap_start, fde.start + region->bias);
        gap_end = std::min(gap_end, fde.end + region->bias);
      } else {
        gap_start = std::max(gap_start, fde.end + region->bias);
      }
    }
    range.start = gap_start;
    range.end = std::max(gap_end, address + 1);
    return range;
  }
  range.start = region->start;
  range.end = region->end;
  // Contiguous regions of one memory dump form one unnamed range.
  for (const Region* r = region; r != &regions_.front() && (r - 1)->end == r->start &&
                                 (r - 1)->name == region->name;) {
    --r;
    range.start = r->start;
  }
  for (const Region* r = region; r + 1 != regions_.data() + regions_.size() &&
                                 (r + 1)->start == r->end && (r + 1)->name == region->name;) {
    ++r;
    range.end = r->end;
  }
  return range;
}

FunctionInfo ProcessImage::ResolveUncached(uint64_t address) {
  const FunctionRange range = RangeOf(address);
  FunctionInfo info{range, {}};
  if (const auto* named = FindJitFunction(address)) {
    info.name = named->second.name;
    return info;
  }
  if (const Symbol* jit = jit_symbols_.Find(address)) {
    info.name = jit_symbols_.name(*jit);
    return info;
  }
  const Region* region = FindRegion(address);
  if (region == nullptr) {
    info.name = Intern(absl::StrFormat("[unknown@0x%x]", address));
    return info;
  }
  if (range.symbol) {
    const Symbol* symbol = region->module->symbols.Find(address - region->bias);
    info.name = region->module->symbols.name(*symbol);
    if (region->module->inlines != nullptr) {
      info.source = region->module->inlines->InnermostAt(symbol->start);
      while (info.source != nullptr && info.source->parent != nullptr) info.source = info.source->parent;
    }
    return info;
  }
  absl::string_view base = Basename(region->name);
  uint64_t offset;
  if (region->memory_dump) {
    uint64_t lowest = region->start;
    for (const Region& r : regions_) {
      if (r.name == region->name) lowest = std::min(lowest, r.start);
    }
    offset = address - lowest;
  } else {
    offset = address - region->start + region->file_offset;
  }
  info.name = Intern(absl::StrFormat("%s+0x%x", std::string(base), offset));
  return info;
}

const SourceFrame* ProcessImage::SourceFrameAt(uint64_t address, uint64_t* end) const {
  const Region* region = FindRegion(address);
  if (region == nullptr || !region->has_bias || region->module->inlines == nullptr) {
    *end = region == nullptr ? address + 1 : region->end;
    return nullptr;
  }
  uint64_t elf_end = 0;
  const SourceFrame* frame = region->module->inlines->InnermostAt(address - region->bias, &elf_end);
  *end = elf_end == ~uint64_t{0} ? region->end : std::min(region->end, elf_end + region->bias);
  if (*end <= address) *end = address + 1;
  return frame;
}

bool ProcessImage::SourceFramesAlong(uint64_t start, uint64_t last, const std::vector<SourceFrameChange>** changes) {
  if (const RecentRun* recent = recent_runs_.Find(start); recent != nullptr && recent->last == last) {
    *changes = &recent->run->changes;
    return recent->run->ok;
  }
  auto [it, inserted] = source_runs_.try_emplace(std::make_pair(start, last));
  RunChanges& run = it->second;
  *changes = &run.changes;
  recent_runs_.Put(start, RecentRun{last, &run});
  if (!inserted) return run.ok;
  const SourceFrame* current = nullptr;
  uint64_t frame_end = 0;
  uint32_t index = 0;
  for (uint64_t ip = start; ip <= last; ++index) {
    if (ip == start || ip >= frame_end) {
      const SourceFrame* frame = SourceFrameAt(ip, &frame_end);
      if (ip == start || frame != current) run.changes.push_back(SourceFrameChange{index, frame});
      current = frame;
    }
    if (ip == last) {
      run.ok = true;
      break;
    }
    uint8_t bytes[15];
    const size_t n = ReadCode(ip, bytes, sizeof bytes);
    const InsnInfo insn = InsnClassifier::Decode(ip, absl::MakeConstSpan(bytes, n));
    if (insn.size == 0) break;
    ip += insn.size;
  }
  return run.ok;
}

size_t ProcessImage::ReadCode(uint64_t address, uint8_t* out, size_t size) const {
  size_t done = 0;
  while (done < size) {
    const Region* region = FindRegion(address + done);
    if (region == nullptr) break;
    absl::Span<const uint8_t> bytes = region->module->file->bytes();
    uint64_t offset = region->file_offset + (address + done - region->start);
    uint64_t available = std::min<uint64_t>(region->end - (address + done),
                                            offset < bytes.size() ? bytes.size() - offset : 0);
    if (available == 0) break;
    size_t n = static_cast<size_t>(std::min<uint64_t>(available, size - done));
    std::memcpy(out + done, bytes.data() + offset, n);
    done += n;
  }
  return done;
}

bool ProcessImage::SectionBytesAt(uint64_t address, SectionBytes* out) const {
  const Region* region = FindRegion(address);
  if (region == nullptr) return false;
  out->start = region->start;
  out->end = region->end;
  out->module = &region->module;
  out->file_offset = region->file_offset;
  out->name = region->name;
  return true;
}

}  // namespace ptd::image
