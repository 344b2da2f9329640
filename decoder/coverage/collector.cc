#include "decoder/coverage/collector.h"

#include <algorithm>
#include <utility>

#include "common/recent_by_address.h"
#include "decoder/flow/fast_block_cache.h"
#include "image/insn_classifier.h"
#include "image/process_image.h"

namespace ptd::decoder {
namespace {

// A piece of straight-line code: [start, end), `instructions` of them.
struct Piece {
  uint64_t start = 0;
  uint64_t end = 0;
  uint32_t instructions = 0;
};

// Conditional branches inside a run whose direction must be guessed (the run does not
// say): more than this many and the run is left unresolved rather than searched long.
constexpr int kMaxGuessedBranches = 12;
constexpr uint64_t kMaxBlockBytes = 0xffff;  // drcov's u16 size

// Walks `left` instructions from `ip` to end at `end_ip`, following direct jumps and
// calls (libipt's runs continue through them) and trying both directions of a
// conditional branch; appends the pieces passed through. False: no path fits.
// A piece is what the fast decoder's block cache holds as one run
// (FastBlockCache::Entry), so the runs it counts and the runs walked here are the same
// blocks: it starts where execution entered it and ends at its first branch of any
// kind, at the end of its mapping, or after FastBlockCache::kMaxRunInstructions.
bool Walk(const image::ProcessImage& image, uint64_t ip, uint64_t end_ip, uint32_t left, int guesses,
          std::vector<Piece>* pieces) {
  Piece piece{ip, ip, 0};
  uint64_t at = ip;
  uint64_t section_end = 0;
  while (left > 0) {
    // A block lies in one mapping and fits drcov's entry: cut at the mapping's end or
    // before the size would not fit.
    if (piece.instructions == 0 || at >= section_end || at + 15 - piece.start > kMaxBlockBytes) {
      if (piece.instructions > 0) pieces->push_back(piece);
      piece = Piece{at, at, 0};
      uint64_t section_start = 0;
      if (!image.SectionBounds(at, &section_start, &section_end)) return false;
    }
    uint8_t bytes[16] = {};
    const size_t n = image.ReadCode(at, bytes, 15);
    if (n == 0) return false;
    const image::InsnInfo info = image::InsnClassifier::Decode(at, absl::MakeConstSpan(bytes, n));
    if (info.size == 0) return false;
    --left;
    const uint64_t next = at + info.size;
    piece.end = next;
    ++piece.instructions;
    if (left == 0) {
      if (at != end_ip) return false;
      pieces->push_back(piece);
      return true;
    }
    const bool branch = info.kind != image::BranchKind::kNone && info.kind != image::BranchKind::kUnknown;
    if (!branch && piece.instructions < FastBlockCache::kMaxRunInstructions) {
      at = next;
      continue;
    }
    pieces->push_back(piece);
    piece = Piece{};
    if (info.kind == image::BranchKind::kDirectJump || info.kind == image::BranchKind::kDirectCall) {
      at = info.direct_target;
      continue;
    }
    if (info.kind == image::BranchKind::kCondJump && info.direct_target != next) {
      if (guesses >= kMaxGuessedBranches) return false;
      // Not taken first (the common case in a run), then taken.
      const size_t mark = pieces->size();
      if (Walk(image, next, end_ip, left, guesses + 1, pieces)) return true;
      pieces->resize(mark);
      return Walk(image, info.direct_target, end_ip, left, guesses + 1, pieces);
    }
    at = next;
  }
  return false;
}

}  // namespace

// A piece's counts, for the parallel decode to add once it uses the piece.
class CoverageCollector::PieceBlocks : public PieceRuns {
 public:
  PieceBlocks(CoverageCollector* collector, Tally tally) : collector_(collector), tally_(std::move(tally)) {}
  void Use() override { collector_->Add(tally_); }

