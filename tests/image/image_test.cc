// image/: demangling, symbol lookup, ELF symbols of real binaries on this machine,
// maps specifications and page-dump coalescing in `import raw`.
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/trace_dir.h"
#include "common/trace_meta.h"
#include "gtest/gtest.h"
#include "image/demangle.h"
#include "image/elf_reader.h"
#include "image/maps_spec.h"
#include "image/mapped_file.h"
#include "image/padded_chunk.h"
#include "image/module_cache.h"
#include "image/process_image.h"
#include "image/raw_import.h"
#include "image/section_cache.h"
#include "image/symbol_table.h"
#include "tests/testing/test_util.h"

namespace ptd::image {
namespace {

TEST(DemangleTest, CppAndOcamlNamesBecomeReadable) {
  EXPECT_EQ(Demangle("_ZN3foo3barEi"), "foo::bar(int)");
  EXPECT_EQ(Demangle("camlStdlib__List__map_277"), "Stdlib.List.map");
  EXPECT_EQ(Demangle("camlFoo__entry"), "Foo.entry");
  EXPECT_EQ(Demangle("caml_raise_exn"), "caml_raise_exn");
  EXPECT_EQ(Demangle("main"), "main");
  EXPECT_EQ(Demangle("_Znot_really"), "_Znot_really");
}

TEST(DemangleTest, RustNamesLoseTheirHashesAndKeepTheirGenericsAndClosures) {
  // Symbols rustc 1.63 made for `impl<T> Point<T> { fn sum }`, `apply::<closure>` and the
  // closure in main, in the legacy and the v0 schemes.
  EXPECT_EQ(Demangle("_ZN1r14Point$LT$T$GT$3sum17h486e34aeabca43f3E"), "r::Point<T>::sum");
  EXPECT_EQ(Demangle("_ZN4core3ptr85drop_in_place$LT$std..rt..lang_start$LT$$LP$$RP$$GT$..$u7b$$u7b$"
                     "closure$u7d$$u7d$$GT$17h2f4cc4e9b2e2c9a1E"),
            "core::ptr::drop_in_place<std::rt::lang_start<()>::{{closure}}>");
  EXPECT_EQ(Demangle("_RNvMCsi7GFBnvyxwE_1rINtB2_5PointyE3sumB2_"), "<r::Point<u64>>::sum");
  EXPECT_EQ(Demangle("_RINvCsi7GFBnvyxwE_1r5applyNCNvB2_4main0EB2_"), "r::apply::<r::main::{closure#0}>");
  EXPECT_EQ(Demangle("_RNCNvCsi7GFBnvyxwE_1r4main0B3_"), "r::main::{closure#0}");
}

TEST(DemangleTest, DNamesBecomeReadable) { EXPECT_EQ(Demangle("_D3foo3barFiZv"), "foo.bar(int)"); }

TEST(DemangleTest, Ocaml5NamesUseDotsAndEscapes) {
  EXPECT_EQ(Demangle("camlStdlib.List.map_277"), "Stdlib.List.map");
  EXPECT_EQ(Demangle("camlProg_ocaml.search_270"), "Prog_ocaml.search");
  EXPECT_EQ(Demangle("camlStdlib.$2b$2b_312"), "Stdlib.++");
}

TEST(DemangleTest, DecorationsAfterTheNameAreKept) {
  EXPECT_EQ(Demangle("_ZN3foo3barEi@plt"), "foo::bar(int)@plt");
  EXPECT_EQ(Demangle("memcpy@plt"), "memcpy@plt");
}

TEST(SymbolTableTest, AGlobalNameWinsOverItsLocalAliasWhicheverCameFirst) {
  for (bool global_first : {true, false}) {
    SymbolTable table;
    if (global_first) table.Add(0x1000, 0x33, "fib");
    table.Add(0x1000, 0x33, "fib.localalias", /*plt=*/false, /*local=*/true);
    if (!global_first) table.Add(0x1000, 0x33, "fib");
    table.Finish();
    ASSERT_NE(table.Find(0x1010), nullptr);
    EXPECT_EQ(table.name(*table.Find(0x1010)), "fib");
  }
}

TEST(SymbolTableTest, PartsSplitOffAFunctionKnowItsStart) {
  SymbolTable table;
  table.Add(0x1000, 0x40, "main");
  table.Add(0x2000, 0x10, "main.cold", /*plt=*/false, /*local=*/true);
  table.Add(0x1100, 0x40, "_Z9may_throwi");
  table.Add(0x2100, 0x10, "_Z9may_throwi.cold.2", /*plt=*/false, /*local=*/true);
  table.Add(0x2200, 0x10, "cold");         // a function named so, no part
  table.Add(0x2300, 0x10, "orphan.cold");  // its function is not in this table
  table.Finish();
  EXPECT_EQ(table.Find(0x2000)->parent_start, 0x1000u);
  EXPECT_EQ(table.name(*table.Find(0x2100)), "may_throw(int) [clone .cold.2]");
  EXPECT_EQ(table.Find(0x2100)->parent_start, 0x1100u);
  EXPECT_EQ(table.Find(0x1000)->parent_start, 0u);
  EXPECT_EQ(table.Find(0x2200)->parent_start, 0u);
  EXPECT_EQ(table.Find(0x2300)->parent_start, 0u);
}

TEST(SymbolTableTest, FindsTheSymbolContainingAnAddress) {
  SymbolTable table;
  table.Add(0x2000, 0x10, "b");
  table.Add(0x1000, 0x100, "a");
  table.Add(0x3000, 0, "unsized");
  table.Add(0x3100, 0x10, "after");
  table.Add(0x1080, 0, "label_inside_a");  // covered by a: never takes a's tail
  table.Finish();
  ASSERT_NE(table.Find(0x1050), nullptr);
  EXPECT_EQ(table.name(*table.Find(0x1050)), "a");
  EXPECT_EQ(table.name(*table.Find(0x1090)), "a");
  EXPECT_EQ(table.Find(0x1100), nullptr);
  EXPECT_EQ(table.name(*table.Find(0x200f)), "b");
  EXPECT_EQ(table.Find(0x2010), nullptr);
  EXPECT_EQ(table.name(*table.Find(0x30ff)), "unsized");  // up to the next symbol
  EXPECT_EQ(table.name(*table.Find(0x3100)), "after");
  EXPECT_EQ(table.Find(0xfff), nullptr);
}

// libc is on every machine this builds on: its PLT, dynamic symbols and build-id.
TEST(ElfReaderTest, ReadsLibcSymbolsAndBuildId) {
  const std::string libc = ptd::testing::kLibc;
  if (!PathExists(libc)) GTEST_SKIP() << "no " << libc;
  auto file = MappedFile::Open(libc);
  ASSERT_TRUE(file.ok());
  auto info = ReadElfInfo((*file)->bytes(), libc);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->build_id.size(), 40u);
  EXPECT_FALSE(info->segments.empty());
  SymbolTable table;
  ASSERT_TRUE(ReadElfSymbols((*file)->bytes(), libc, &table).ok());
  table.Finish();
  bool found_printf = false, found_plt = false;
  for (const Symbol& s : table.symbols()) {
    if (table.name(s) == "printf") found_printf = true;
    if (s.plt && table.name(s).size() > 4 && table.name(s).substr(table.name(s).size() - 4) == "@plt") found_plt = true;
  }
  EXPECT_TRUE(found_printf);
  EXPECT_TRUE(found_plt);
}

TEST(ElfReaderTest, ACodeMappingTakesTheExecutableSegmentWhoseBytesItHolds) {
  // lld and mold: the text shares its first page with the read-only segment before it,
  // and the loader maps both from file offset 0.
  ElfInfo packed;
  packed.segments = {{0x0, 0x0, 0x68f, false}, {0x1690, 0x690, 0x2c6, true}, {0x2958, 0x958, 0x220, false}};
  ASSERT_NE(SegmentOfCodeMapping(packed, 0, 0x1000), nullptr);
  EXPECT_EQ(SegmentOfCodeMapping(packed, 0, 0x1000)->vaddr, 0x1690u);
  // bfd: the text on pages of its own.
  ElfInfo separate;
  separate.segments = {{0x0, 0x0, 0x600, false}, {0x1000, 0x1000, 0x1a5, true}, {0x2000, 0x2000, 0x100, false}};
  ASSERT_NE(SegmentOfCodeMapping(separate, 0x1000, 0x1000), nullptr);
  EXPECT_EQ(SegmentOfCodeMapping(separate, 0x1000, 0x1000)->vaddr, 0x1000u);
  // gold: one segment holds the headers and the text.
  ElfInfo gold;
  gold.segments = {{0x0, 0x0, 0xa48, true}, {0x1dc0, 0xdc0, 0x270, false}};
  ASSERT_NE(SegmentOfCodeMapping(gold, 0, 0x1000), nullptr);
  EXPECT_EQ(SegmentOfCodeMapping(gold, 0, 0x1000)->vaddr, 0x0u);
  // No executable bytes: the segment of the first byte.
  ASSERT_NE(SegmentOfCodeMapping(separate, 0x2000, 0x1000), nullptr);
  EXPECT_EQ(SegmentOfCodeMapping(separate, 0x2000, 0x1000)->vaddr, 0x2000u);
}

TEST(ProcessImageTest, ResolvesSymbolsAtTheMappedAddressAndReadsCode) {
  const std::string libc = ptd::testing::kLibc;
  if (!PathExists(libc)) GTEST_SKIP() << "no " << libc;
  SectionCache sections;
  ModuleCache modules;
  auto module = modules.Get(libc);
  ASSERT_TRUE(module.ok());
  const ElfSegment* text = nullptr;
  for (const ElfSegment& s : (*module)->elf.segments) {
    if (s.executable) text = &s;
  }
  ASSERT_NE(text, nullptr);
  const uint64_t base = 0x7f0000000000;
  ProcessImage image(&sections, &modules, "test");
  Mapping m;
  m.path = libc;
  m.vaddr = base + text->vaddr;
  m.file_offset = text->file_offset;
  m.size = text->file_size;
  ASSERT_TRUE(image.AddMapping(m).ok());
  const Symbol* printf_sym = nullptr;
  for (const Symbol& s : (*module)->symbols.symbols()) {
    if ((*module)->symbols.name(s) == "printf") printf_sym = &s;
  }
  ASSERT_NE(printf_sym, nullptr);
  FunctionInfo fn = image.Resolve(base + printf_sym->start + 4);
  EXPECT_EQ(fn.name, "printf");
  EXPECT_EQ(fn.start, base + printf_sym->start);
  uint8_t code[4];
  ASSERT_EQ(image.ReadCode(base + printf_sym->start, code, 4), 4u);
  const uint8_t* expect = (*module)->file->bytes().data() + printf_sym->start - text->vaddr + text->file_offset;
  EXPECT_EQ(std::memcmp(code, expect, 4), 0);
  FunctionInfo outside = image.Resolve(0x1000);
  EXPECT_FALSE(outside.mapped);
}

TEST(MapsSpecTest, ParsesFilesPagesAndOptions) {
  auto specs = ParseMapsText("# comment\nlib.so 0x400000\n/abs/x 4096 0x10 0x20  # tail\n\npages a.addr a.dump\n",
                             "maps.txt", "/base");
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 3u);
  EXPECT_EQ((*specs)[0].path, "/base/lib.so");
  EXPECT_EQ((*specs)[0].vaddr, 0x400000u);
  EXPECT_EQ((*specs)[1].path, "/abs/x");
  EXPECT_EQ((*specs)[1].vaddr, 4096u);
  EXPECT_EQ((*specs)[1].file_offset, 0x10u);
  EXPECT_EQ((*specs)[1].size, 0x20u);
  EXPECT_EQ((*specs)[2].kind, MapSpec::Kind::kPages);
  EXPECT_EQ((*specs)[2].address_file, "/base/a.addr");
  auto bad = ParseMapsText("x 0xzz\n", "maps.txt", "");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("maps.txt:1"), std::string::npos);
  auto opt = ParseMapOption("/a/b@0x1000:0x20:0x30");
  ASSERT_TRUE(opt.ok());
  EXPECT_EQ(opt->vaddr, 0x1000u);
  EXPECT_EQ(opt->size, 0x30u);
  EXPECT_FALSE(ParseMapOption("nope").ok());
  EXPECT_FALSE(ParseMapOption("/a@1:2").ok());
}

