#pragma once
// The images a stream's decoder and models see as time goes on (DecodeTrace's internals).

#include <algorithm>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <vector>

#include "decoder/flow/flow_decoder.h"
#include "image/process_image.h"
#include "image/timed_image.h"

namespace ptd::decoder {

// Where a per-CPU stream's CPU starts running another process, in time order.
struct ProcessSwitch {
  uint64_t time_ns = 0;
  int pid = 0;
};

// One decoder's (or the models') view of a stream's code: the image of the stream's
// process, or for a per-CPU stream of the process the schedule runs at that time, each
// with the mappings of that time. Process images come from `images` (the models' shared
// ones, or a worker's own).
class StreamImageClock : public ImageClock {
 public:
  using Images = std::function<image::TimedProcessImage*(int pid)>;
  // `switches` empty: always `pid`.
  StreamImageClock(Images images, int pid, std::shared_ptr<const std::vector<ProcessSwitch>> switches)
      : images_(std::move(images)), switches_(std::move(switches)), current_(images_(pid)) {
    if (!switches_->empty()) current_ = images_(switches_->front().pid);
  }

  image::ProcessImage* AdvanceTo(uint64_t time_ns) override {
    uint64_t next_switch = UINT64_MAX;
    if (!switches_->empty()) {
      auto after = std::upper_bound(switches_->begin(), switches_->end(), time_ns,
                                    [](uint64_t t, const ProcessSwitch& s) { return t < s.time_ns; });
      // Before the first switch: the first process (the CPU ran nothing traced yet).
      current_ = images_(after == switches_->begin() ? after->pid : std::prev(after)->pid);
      if (after != switches_->end()) next_switch = after->time_ns;
    }
    current_->AdvanceTo(time_ns);
    next_change_ = std::min(current_->next_change_ns(), next_switch);
    return current_->image();
  }
  image::ProcessImage* image() override { return current_->image(); }
  uint64_t next_change() const override { return next_change_; }
  uint64_t version() const override { return current_->generation(); }

 private:
  Images images_;
  std::shared_ptr<const std::vector<ProcessSwitch>> switches_;
  image::TimedProcessImage* current_;
  uint64_t next_change_ = 0;
};

}  // namespace ptd::decoder