 private:
  CoverageCollector* collector_;
  Tally tally_;
};

// One decoder's observer: with one decoder per stream (ForStream) it counts into the
// collector; a parallel worker's (ForPieces) counts each piece apart.
class CoverageCollector::StreamObserver : public PieceRunObserver {
 public:
  StreamObserver(CoverageCollector* collector, ImageClock* clock, image::ProcessImage* image, bool pieces)
      : collector_(collector), clock_(clock), image_(image), pieces_(pieces) {}

  void OnBlock(uint64_t ip, uint64_t end_ip, uint32_t count) override { OnBlocks(ip, end_ip, count, 1); }
  bool counts_runs() const override { return collector_->counted_runs_; }

  void OnBlocks(uint64_t ip, uint64_t end_ip, uint32_t count, uint64_t times) override {
    image::ProcessImage* image = clock_ != nullptr ? clock_->image() : image_;
    const uint64_t version = clock_ != nullptr ? clock_->version() : 0;
    if (image != last_image_ || version != last_version_) {
      // Other code may be at the same addresses now (exec, dlopen, another process).
      runs_.clear();
      run_blocks_.clear();
      recent_.Clear();
      last_image_ = image;
      last_version_ = version;
    }
    if (image == nullptr) return;
    uint32_t run = 0;
    const RecentRun* recent = recent_.Find(ip);
    if (recent != nullptr && recent->end_ip == end_ip && recent->count == count) {
      run = recent->run;
    } else {
      auto [it, inserted] = runs_.try_emplace(std::make_tuple(ip, end_ip, count), run_blocks_.size());
      if (inserted) run_blocks_.push_back(collector_->Resolve(*image, ip, end_ip, count));
      run = it->second;
      recent_.Put(ip, RecentRun{end_ip, count, run});
    }
    const std::vector<uint32_t>& blocks = run_blocks_[run];
    if (!pieces_) {
      // The only decoder running: no other thread touches the counts.
      if (blocks.empty()) collector_->unresolved_runs_ += times;
      for (uint32_t block : blocks) collector_->blocks_[block].hits += times;
      return;
    }
    Tally& tally = marked_ ? since_mark_ : piece_;
    if (blocks.empty()) tally.unresolved_runs += times;
    for (uint32_t block : blocks) tally.hits[block] += times;
  }

  void BeginPiece() override { ForgetRuns(); }
  void ForgetRuns() override {
    piece_ = Tally();
    since_mark_ = Tally();
    marked_ = false;
  }
  void MarkRuns() override {
    piece_.Add(since_mark_);
    since_mark_ = Tally();
    marked_ = true;
  }
  void ForgetRunsSinceMark() override { since_mark_ = Tally(); }
  std::unique_ptr<PieceRuns> EndPiece() override {
    piece_.Add(since_mark_);
    auto blocks = std::make_unique<PieceBlocks>(collector_, std::move(piece_));
    ForgetRuns();
    return blocks;
  }

 private:
  CoverageCollector* collector_;
  ImageClock* clock_;
  image::ProcessImage* image_;
  const bool pieces_;
  image::ProcessImage* last_image_ = nullptr;
  uint64_t last_version_ = 0;
  // Each distinct run (ip, end_ip, count) once: its blocks, with the last runs looked
  // up by address in front (a hot loop's runs come back again and again).
  struct RecentRun {
    uint64_t end_ip = 0;
    uint32_t count = 0;
    uint32_t run = 0;
  };
  absl::flat_hash_map<std::tuple<uint64_t, uint64_t, uint32_t>, uint32_t> runs_;
  std::vector<std::vector<uint32_t>> run_blocks_;
  RecentByAddress<RecentRun, 1024> recent_;
  // Piece mode: the piece's counts, and those since the mark (past its stop, maybe).
  Tally piece_;
  Tally since_mark_;
  bool marked_ = false;
};

CoverageCollector::CoverageCollector(bool counted_runs) : counted_runs_(counted_runs) {}
CoverageCollector::~CoverageCollector() = default;

std::unique_ptr<BlockObserver> CoverageCollector::ForStream(ImageClock* clock, image::ProcessImage* image) {
  return std::make_unique<StreamObserver>(this, clock, image, false);
}

std::unique_ptr<PieceRunObserver> CoverageCollector::ForPieces(ImageClock* clock) {
  return std::make_unique<StreamObserver>(this, clock, nullptr, true);
}

void CoverageCollector::Tally::Add(const Tally& other) {
  for (const auto& [block, hits] : other.hits) this->hits[block] += hits;
  unresolved_runs += other.unresolved_runs;
}

void CoverageCollector::Add(const Tally& tally) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [block, hits] : tally.hits) blocks_[block].hits += hits;
  unresolved_runs_ += tally.unresolved_runs;
}