TEST(RawImportTest, CoalescesContiguousPagesIntoOneDump) {
  ptd::testing::TempDir tmp;
  // Five pages: three contiguous at 0x10000 (given out of order), two at 0x50000.
  const uint64_t addrs[] = {0x11000, 0x10000, 0x50000, 0x12000, 0x51000};
  std::string addr_bytes(reinterpret_cast<const char*>(addrs), sizeof addrs);
  std::string dump;
  for (int i = 0; i < 5; ++i) dump += std::string(4096, static_cast<char>('a' + i));
  ASSERT_TRUE(WriteFileAtomic(tmp.Sub("d.addr"), addr_bytes).ok());
  ASSERT_TRUE(WriteFileAtomic(tmp.Sub("d.dump"), dump).ok());
  ASSERT_TRUE(WriteFileAtomic(tmp.Sub("pt.bin"), std::string(64, '\0')).ok());
  RawImportOptions options;
  options.pt_path = tmp.Sub("pt.bin");
  options.output_dir = tmp.Sub("trace");
  MapSpec pages;
  pages.kind = MapSpec::Kind::kPages;
  pages.address_file = tmp.Sub("d.addr");
  pages.path = tmp.Sub("d.dump");
  options.maps.push_back(pages);
  auto result = ImportRaw(options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->pieces, 5u);
  EXPECT_EQ(result->dump_files, 2u);
  EXPECT_FALSE(result->warnings.empty());  // no --cpu
  auto meta = ReadTraceMeta(tmp.Sub("trace"));
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->mode, TraceMode::kImported);
  ASSERT_EQ(meta->images.size(), 2u);
  EXPECT_EQ(meta->images[0].vaddr, 0x10000u);
  EXPECT_EQ(meta->images[0].size, 3u * 4096);
  auto first = ReadFileToString(ResolveTracePath(tmp.Sub("trace"), meta->images[0].path));
  ASSERT_TRUE(first.ok());
  // In address order: page 'b' (0x10000), 'a' (0x11000), 'd' (0x12000).
  EXPECT_EQ((*first)[0], 'b');
  EXPECT_EQ((*first)[4096], 'a');
  EXPECT_EQ((*first)[8192], 'd');
  EXPECT_EQ(meta->images[1].vaddr, 0x50000u);
  ASSERT_EQ(meta->streams.size(), 1u);
  EXPECT_EQ(meta->streams[0].chunks[0].size, 64u);
}

