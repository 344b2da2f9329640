#pragma once
// A string a caller writes in record after record (a category, an argument's name): the
// writer remembers the index it gave the text and reuses it for as long as the string
// table has redefined no index since, skipping the lookup (hashing or comparing the text)
// that a plain string_view costs on every record.
//
// The text must stay alive and unchanged while the handle is used. A handle may be used
// with several writers (it then looks its text up again when the writer changes).

#include <cstdint>

#include "absl/strings/string_view.h"

namespace ptd::ftf {

class StringHandle {
 public:
  explicit constexpr StringHandle(absl::string_view text) : text_(text) {}

  absl::string_view text() const { return text_; }

 private:
  friend class FtfWriter;
  absl::string_view text_;
  // What the writer gave the text last: its index in the string table of writer
  // `writer_id_` when that table had made `redefinitions_` redefinitions.
  uint64_t writer_id_ = 0;
  uint16_t index_ = 0;
  uint64_t redefinitions_ = 0;
};

}  // namespace ptd::ftf
