#include "image/demangle.h"

#include <cxxabi.h>

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace ptd::image {

bool DemangleOcaml(absl::string_view symbol, std::string* out) {
  // Native OCaml symbols are "caml" + capitalised module path joined by "__", then the
  // function name and a "_<stamp>" suffix; runtime symbols (caml_alloc) are lower case.
  if (!absl::StartsWith(symbol, "caml") || symbol.size() < 5) return false;
  absl::string_view rest = symbol.substr(4);
  if (!absl::ascii_isupper(static_cast<unsigned char>(rest[0]))) return false;
  // Drop the stamp: trailing "_" followed only by digits.
  size_t underscore = rest.rfind('_');
  if (underscore != absl::string_view::npos && underscore + 1 < rest.size() && underscore > 0 &&
      rest[underscore - 1] != '_') {
    bool digits = true;
    for (size_t i = underscore + 1; i < rest.size(); ++i) {
      if (!absl::ascii_isdigit(static_cast<unsigned char>(rest[i]))) digits = false;
    }
    if (digits) rest = rest.substr(0, underscore);
  }
  std::string result;
  result.reserve(rest.size());
  for (size_t i = 0; i < rest.size(); ++i) {
    if (rest[i] == '_' && i + 1 < rest.size() && rest[i + 1] == '_' && i > 0) {
      result.push_back('.');
      ++i;
    } else {
      result.push_back(rest[i]);
    }
  }
  *out = std::move(result);
  return true;
}

std::string Demangle(absl::string_view symbol) {
  if (absl::StartsWith(symbol, "_Z")) {
    std::string copy(symbol);
    int status = 0;
    char* demangled = abi::__cxa_demangle(copy.c_str(), nullptr, nullptr, &status);
    if (status == 0 && demangled != nullptr) {
      std::string result(demangled);
      std::free(demangled);
      return result;
    }
    std::free(demangled);
    return copy;
  }
  std::string ocaml;
  if (DemangleOcaml(symbol, &ocaml)) return ocaml;
  return std::string(symbol);
}

}  // namespace ptd::image
