#pragma once
// record --kernel: what decoding kernel code needs, captured when recording ends into
// the trace directory's kernel/ (docs/trace-dir.md "kernel"): /proc/kallsyms (names),
// /proc/modules with each module's build-id (/sys/module/NAME/notes), the kernel's
// build-id (/sys/kernel/notes), the kernel and module text from /proc/kcore when it can
// be read, and a vmlinux with the kernel's build-id when one is found (then it, not the
// kcore copy, is the kernel's image: it has the symbols and is the file that ran).

#include <string>
#include <vector>

#include "common/trace_dir.h"
#include "common/trace_meta.h"

namespace ptd {

struct KernelImageSources {
  std::string proc_root = "/proc";
  std::string sys_root = "/sys";
  // Where a vmlinux is looked for by build-id: DIR/vmlinux-RELEASE in the first two,
  // DIR/.build-id/xx/rest(.debug) in all (perf's ~/.debug cache, the debug packages).
  std::vector<std::string> vmlinux_dirs = {"/usr/lib/debug/boot", "/boot", "/usr/lib/debug"};
  std::string release;  // "": uname -r
};

// Fills meta->kernel and adds the kernel (and module) text to meta->images (pid -1).
// Returns "" when everything was captured, else one message saying what is missing and
// why (also added to meta->notes); user-space decode never depends on any of it.
std::string CaptureKernelImages(const TraceDirWriter& dir, const KernelImageSources& sources, TraceMeta* meta);

}  // namespace ptd
