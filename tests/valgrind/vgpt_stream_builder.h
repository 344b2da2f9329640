#pragma once
// Stream words laid out the way ptdtrace writes them (recorder/valgrind/tool/vgpt_stream.h),
// for tests of the converter and the spool.

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "recorder/valgrind/tool/vgpt_stream.h"

namespace ptd::testing {

// Writes words the way ptdtrace lays them out.
class StreamBuilder {
 public:
  // `number`: the file's <n> (0, one more after each exec); `parent_number`: the
  // parent's file that forked this child.
  StreamBuilder& Hello(uint32_t pid, uint32_t ppid, uint32_t flags = VGPT_HELLO_STARTUP, uint32_t fork_seq = 0,
                       const std::string& exe = "/bin/prog", uint32_t number = 0, uint32_t parent_number = 0) {
    std::vector<uint32_t> p = {VGPT_VERSION, pid, ppid, flags, fork_seq, number, parent_number};
    AppendString(p, exe);
    return Record(VGPT_HELLO, p);
  }
  // A block of `lengths.size()` instructions at `start`, ending with `kind` towards `target`.
  StreamBuilder& Block(uint32_t id, uint64_t start, std::vector<uint8_t> lengths, uint32_t kind, uint64_t target = 0,
                       uint32_t flags = 0) {
    uint64_t end = start;
    for (uint8_t l : lengths) end += l;
    const uint64_t last = end - lengths.back();
    std::vector<uint32_t> p = {id};
    Append64(p, start);
    Append64(p, end);
    Append64(p, last);
    Append64(p, target);
    p.push_back(kind);
    p.push_back(static_cast<uint32_t>(lengths.size()));
    p.push_back(flags);
    std::vector<uint32_t> packed((lengths.size() + 3) / 4, 0);
    std::memcpy(packed.data(), lengths.data(), lengths.size());
    p.insert(p.end(), packed.begin(), packed.end());
    return Record(VGPT_BLOCK, p);
  }
  StreamBuilder& Run(std::initializer_list<uint32_t> ids) {
    words_.insert(words_.end(), ids.begin(), ids.end());
    return *this;
  }
  StreamBuilder& Switch(uint32_t now, uint32_t out = 0, uint64_t resume = 0) {
    std::vector<uint32_t> p = {now, out};
    Append64(p, resume);
    return Record(VGPT_SWITCH, p);
  }
  StreamBuilder& Signal(uint32_t tid, uint64_t ip) {
    std::vector<uint32_t> p = {tid, 10};
    Append64(p, ip);
    return Record(VGPT_SIGNAL, p);
  }
  StreamBuilder& Map(uint64_t start, uint64_t len, const std::string& path) {
    std::vector<uint32_t> p;
    Append64(p, start);
    Append64(p, len);
    Append64(p, 0);
    p.push_back(5);  // r-x
    p.push_back(0);
    Append64(p, 0);
    Append64(p, 0);
    AppendString(p, path);
    return Record(VGPT_MAP, p);
  }
  StreamBuilder& Forking(uint32_t seq) { return Record(VGPT_FORKING, {seq}); }
  StreamBuilder& Exec() {
    std::vector<uint32_t> p;
    AppendString(p, "/bin/next");
    return Record(VGPT_EXEC, p);
  }
  StreamBuilder& ExecUntraced(const std::string& path) {
    std::vector<uint32_t> p = {VGPT_UNTRACED_PRIVILEGED};
    AppendString(p, path);
    return Record(VGPT_EXEC_UNTRACED, p);
  }
  StreamBuilder& ExecFailed(uint32_t tid, uint64_t ip) {
    std::vector<uint32_t> p = {tid};
    Append64(p, ip);
    return Record(VGPT_NOTE, p);
  }
  StreamBuilder& ThreadExit(uint32_t tid) { return Record(VGPT_THREAD_EXIT, {tid}); }
  StreamBuilder& Exit() { return Record(VGPT_EXIT, {0}); }
  StreamBuilder& Raw(std::initializer_list<uint32_t> w) {
    words_.insert(words_.end(), w.begin(), w.end());
    return *this;
  }
  const std::vector<uint32_t>& words() const { return words_; }

 private:
  StreamBuilder& Record(uint32_t kind, const std::vector<uint32_t>& payload) {
    words_.push_back(VGPT_TAG_BASE | kind);
    words_.push_back(static_cast<uint32_t>(payload.size()));
    words_.insert(words_.end(), payload.begin(), payload.end());
    return *this;
  }
  static void Append64(std::vector<uint32_t>& p, uint64_t v) {
    p.push_back(static_cast<uint32_t>(v));
    p.push_back(static_cast<uint32_t>(v >> 32));
  }
  static void AppendString(std::vector<uint32_t>& p, const std::string& s) {
    std::vector<uint32_t> w((s.size() + 1 + 3) / 4, 0);
    std::memcpy(w.data(), s.c_str(), s.size() + 1);
    p.insert(p.end(), w.begin(), w.end());
  }
  std::vector<uint32_t> words_;
};

}  // namespace ptd::testing
