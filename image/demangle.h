#pragma once
// Symbol names as their authors write them. C++, Rust (legacy and v0) and D through
// libiberty's cplus_demangle, the demangler binutils and gdb use; Rust's legacy
// `::h<hash>` suffix is dropped, as perf does. OCaml, which libiberty does not know:
// native code symbols of OCaml 4 (camlStdlib__List__map_277) and OCaml 5
// (camlStdlib.List.map_277) become Module.path.name (Stdlib.List.map). Go symbols are
// readable as they are (main.worker).

#include <string>

#include "absl/strings/string_view.h"

namespace ptd::image {

// Returns the readable name, or `symbol` unchanged when it is not mangled. A suffix from
// '@' on (name@plt, name@@VERSION) is kept after the demangled name.
std::string Demangle(absl::string_view symbol);

// OCaml only; exposed for tests. Returns false when `symbol` is not an OCaml symbol.
bool DemangleOcaml(absl::string_view symbol, std::string* out);

}  // namespace ptd::image
