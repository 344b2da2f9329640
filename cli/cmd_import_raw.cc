#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.h"
#include "common/file_util.h"
#include "image/maps_spec.h"
#include "image/raw_import.h"

namespace ptd::cli {

namespace {

struct ImportRawArgs {
  std::string pt;
  std::string cpu;
  std::string maps;
  std::vector<std::string> map;
  std::string kallsyms;
  std::string output;
  bool force = false;
};

absl::Status RunImportRaw(const ImportRawArgs& args) {
  image::RawImportOptions options;
  options.pt_path = args.pt;
  options.output_dir = args.output;
  options.force = args.force;
  options.kallsyms = args.kallsyms;
  if (!args.cpu.empty()) {
    absl::StatusOr<CpuId> cpu = image::ParseCpuTriple(args.cpu);
    if (!cpu.ok()) return cpu.status();
    options.cpu = *cpu;
  }
  if (!args.maps.empty()) {
    absl::StatusOr<std::string> text = ReadFileToString(args.maps);
    if (!text.ok()) return text.status();
    std::string base = Dirname(args.maps);
    absl::StatusOr<std::vector<image::MapSpec>> specs = image::ParseMapsText(*text, args.maps, base);
    if (!specs.ok()) return specs.status();
    options.maps = *std::move(specs);
  }
  for (const std::string& m : args.map) {
    absl::StatusOr<image::MapSpec> spec = image::ParseMapOption(m);
    if (!spec.ok()) return spec.status();
    options.maps.push_back(*spec);
  }
  absl::StatusOr<image::RawImportResult> result = image::ImportRaw(options);
  if (!result.ok()) return result.status();
  for (const std::string& w : result->warnings) std::fprintf(stderr, "ptrace-direct: warning: %s\n", w.c_str());
  std::fprintf(stderr, "imported %s: %zu mappings → %zu dump files + %zu ELF files in %s\n", args.pt.c_str(),
               result->pieces, result->dump_files, result->file_images, args.output.c_str());
  return absl::OkStatus();
}

}  // namespace

void RegisterImportRawCommand(CLI::App& import_cmd, CliContext& ctx) {
  auto [raw, args] =
      AddSubcommand<ImportRawArgs>(import_cmd, ctx, "raw", "Raw PT bytes plus memory images", RunImportRaw);
  raw->add_option("--pt", args->pt, "Raw Intel PT byte stream")->required();
  raw->add_option("--cpu", args->cpu, "Recording CPU as FAMILY/MODEL/STEPPING (decides libipt errata)");
  raw->add_option("--maps", args->maps,
                  "File of mappings, one per line: 'PATH VADDR [OFFSET SIZE]' or "
                  "'pages ADDRFILE DUMPFILE [PAGESIZE]'");
  raw->add_option("--map", args->map, "PATH@VADDR[:OFFSET:SIZE] (repeatable)");
  raw->add_option("--kallsyms", args->kallsyms, "A copy of /proc/kallsyms: names the kernel functions the stream runs");
  raw->add_option("--output,-o", args->output, "Trace directory to create")->required();
  raw->add_flag("--force", args->force, "Replace an existing output directory");
}

}  // namespace ptd::cli
