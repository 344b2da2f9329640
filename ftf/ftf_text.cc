#include "ftf/ftf_text.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ftf/ftf_reader.h"

namespace ptd::ftf {
namespace {

std::string Quoted(const std::string& s) { return absl::StrCat("\"", absl::CHexEscape(s), "\""); }

void AppendArgs(std::string& out, const std::vector<ArgValue>& args) {
  if (args.empty()) return;
  absl::StrAppend(&out, " args={");
  for (size_t i = 0; i < args.size(); ++i) {
    absl::StrAppend(&out, i ? ", " : "", FormatArg(args[i]));
  }
  absl::StrAppend(&out, "}");
}

}  // namespace

std::string FormatArg(const ArgValue& arg) {
  std::string value;
  switch (arg.type) {
    case ArgType::kNull: value = "null"; break;
    case ArgType::kInt32: value = absl::StrCat(static_cast<int32_t>(static_cast<uint32_t>(arg.bits))); break;
    case ArgType::kUint32: value = absl::StrCat(static_cast<uint32_t>(arg.bits)); break;
    case ArgType::kInt64: value = absl::StrCat(static_cast<int64_t>(arg.bits)); break;
    case ArgType::kUint64: value = absl::StrCat(arg.bits); break;
    case ArgType::kDouble: value = absl::StrFormat("%.17g", arg.double_value); break;
    case ArgType::kString: value = Quoted(arg.string_value); break;
    case ArgType::kPointer: value = absl::StrFormat("0x%x", arg.bits); break;
    case ArgType::kKoid: value = absl::StrCat(arg.bits); break;
    case ArgType::kBool: value = arg.bits ? "true" : "false"; break;
    default: value = absl::StrCat("<type ", arg.raw_type, ">"); break;
  }
  return absl::StrCat(Quoted(arg.name), ": ", ArgTypeName(arg.type), " ", value);
}

std::string FormatRecord(const FtfRecord& record) {
  std::string out = absl::StrFormat("@0x%08x ", record.offset);
  if (record.skipped) {
    absl::StrAppendFormat(&out, "%s (type %u, %u words): skipped", RecordTypeName(record.raw_type),
                          record.raw_type, record.size_words);
    return out;
  }
  switch (record.type) {
    case RecordType::kMetadata:
      if (record.is_magic) {
        absl::StrAppend(&out, "magic");
      } else if (record.metadata.metadata_type == static_cast<uint8_t>(MetadataType::kProviderInfo)) {
        absl::StrAppendFormat(&out, "provider_info id=%u name=%s", record.metadata.provider_id,
                              Quoted(record.metadata.provider_name));
      } else {
        absl::StrAppendFormat(&out, "provider_section id=%u", record.metadata.provider_id);
      }
      break;
    case RecordType::kInitialization:
      absl::StrAppendFormat(&out, "initialization ticks_per_second=%u", record.ticks_per_second);
      break;
    case RecordType::kString:
      absl::StrAppendFormat(&out, "string #%u = %s", record.string_index,
                            Quoted(record.string_value));
      break;
    case RecordType::kThread:
      absl::StrAppendFormat(&out, "thread #%u = pid %u tid %u", record.thread_index,
                            record.thread.pid, record.thread.tid);
      break;
    case RecordType::kEvent: {
      const EventRecord& e = record.event;
      absl::StrAppendFormat(&out, "%s ts=%u pid=%u tid=%u cat=%s name=%s", EventTypeName(e.type),
                            e.ts, e.thread.pid, e.thread.tid, Quoted(e.category), Quoted(e.name));
      AppendArgs(out, e.args);
      if (e.type == EventType::kDurationComplete) {
        absl::StrAppendFormat(&out, " end_ts=%u", e.trailer);
      } else if (e.type == EventType::kCounter) {
        absl::StrAppendFormat(&out, " counter_id=%u", e.trailer);
      } else if (e.type != EventType::kInstant && e.type != EventType::kDurationBegin &&
                 e.type != EventType::kDurationEnd) {
        absl::StrAppendFormat(&out, " id=%u", e.trailer);
      }
      break;
    }
    case RecordType::kKernelObject: {
      const KernelObjectRecord& o = record.object;
      const char* kind = o.obj_type == kObjTypeProcess  ? "process"
                         : o.obj_type == kObjTypeThread ? "thread"
                                                        : "object";
      absl::StrAppendFormat(&out, "kernel_object %s koid=%u name=%s", kind, o.koid, Quoted(o.name));
      if (o.obj_type != kObjTypeProcess && o.obj_type != kObjTypeThread) {
        absl::StrAppendFormat(&out, " obj_type=%u", o.obj_type);
      }
      AppendArgs(out, o.args);
      break;
    }
    default:
      absl::StrAppendFormat(&out, "%s", RecordTypeName(record.raw_type));
      break;
  }
  return out;
}

}  // namespace ptd::ftf
