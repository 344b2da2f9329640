#pragma once
// One event or kernel-object argument as the writer takes it: a name and a typed value.
// Views only: the strings must stay alive until the call that takes the Arg returns.

#include <cstdint>

#include "absl/strings/string_view.h"
#include "ftf/string_handle.h"

namespace ptd::ftf {

// Argument types, numbered as in the FTF argument header (bits 0-3).
enum class ArgType : uint8_t {
  kNull = 0,
  kInt32 = 1,
  kUint32 = 2,
  kInt64 = 3,
  kUint64 = 4,
  kDouble = 5,
  kString = 6,
  kPointer = 7,
  kKoid = 8,
  kBool = 9,
};

struct Arg {
  absl::string_view name;
  ArgType type = ArgType::kNull;
  // Integer, pointer, koid and bool values (signed ones as two's complement bits).
  uint64_t bits = 0;
  double double_value = 0;
  absl::string_view string_value;
  // Set: `name` is this handle's text, which the writer looks up through it.
  StringHandle* name_handle = nullptr;
  // Set: `string_value` is this handle's text (the same for the value).
  StringHandle* value_handle = nullptr;

  static Arg Null(absl::string_view name) { return Arg{name, ArgType::kNull, 0, 0, {}, nullptr}; }
  static Arg Int32(absl::string_view name, int32_t v) {
    return Arg{name, ArgType::kInt32, static_cast<uint64_t>(static_cast<uint32_t>(v)), 0, {}, nullptr};
  }
  static Arg Uint32(absl::string_view name, uint32_t v) { return Arg{name, ArgType::kUint32, v, 0, {}, nullptr}; }
  static Arg Int64(absl::string_view name, int64_t v) {
    return Arg{name, ArgType::kInt64, static_cast<uint64_t>(v), 0, {}, nullptr};
  }
  static Arg Uint64(absl::string_view name, uint64_t v) { return Arg{name, ArgType::kUint64, v, 0, {}, nullptr}; }
  static Arg Uint64(StringHandle& name, uint64_t v) { return Arg{name.text(), ArgType::kUint64, v, 0, {}, &name}; }
  static Arg Double(absl::string_view name, double v) { return Arg{name, ArgType::kDouble, 0, v, {}, nullptr}; }
  static Arg String(absl::string_view name, absl::string_view v) {
    return Arg{name, ArgType::kString, 0, 0, v, nullptr};
  }
  // Name and value as handles: a string arg written with record after record.
  static Arg String(StringHandle& name, StringHandle& v) {
    return Arg{name.text(), ArgType::kString, 0, 0, v.text(), &name, &v};
  }
  static Arg Pointer(absl::string_view name, uint64_t v) { return Arg{name, ArgType::kPointer, v, 0, {}, nullptr}; }
  static Arg Koid(absl::string_view name, uint64_t v) { return Arg{name, ArgType::kKoid, v, 0, {}, nullptr}; }
  static Arg Bool(absl::string_view name, bool v) { return Arg{name, ArgType::kBool, v ? 1u : 0u, 0, {}, nullptr}; }
  static Arg Bool(StringHandle& name, bool v) { return Arg{name.text(), ArgType::kBool, v ? 1u : 0u, 0, {}, &name}; }

  int32_t int32_value() const { return static_cast<int32_t>(static_cast<uint32_t>(bits)); }
  int64_t int64_value() const { return static_cast<int64_t>(bits); }
  bool bool_value() const { return bits != 0; }
};

}  // namespace ptd::ftf