TEST(RawImportTest, CpuTripleParses) {
  auto cpu = ParseCpuTriple("6/85/4");
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(cpu->vendor, "intel");
  EXPECT_EQ(cpu->model, 85u);
  EXPECT_FALSE(ParseCpuTriple("6/85").ok());
  EXPECT_FALSE(ParseCpuTriple("6/x/4").ok());
}

// A chunk anywhere in a file (inside one page, across pages, ending on a page boundary,
// at the end of a file whose size is a whole number of pages): the same bytes as the
// file, then zeros, not the file's next bytes.
TEST(PaddedChunkTest, ChunkBytesThenZerosWhereverTheChunkLies) {
  ptd::testing::TempDir tmp;
  const size_t page = 4096;
  std::string content(5 * page, '\0');
  for (size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>(0x80 | (i * 7 % 127));
  const std::string path = tmp.Sub("aux.pt");
  ASSERT_TRUE(WriteFileAtomic(path, content).ok());
  struct Case {
    uint64_t offset;
    size_t size;
  };
  for (Case c : {Case{10, 100}, Case{100, 3 * page}, Case{page - 1, 2}, Case{page, page}, Case{0, 5 * page},
                 Case{3 * page + 5, 2 * page - 5}, Case{7, 0}}) {
    SCOPED_TRACE(absl::StrCat("offset ", c.offset, " size ", c.size));
    absl::StatusOr<std::unique_ptr<PaddedChunk>> chunk = PaddedChunk::Map(path, c.offset, c.size, 64);
    ASSERT_TRUE(chunk.ok()) << chunk.status();
    ASSERT_EQ((*chunk)->size(), c.size);
    EXPECT_EQ(std::memcmp((*chunk)->data(), content.data() + c.offset, c.size), 0);
    for (size_t i = 0; i < 64; ++i) ASSERT_EQ((*chunk)->data()[c.size + i], 0) << "padding byte " << i;
  }
}

TEST(PaddedChunkTest, ChunkPastTheEndOfTheFileOrAMissingFileIsAnError) {
  ptd::testing::TempDir tmp;
  const std::string path = tmp.Sub("short.pt");
  ASSERT_TRUE(WriteFileAtomic(path, std::string(100, 'x')).ok());
  absl::StatusOr<std::unique_ptr<PaddedChunk>> past = PaddedChunk::Map(path, 50, 100, 64);
  ASSERT_FALSE(past.ok());
  EXPECT_NE(std::string(past.status().message()).find(path), std::string::npos) << past.status();
  absl::StatusOr<std::unique_ptr<PaddedChunk>> missing = PaddedChunk::Map(tmp.Sub("none.pt"), 0, 10, 64);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(std::string(missing.status().message()).find("none.pt"), std::string::npos) << missing.status();
}

}  // namespace
}  // namespace ptd::image
