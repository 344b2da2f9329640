#pragma once
// Symbol names as users write them: C++ through the C++ ABI demangler, OCaml native code
// symbols (camlStdlib__List__map_277) as Module.path.name (Stdlib.List.map).

#include <string>

#include "absl/strings/string_view.h"

namespace ptd::image {

// Returns the readable name, or `symbol` unchanged when it is not mangled.
std::string Demangle(absl::string_view symbol);

// OCaml only; exposed for tests. Returns false when `symbol` is not an OCaml symbol.
bool DemangleOcaml(absl::string_view symbol, std::string* out);

}  // namespace ptd::image
