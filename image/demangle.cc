#include "image/demangle.h"

// libiberty.h declares basename() itself, clashing with glibc's, unless told it need not.
#define HAVE_DECL_BASENAME 1
#include <libiberty/demangle.h>

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"

namespace ptd::image {
namespace {

// Parameters and qualifiers of C++ functions; every language libiberty knows, D included
// (cplus_demangle tries D only when asked).
constexpr int kDemangleOptions = DMGL_PARAMS | DMGL_ANSI | DMGL_AUTO | DMGL_DLANG;

// Itanium C++ and Rust legacy (_Z), Rust v0 (_R), D (_D).
bool MayBeMangled(absl::string_view symbol) {
  return symbol.size() > 2 && symbol[0] == '_' && (symbol[1] == 'Z' || symbol[1] == 'R' || symbol[1] == 'D');
}

bool DemangleWithLibiberty(absl::string_view symbol, std::string* out) {
  if (!MayBeMangled(symbol)) return false;
  const std::string copy(symbol);
  // Without DMGL_VERBOSE, Rust legacy names lose their hash and v0 names their crate
  // disambiguators.
  char* demangled = cplus_demangle(copy.c_str(), kDemangleOptions);
  if (demangled == nullptr) return false;
  *out = demangled;
  std::free(demangled);
  return true;
}

// "_<digits>" at the end of an OCaml symbol: the compiler's stamp, not part of the name.
absl::string_view WithoutStamp(absl::string_view name) {
  const size_t underscore = name.rfind('_');
  if (underscore == absl::string_view::npos || underscore == 0 || underscore + 1 == name.size()) return name;
  for (size_t i = underscore + 1; i < name.size(); ++i) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(name[i]))) return name;
  }
  // "Foo__42" has no name before the stamp in OCaml 4's form: keep it whole.
  if (name[underscore - 1] == '_' || name[underscore - 1] == '.') return name;
  return name.substr(0, underscore);
}

}  // namespace

bool DemangleOcaml(absl::string_view symbol, std::string* out) {
  // Native OCaml symbols are "caml" + capitalised module path, then the function name and
  // a "_<stamp>" suffix; the path is joined by "__" (OCaml 4) or "." (OCaml 5), and
  // characters an assembler would not take are escaped as "$xx" (hex). Runtime symbols
  // (caml_alloc) are lower case after "caml".
  if (!absl::StartsWith(symbol, "caml") || symbol.size() < 5) return false;
  const absl::string_view rest = WithoutStamp(symbol.substr(4));
  if (!absl::ascii_isupper(static_cast<unsigned char>(rest[0]))) return false;
  std::string result;
  result.reserve(rest.size());
  for (size_t i = 0; i < rest.size(); ++i) {
    int byte = 0;
    if (rest[i] == '_' && i + 1 < rest.size() && rest[i + 1] == '_') {
      result.push_back('.');
      ++i;
    } else if (rest[i] == '$' && i + 2 < rest.size() && absl::ascii_isxdigit(rest[i + 1]) &&
               absl::ascii_isxdigit(rest[i + 2]) && absl::SimpleHexAtoi(rest.substr(i + 1, 2), &byte)) {
      result.push_back(static_cast<char>(byte));
      i += 2;
    } else {
      result.push_back(rest[i]);
    }
  }
  *out = std::move(result);
  return true;
}

std::string Demangle(absl::string_view symbol) {
  // The linker's and the loader's decorations (name@plt, name@@GLIBC_2.2.5) follow the
  // mangled name.
  const size_t at = symbol.find('@', 1);
  const absl::string_view mangled = at == absl::string_view::npos ? symbol : symbol.substr(0, at);
  const absl::string_view suffix = at == absl::string_view::npos ? absl::string_view() : symbol.substr(at);
  std::string readable;
  if (DemangleWithLibiberty(mangled, &readable) || DemangleOcaml(mangled, &readable)) {
    readable.append(suffix.data(), suffix.size());
    return readable;
  }
  return std::string(symbol);
}

}  // namespace ptd::image