std::vector<uint32_t> CoverageCollector::Resolve(image::ProcessImage& image, uint64_t ip, uint64_t end_ip,
                                                 uint32_t count) {
  std::vector<Piece> pieces;
  std::vector<uint32_t> blocks;
  if (count == 0 || !Walk(image, ip, end_ip, count, 0, &pieces)) return blocks;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Piece& p : pieces) blocks.push_back(BlockOf(image, p.start, p.end, p.instructions));
  return blocks;
}

uint32_t CoverageCollector::ModuleOf(const image::ProcessImage::SectionBytes& section) {
  const uint64_t base = section.start - section.file_offset;
  const std::string name(section.name);
  auto [module_it, new_module] = module_index_.try_emplace(std::make_tuple(name, base), 0);
  if (new_module) {
    // In order of base, then name: the order does not depend on which decoder met the
    // module first. The blocks and indices after it move up one.
    const auto at = std::find_if(modules_.begin(), modules_.end(), [&](const CoverageModule& m) {
      return std::tie(base, name) < std::tie(m.base, m.name);
    });
    const uint32_t index = static_cast<uint32_t>(at - modules_.begin());
    for (auto& [key, i] : module_index_) i += i >= index ? 1 : 0;
    for (CoveredBlock& b : blocks_) b.module += b.module >= index ? 1 : 0;
    module_it->second = index;
    CoverageModule module;
    module.name = name;
    module.file = section.module != nullptr && *section.module != nullptr ? (*section.module)->path : name;
    module.base = base;
    if (section.module != nullptr) module.module = *section.module;
    modules_.insert(modules_.begin() + index, std::move(module));
  }
  CoverageModule& module = modules_[module_it->second];
  module.end = std::max(module.end, section.end);
  return module_it->second;
}

uint32_t CoverageCollector::BlockOf(image::ProcessImage& image, uint64_t start, uint64_t end, uint32_t instructions) {
  image::ProcessImage::SectionBytes section;
  image.SectionBytesAt(start, &section);
  const uint32_t module = ModuleOf(section);
  const uint64_t offset = start - modules_[module].base;
  const uint32_t size = static_cast<uint32_t>(end - start);
  // Blocks are keyed by their module's name and base: its index may move.
  auto [block_it, new_block] = block_index_.try_emplace(
      std::make_tuple(modules_[module].name, modules_[module].base, offset, size), blocks_.size());
  if (new_block) {
    const std::string function(image.Resolve(start).name);
    auto [function_it, new_function] = function_index_.try_emplace(function, functions_.size());
    if (new_function) functions_.push_back(function);
    blocks_.push_back(CoveredBlock{module, offset, size, instructions, function_it->second, 0});
  }
  return block_it->second;
}

std::vector<CoveredBlock> CoverageCollector::Blocks() const {
  std::vector<CoveredBlock> sorted = blocks_;
  std::sort(sorted.begin(), sorted.end(), [](const CoveredBlock& a, const CoveredBlock& b) {
    return std::tie(a.module, a.offset, a.size) < std::tie(b.module, b.offset, b.size);
  });
  return sorted;
}

}  // namespace ptd::decoder
