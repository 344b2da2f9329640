#include "common/trace_meta.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/file_util.h"
#include "tests/testing/test_util.h"

namespace ptd {
namespace {

using ::testing::HasSubstr;

// Every field away from its default, so a field lost both ways shows in ExpectSameMeta.
TraceMeta FullMeta() {
  TraceMeta m;
  m.tool_version = "0.1.0";
  m.host.cpu = {"intel", 6, 85, 4};
  m.host.kernel_release = "6.1.0-test";
  m.host.hostname = "box";
  m.mode = TraceMode::kEmulated;
  m.emulated_ps_per_instruction = 20'500;
  m.native_ps_per_instruction = 310;
  m.pt.pmu_type = 8;
  m.pt.config = 0x300e601;
  m.pt.fields = {{"tsc", 1}, {"mtc_period", 3}, {"branch", 1}};
  m.pt.caps = {{"psb_cyc", "1"}, {"mtc_periods", "249"}};
  m.pt.timing = "normal";
  m.pt.user_only = false;
  m.pt.ip_filter = "filter main @ /bin/true";
  m.pt.cpuid_0x15_eax = 2;
  m.pt.cpuid_0x15_ebx = 168;
  m.pt.nom_freq = 24;
  m.pt.mtc_freq = 3;
  m.pt.tsc_art_ratio_num = 168;
  m.pt.tsc_art_ratio_den = 2;
  m.pt.psb_period_bytes = 4096;
  m.time = {31, 0x80000000u, 0xfffffffffff00000ull, true};
  m.command = {"/bin/echo", "hello world"};
  m.pids = {1234, 1240};
  m.per = "cpu";
  PtStream s;
  s.file = "aux/cpu0.pt";
  s.cpu = 0;
  s.tid = 77;
  s.chunks.push_back({0, 4096, 8192, 77, "sigusr2", true, false, true, true, false});
  s.chunks.push_back({4096, 100, 123456789012345ull, 99, "exit", false, true, false, true, true});
  m.streams.push_back(s);
  m.sideband.push_back({"sideband/cpu0.data", 0, -1, "kernel", 0x10086, true, 3});
  m.sideband.push_back({"sideband/synth.data", -1, 12, "synthesized", 0x10086, false, 0});
  m.images.push_back({"images/vdso.1234.so", "[vdso]", 0x7ffd12345000ull, 0, 8192, 1234,
                      ImageKind::kVdso, "abcdef"});
  m.images.push_back({"/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6",
                      0x7f0000028000ull, 0x28000, 0x155000, 1234, ImageKind::kFile, ""});
  // Kernel code: an address above INT64_MAX (a signed parse would clamp it).
  m.images.push_back({"images/dump-ffffffff81000000.bin", "kernel text", 0xffffffff81000000ull, 0, 0x1000, -1,
                      ImageKind::kMemoryDump, ""});
  m.build_ids = {{"/bin/echo", "0123456789abcdef0123456789abcdef01234567"}};
  m.archived = true;
  m.archive.push_back({"/tmp/prog", "3252f0971fcaaf7367adc79c23809a5027990696",
                       "images/by-build-id/32/52f0971fcaaf7367adc79c23809a5027990696", 15984});
  m.namespace_tids = {{31038, 1}, {31039, 2}};
  m.kernel.kallsyms = "kernel/kallsyms";
  m.kernel.build_id = "0011223344556677889900112233445566778899";
  m.kernel.modules.push_back({"ext4", 0xffffffffc0a00000ull, 0xb1000, "aabbccddeeff00112233445566778899aabbccdd"});
  m.end_reason = "exit";
  m.notes = {"target exited with status 0"};
  m.partial = true;
  m.partial_reason = "disk full";
  m.start_ns = 1000;
  m.end_ns = 0xfffffffffffffff0ull;
  m.trigger = TriggerPoint{"handle_request", 5'000'000, 2, 100, 101, 1'000, 7'000'000, 1'000};
  return m;
}

// `back` (parsed) against `original` member by member (the structs' defaulted ==), part
// by part for readable failures: a field dropped by both the writer and the reader fails
// here, where comparing two serializations would not.
void ExpectSameMeta(const TraceMeta& original, const TraceMeta& back) {
  EXPECT_TRUE(back.host == original.host);
  EXPECT_TRUE(back.pt == original.pt);
  EXPECT_TRUE(back.time == original.time);
  EXPECT_TRUE(back.streams == original.streams);
  EXPECT_TRUE(back.sideband == original.sideband);
  EXPECT_TRUE(back.images == original.images);
  EXPECT_EQ(back.build_ids, original.build_ids);
  EXPECT_TRUE(back.archive == original.archive);
  EXPECT_EQ(back.namespace_tids, original.namespace_tids);
  EXPECT_TRUE(back.kernel == original.kernel);
  EXPECT_EQ(back.notes, original.notes);
  EXPECT_TRUE(back == original) << "a top-level field differs:\n" << SerializeTraceMeta(back);
}

TEST(TraceMetaTest, RoundTripKeepsEveryField) {
  TraceMeta m = FullMeta();
  std::string text = SerializeTraceMeta(m);
  absl::StatusOr<TraceMeta> back = ParseTraceMeta(text);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSameMeta(m, *back);
  EXPECT_EQ(back->pt.config, 0x300e601u);
  EXPECT_EQ(back->time.time_zero, 0xfffffffffff00000ull);
  EXPECT_EQ(back->streams.at(0).chunks.at(1).aux_offset, 123456789012345ull);
  EXPECT_TRUE(back->streams.at(0).chunks.at(0).truncated);
  EXPECT_TRUE(back->streams.at(0).chunks.at(1).lost_before);
  EXPECT_EQ(back->images.at(0).kind, ImageKind::kVdso);
  EXPECT_EQ(back->images.at(0).vaddr, 0x7ffd12345000ull);
  EXPECT_EQ(back->images.at(2).vaddr, 0xffffffff81000000ull);
  EXPECT_EQ(back->mode, TraceMode::kEmulated);
  EXPECT_EQ(back->command.at(1), "hello world");
  EXPECT_EQ(back->pt.fields.at("mtc_period"), 3u);
  EXPECT_EQ(back->end_ns, 0xfffffffffffffff0ull);
  EXPECT_TRUE(back->archived);
  EXPECT_EQ(back->archive.at(0).size, 15984u);
  EXPECT_EQ(back->namespace_tids.at(31039), 2);
  ASSERT_TRUE(back->trigger.has_value());
  EXPECT_EQ(back->trigger->tid, 101);
  EXPECT_EQ(back->trigger->return_ns, 7'000'000u);
  EXPECT_EQ(back->emulated_ps_per_instruction, 20'500u);
  EXPECT_EQ(back->native_ps_per_instruction, 310u);
}

TEST(TraceMetaTest, NoTriggerMeansNoTriggerField) {
  TraceMeta m = FullMeta();
  m.trigger.reset();
  const std::string text = SerializeTraceMeta(m);
  EXPECT_EQ(text.find("\"trigger\""), std::string::npos);
  absl::StatusOr<TraceMeta> back = ParseTraceMeta(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(back->trigger.has_value());
}

TEST(TraceMetaTest, RoundTripThroughDirectory) {
  testing::TempDir tmp;
  TraceMeta m = FullMeta();
  ASSERT_TRUE(WriteTraceMeta(tmp.path(), m).ok());
  absl::StatusOr<TraceMeta> back = ReadTraceMeta(tmp.path());
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSameMeta(m, *back);
}

// FullMeta's meta.json with every `from` replaced by `to`.
std::string EditedMetaJson(const std::string& from, const std::string& to) {
  return absl::StrReplaceAll(SerializeTraceMeta(FullMeta()), {{from, to}});
}

TEST(TraceMetaTest, AcceptsNewerMinorVersionAndIgnoresUnknownFields) {
  std::string text = EditedMetaJson(absl::StrCat("\"minor\": ", kTraceFormatMinor),
                                    "\"minor\": 7, \"future_field\": [1,2]");
  absl::StatusOr<TraceMeta> back = ParseTraceMeta(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->format_minor, 7);
}

TEST(TraceMetaTest, RejectsCorruptJson) {
  std::string text = SerializeTraceMeta(FullMeta());
  absl::StatusOr<TraceMeta> back = ParseTraceMeta(text.substr(0, text.size() / 2), "x/meta.json");
  ASSERT_FALSE(back.ok());
  EXPECT_THAT(back.status().message(), HasSubstr("x/meta.json: not valid JSON"));
}

// A meta.json edited into something invalid, and what the error must say.
struct BadMetaCase {
  std::string name;
  std::string from;
  std::string to;
  std::vector<std::string> message_parts;
};

class BadMetaTest : public ::testing::TestWithParam<BadMetaCase> {};

TEST_P(BadMetaTest, IsRejectedWithAClearMessage) {
  const BadMetaCase& c = GetParam();
  absl::StatusOr<TraceMeta> back = ParseTraceMeta(EditedMetaJson(c.from, c.to), "dir/meta.json");
  ASSERT_FALSE(back.ok());
  for (const std::string& part : c.message_parts) EXPECT_THAT(back.status().message(), HasSubstr(part));
}

INSTANTIATE_TEST_SUITE_P(
    TraceMetaTest, BadMetaTest,
    ::testing::Values(
        BadMetaCase{"FutureMajorVersion", "\"major\": 1", "\"major\": 2",
                    {"dir/meta.json", absl::StrCat("version 2.", kTraceFormatMinor, " is not supported")}},
        BadMetaCase{"StringFieldHoldingANumber", "\"file\": \"aux/cpu0.pt\"", "\"file\": 17",
                    {"streams[0].file", "expected a string"}},
        BadMetaCase{"PathEscapingTheDirectory", "\"aux/cpu0.pt\"", "\"../../etc/passwd\"",
                    {"relative path inside the trace directory"}},
        BadMetaCase{"ArchiveFileOutsideTheDirectory", "\"images/by-build-id/32/", "\"../by-build-id/32/",
                    {"relative path inside the trace directory"}},
        BadMetaCase{"UnknownMode", "\"emulated\"", "\"quantum\"", {"field 'mode'"}}),
    [](const ::testing::TestParamInfo<BadMetaCase>& info) { return info.param.name; });

TEST(TraceMetaTest, MissingDirectoryIsNotFound) {
  absl::StatusOr<TraceMeta> back = ReadTraceMeta("/nonexistent/trace.dir");
  ASSERT_FALSE(back.ok());
  EXPECT_TRUE(absl::IsNotFound(back.status()));
  EXPECT_THAT(back.status().message(), HasSubstr("/nonexistent/trace.dir"));
}

TEST(TimeConversionTest, MatchesPerfFormula) {
  TimeConversion tc{10, 3000, 500, true};
  uint64_t tsc = 123456789;
  uint64_t quot = tsc >> 10, rem = tsc & 1023;
  EXPECT_EQ(tc.TscToNs(tsc), 500 + quot * 3000 + ((rem * 3000) >> 10));
  TimeConversion identity;
  EXPECT_EQ(identity.TscToNs(42), 42u);
}

}  // namespace
}  // namespace ptd
