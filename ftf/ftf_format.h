#pragma once
// Constants of the Fuchsia Trace Format shared by the writer, the reader and the tests.
// Layouts: fuchsia.dev "Fuchsia trace format"; /work/shared/notes/ftf.md.

#include <cstddef>
#include <cstdint>

namespace ptd::ftf {

// The first word of every FTF file (a metadata record of type "trace info / magic").
inline constexpr uint64_t kMagicWord = 0x0016547846040010ull;

enum class RecordType : uint8_t {
  kMetadata = 0,
  kInitialization = 1,
  kString = 2,
  kThread = 3,
  kEvent = 4,
  kBlob = 5,
  kUserspaceObject = 6,
  kKernelObject = 7,
  kScheduling = 8,
  kLog = 9,
  kLargeRecord = 15,
};

enum class MetadataType : uint8_t {
  kProviderInfo = 1,
  kProviderSection = 2,
  kProviderEvent = 3,
  kTraceInfo = 4,
};

enum class EventType : uint8_t {
  kInstant = 0,
  kCounter = 1,
  kDurationBegin = 2,
  kDurationEnd = 3,
  kDurationComplete = 4,
  kAsyncBegin = 5,
  kAsyncInstant = 6,
  kAsyncEnd = 7,
  kFlowBegin = 8,
  kFlowStep = 9,
  kFlowEnd = 10,
};

// Zircon object types used in kernel object records.
inline constexpr uint8_t kObjTypeProcess = 1;
inline constexpr uint8_t kObjTypeThread = 2;

// Record size is 12 bits of 8-byte words, header included.
inline constexpr size_t kMaxRecordWords = 0xfff;
// String indices are 15 bits; 0 means "empty string".
inline constexpr uint16_t kMaxStringIndex = 0x7fff;
// Thread indices are 8 bits; 0 means "inline thread".
inline constexpr uint8_t kMaxThreadIndex = 0xff;
// The spec's limit on a string's length (TRACE_ENCODED_STRING_REF_MAX_LENGTH); also keeps
// a string record (header + padded bytes) inside kMaxRecordWords.
inline constexpr size_t kMaxStringBytes = 32000;
// Event and kernel object records have a 4-bit argument count.
inline constexpr size_t kMaxArgs = 15;
// Top bit of a 16-bit string ref: inline string, length in the low 15 bits.
inline constexpr uint16_t kInlineStringFlag = 0x8000;

inline constexpr size_t WordsForBytes(size_t bytes) { return (bytes + 7) / 8; }

}  // namespace ptd::ftf
