// TimedProcessImage: mapping changes take effect at their time, an address reused by a
// later mapping resolves to the file mapped there at each time, exec empties the image.
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "image/mapped_file.h"
#include "image/module_cache.h"
#include "image/process_image.h"
#include "image/section_cache.h"
#include "image/timed_image.h"
#include "sideband/mmap_timeline.h"
#include "tests/testing/test_util.h"

namespace ptd::image {
namespace {

using ptd::testing::kLibc;
constexpr char kLoader[] = "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2";
constexpr uint64_t kBase = 0x7f0000000000;

ptd::Mapping WholeFile(const std::string& path) {
  ptd::Mapping m;
  m.path = path;
  m.start = kBase;
  m.end = kBase + 0x20000;  // the first pages of both files (ELF header + code)
  m.pgoff = 0;
  return m;
}

// What an image holding only `path` at kBase says about `address`.
std::string NameWithOnly(SectionCache* sections, ModuleCache* modules, const std::string& path,
                         uint64_t address) {
  ProcessImage image(sections, modules, "reference");
  Mapping m = FromSidebandMapping(WholeFile(path));
  EXPECT_TRUE(image.AddMapping(m).ok());
  return std::string(image.Resolve(address).name);
}

std::vector<uint8_t> FileBytes(const std::string& path, uint64_t offset) {
  auto file = MappedFile::Open(path);
  EXPECT_TRUE(file.ok());
  auto bytes = (*file)->bytes().subspan(offset, 64);
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
}

TEST(TimedImageTest, AnAddressReusedLaterResolvesToTheFileMappedThereAtEachTime) {
  SectionCache sections;
  ModuleCache modules;
  MmapTimeline timeline;
  timeline.AddMapping(1, WholeFile(kLibc), 100);
  timeline.AddMapping(1, WholeFile(kLoader), 200);  // MAP_FIXED over the same range
  TimedProcessImage timed(&sections, &modules, "pid 1", timeline.Changes(1), {}, "");

  // An address both files cover, where they name different things.
  uint64_t address = 0;
  std::string libc_name, loader_name;
  for (uint64_t offset = 0x1000; offset < 0x20000; offset += 0x40) {
    libc_name = NameWithOnly(&sections, &modules, kLibc, kBase + offset);
    loader_name = NameWithOnly(&sections, &modules, kLoader, kBase + offset);
    if (libc_name != loader_name) {
      address = kBase + offset;
      break;
    }
  }
  ASSERT_NE(address, 0u) << "libc and ld.so name every probed address alike";

  timed.AdvanceTo(50);
  EXPECT_FALSE(timed.image()->Resolve(address).mapped) << "nothing is mapped before the first MMAP2";
  timed.AdvanceTo(150);
  EXPECT_EQ(timed.image()->Resolve(address).name, libc_name);
  uint8_t code_before[64], code_after[64];
  ASSERT_EQ(timed.image()->ReadCode(address, code_before, sizeof code_before), sizeof code_before);
  timed.AdvanceTo(250);
  EXPECT_EQ(timed.image()->Resolve(address).name, loader_name);
  ASSERT_EQ(timed.image()->ReadCode(address, code_after, sizeof code_after), sizeof code_after);
  EXPECT_EQ(std::memcmp(code_before, FileBytes(kLibc, address - kBase).data(), sizeof code_before), 0);
  EXPECT_EQ(std::memcmp(code_after, FileBytes(kLoader, address - kBase).data(), sizeof code_after), 0);
  // Another stream of the process starts earlier again: rebuilt from the beginning.
  timed.AdvanceTo(150);
  EXPECT_EQ(timed.image()->Resolve(address).name, libc_name);
}

// The image also says which exec started the program it holds (the call-stack model
// ends the old program's stacks there); a rebuild from the start knows of none yet.
TEST(TimedImageTest, ExecEmptiesTheImageAndUntimedTracesGetEverything) {
  SectionCache sections;
  ModuleCache modules;
  MmapTimeline timeline;
  timeline.AddMapping(1, WholeFile(kLibc), 100);
  timeline.Exec(1, 200, "echo");
  TimedProcessImage timed(&sections, &modules, "pid 1", timeline.Changes(1), {}, "");
  timed.AdvanceTo(150);
  EXPECT_TRUE(timed.image()->Resolve(kBase + 0x1000).mapped);
  EXPECT_EQ(timed.image()->program_start().exec_ns, 0u);
  timed.AdvanceTo(250);
  EXPECT_FALSE(timed.image()->Resolve(kBase + 0x1000).mapped);
  EXPECT_EQ(timed.image()->program_start().exec_ns, 200u);
  EXPECT_EQ(timed.image()->program_start().program, "echo");
  timed.AdvanceTo(150);  // another stream of the process starts earlier: rebuilt
  EXPECT_EQ(timed.image()->program_start().exec_ns, 0u);
  TimedProcessImage untimed(&sections, &modules, "pid 1", timeline.Changes(1), {}, "");
  untimed.ApplyAll();
  EXPECT_TRUE(untimed.image()->Resolve(kBase + 0x1000).mapped);
  EXPECT_EQ(untimed.image()->program_start().exec_ns, 0u);  // untimed: no exec is placed
}

}  // namespace
}  // namespace ptd::image
