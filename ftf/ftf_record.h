#pragma once
// Records as the reader returns them: plain data with string and thread references
// already resolved (against the tables as they stood when the record was read).

#include <cstdint>
#include <string>
#include <vector>

#include "ftf/ftf_arg.h"
#include "ftf/ftf_format.h"

namespace ptd::ftf {

// An argument with its strings owned (the reader reuses their storage between records).
struct ArgValue {
  std::string name;
  ArgType type = ArgType::kNull;
  uint64_t bits = 0;  // integers, pointer, koid, bool; for kDouble the IEEE-754 bits
  double double_value = 0;
  std::string string_value;
  // Argument types the reader does not know, kept by their raw number.
  uint8_t raw_type = 0;
};

struct ThreadKoids {
  uint64_t pid = 0;
  uint64_t tid = 0;
};

struct EventRecord {
  EventType type = EventType::kInstant;
  uint64_t ts = 0;
  ThreadKoids thread;
  uint8_t thread_ref = 0;  // 0: the thread was inline
  std::string category;
  std::string name;
  std::vector<ArgValue> args;
  // The word after the args: end time (complete), counter id (counter), correlation id
  // (async), flow id (flow); 0 for other types.
  uint64_t trailer = 0;
};

struct KernelObjectRecord {
  uint8_t obj_type = 0;
  uint64_t koid = 0;
  std::string name;
  std::vector<ArgValue> args;
};

struct MetadataRecord {
  uint8_t metadata_type = 0;  // MetadataType, or 4 for the magic (trace info) record
  uint32_t provider_id = 0;
  std::string provider_name;
};

struct FtfRecord {
  uint64_t offset = 0;  // byte offset of the header in the (uncompressed) stream
  uint64_t size_words = 0;
  uint8_t raw_type = 0;
  RecordType type = RecordType::kMetadata;
  // The fields for `type`; the others keep stale values from earlier records.
  bool is_magic = false;
  MetadataRecord metadata;
  uint64_t ticks_per_second = 0;  // kInitialization
  uint16_t string_index = 0;      // kString
  std::string string_value;       // kString
  uint8_t thread_index = 0;       // kThread
  ThreadKoids thread;             // kThread
  EventRecord event;              // kEvent
  KernelObjectRecord object;      // kKernelObject
  // True for record types the reader skips by their size (blob, log, scheduling, ...).
  bool skipped = false;
};

}  // namespace ptd::ftf
