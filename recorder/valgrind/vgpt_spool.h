#pragma once
// The directory the Valgrind tool writes its stream files into (<pid>-<n>.vgpt, one per
// tool instance), read while the files grow and fed to a VgptConverter in an order that
// keeps each process's story straight: a process's instances one after the other (an
// exec'd program after its predecessor has been read to the end), a forked child once
// its parent's stream has reached the fork. What has been consumed is punched out of the
// files, so the disk holds only what the converter has not read yet; a file read to its
// end is emptied but keeps its name until Drain (the tool takes the first free name).

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "recorder/valgrind/vgpt_converter.h"

namespace ptd {

class VgptSpool {
 public:
  // `converter` must outlive the spool.
  VgptSpool(std::string dir, VgptConverter* converter);
  ~VgptSpool();
  VgptSpool(const VgptSpool&) = delete;
  VgptSpool& operator=(const VgptSpool&) = delete;

  // Looks for new files and feeds what is new in each. True if anything was consumed.
  absl::StatusOr<bool> Poll();
  // No tool instance will write any more: reads everything left and closes every
  // instance (one that did not end by itself was killed, or recording stopped).
  absl::Status Drain();

  uint64_t bytes_read() const { return bytes_read_; }
  // True when every instance seen so far has written its exit record and was read.
  bool AllExited() const;
  // The pids whose stream has not ended yet (the processes still being recorded).
  std::vector<int> UnendedPids() const;

 private:
  struct File;
  absl::Status Scan();
  // Reads and feeds one file; `*progress` is set when something was consumed.
  absl::Status Pump(File& file, bool final_read, bool* progress);
  void Close(File& file);

  std::string dir_;
  VgptConverter* converter_;
  // By pid, then instance number.
  std::map<int, std::map<int, std::unique_ptr<File>>> files_;
  uint64_t bytes_read_ = 0;
};

}  // namespace ptd
