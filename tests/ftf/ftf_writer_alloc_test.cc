// The writer's hot path allocates nothing: once an event's names and thread have been
// seen, writing more such events (with args, across buffer flushes) makes no heap
// allocation. Own executable, because it replaces the global operator new.
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ftf/ftf_writer.h"
#include "gtest/gtest.h"

namespace {
size_t g_allocations = 0;
}  // namespace

void* operator new(size_t size) {
  ++g_allocations;
  if (void* p = std::malloc(size ? size : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace ptd::ftf {
namespace {

// Discards bytes without allocating.
class NullSink : public ByteSink {
 public:
  absl::Status Write(absl::Span<const uint8_t> bytes) override {
    written_ += bytes.size();
    return absl::OkStatus();
  }
  absl::Status Close() override { return absl::OkStatus(); }
  size_t written_ = 0;
};

TEST(FtfWriterAllocTest, KnownNamesAndThreadsAllocateNothing) {
  auto sink = std::make_unique<NullSink>();
  NullSink* raw = sink.get();
  auto writer = FtfWriter::ToSink(std::move(sink), "null.ftf");
  std::vector<std::string> names;
  for (int i = 0; i < 100; ++i) names.push_back(absl::StrCat("function_", i));
  // Warm-up: every name and thread defined once.
  for (int i = 0; i < 100; ++i) {
    const Arg arg = Arg::String("kind", "call");
    writer->DurationBegin(1, 2 + i % 8, i, "fn", names[i], absl::MakeConstSpan(&arg, 1));
    const Arg count = Arg::Uint64("instructions", i);
    writer->DurationEnd(1, 2 + i % 8, i, "fn", names[i], absl::MakeConstSpan(&count, 1));
  }
  const size_t before = g_allocations;
  for (int i = 0; i < 200'000; ++i) {
    const Arg arg = Arg::String("kind", "call");
    writer->DurationBegin(1, 2 + i % 8, i, "fn", names[i % 100], absl::MakeConstSpan(&arg, 1));
    const Arg count = Arg::Uint64("instructions", i);
    writer->DurationEnd(1, 2 + i % 8, i, "fn", names[i % 100], absl::MakeConstSpan(&count, 1));
  }
  const size_t during = g_allocations - before;
  ASSERT_TRUE(writer->Close().ok());
  EXPECT_EQ(during, 0u);
  EXPECT_GT(raw->written_, size_t{4} << 20);  // several buffer flushes happened
}

}  // namespace
}  // namespace ptd::ftf
