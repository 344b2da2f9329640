#pragma once
// The output time axis of one stream, and the events waiting for it. With timing packets:
// TSC → ns via meta.json's conversion; an event between two timing updates is placed by
// its instruction count between them (the update before it and the update after it), so
// time of a syscall, a sleep or a stall stays where the packets put it instead of running
// into whatever code comes next. An event's time is known only once the next update came:
// events wait here (in order) until then, at most until the end of the chunk, where the
// rest runs on from the last update at the rate of the interval before. Time never goes
// back: an update earlier than the one before (libipt's CYC estimate overshooting the
// next TSC or MTC) counts as the one before. Without timing packets: the instruction
// count. The cycles axis is fed cycle counts (CYC) instead of instructions. Parallel
// decoding replays a piece's updates and samples through this same object, so both paths
// compute the same numbers.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/trace_meta.h"
#include "decoder/flow/flow_event.h"

namespace ptd::decoder {

enum class TimeAxis { kTime, kInstructions, kCycles };

class TimeInterpolator {
 public:
  // Events go on to `consumer` (may be null when none are delivered).
  TimeInterpolator(TimeAxis axis, const TimeConversion& conversion, FlowConsumer* consumer = nullptr)
      : axis_(axis), conversion_(conversion), consumer_(consumer) {}

  TimeAxis axis() const { return axis_; }

  // Instruction and cycles axes: the time when `count` instructions (cycles) had executed
  // (non-decreasing across calls).
  uint64_t Now(uint64_t count) {
    last_ = std::max(last_, count);
    return last_;
  }

  // Time axis: the time when `instructions` had executed, known at the next update. The
  // answer is a ticket: an event carries it as its time until Deliver swaps in the time.
  uint64_t Sample(uint64_t instructions) {
    open_.push_back(instructions);
    return next_ticket_++;
  }

  // A timing packet said `tsc` when `instructions` had executed: the samples since the
  // last update are timed between the two, and the waiting events whose time is known go
  // on. `kept`: a ticket the caller still holds outside Deliver (its pending branch), whose
  // time must stay known (kNoTicket: none). `at_event`: the time of an event's own packet,
  // a timing point even when the TSC has not moved (a repeated time read after a step is
  // not: the packets said nothing new).
  void Update(uint64_t tsc, uint64_t instructions, uint64_t kept = kNoTicket, bool at_event = false) {
    if (axis_ != TimeAxis::kTime || tsc == 0) return;
    if (tsc == last_tsc_ && (!at_event || instructions <= point_.instructions)) return;
    last_tsc_ = tsc;
    TimePoint next{std::max(conversion_.TscToNs(tsc), have_point_ ? point_.ns : 0), instructions};
    for (uint64_t sampled : open_) Timed(Between(next, sampled));
    open_.clear();
    if (have_point_ && next.ns > point_.ns && next.instructions > point_.instructions) {
      ns_per_insn_ = static_cast<double>(next.ns - point_.ns) /
                     static_cast<double>(next.instructions - point_.instructions);
    }
    point_ = next;
    have_point_ = true;
    DeliverKnown(kept);
  }

  // The end of a chunk: samples after the last update run on from it at the rate of the
  // interval before (no later update will come for them), and every waiting event goes on.
  void Finish(uint64_t kept = kNoTicket) {
    if (axis_ != TimeAxis::kTime) return;
    for (uint64_t sampled : open_) {
      double t = static_cast<double>(point_.ns) +
                 ns_per_insn_ * static_cast<double>(sampled - std::min(sampled, point_.instructions));
      Timed(have_point_ ? static_cast<uint64_t>(t) : 0);
    }
    open_.clear();
    DeliverKnown(kept);
  }

  // Hands `event` to the consumer; on the time axis `event.time` is a ticket, and the event
  // waits until its time is known (events go on in the order given).
  void Deliver(FlowEvent event) {
    if (axis_ != TimeAxis::kTime) {
      consumer_->OnFlow(event);
      return;
    }
    if (waiting_.empty() && Known(event.time)) {
      event.time = TimeOf(event.time);
      consumer_->OnFlow(event);
      return;
    }
    waiting_.push_back(event);
  }

  // Some update has given a time (the time axis has a point to interpolate from).
  bool has_point() const { return have_point_; }

  // The ticket the next Sample hands out.
  uint64_t next_ticket() const { return next_ticket_; }

  // The latest time of a sample (instruction and cycles axes: the latest Now).
  uint64_t last() const { return last_; }

  static constexpr uint64_t kNoTicket = UINT64_MAX;

 private:
  struct TimePoint {
    uint64_t ns = 0;
    uint64_t instructions = 0;
  };

  // The time of a sample at `instructions` between the last update and `next`.
  uint64_t Between(const TimePoint& next, uint64_t instructions) const {
    if (!have_point_) return next.ns;  // before the first timing packet: its time
    if (next.instructions <= point_.instructions || instructions <= point_.instructions) return point_.ns;
    const uint64_t done = std::min(instructions, next.instructions) - point_.instructions;
    const double span = static_cast<double>(next.instructions - point_.instructions);
    return point_.ns + static_cast<uint64_t>(static_cast<double>(next.ns - point_.ns) * (static_cast<double>(done) / span));
  }

  // A ticket older than the kept ones is a caller's bug: it gets the latest time rather
  // than holding up every event after it.
  // Every sample counts for last(), delivered or not (the stream's last branch is pending).
  void Timed(uint64_t time) {
    times_.push_back(time);
    last_ = std::max(last_, time);
  }

  bool Known(uint64_t ticket) const { return ticket - first_ticket_ < times_.size() || ticket < first_ticket_; }
  uint64_t TimeOf(uint64_t ticket) {
    if (ticket < first_ticket_) return last_;
    uint64_t t = times_[ticket - first_ticket_];
    last_ = std::max(last_, t);
    return t;
  }

  void DeliverKnown(uint64_t kept) {
    size_t i = 0;
    for (; i < waiting_.size() && Known(waiting_[i].time); ++i) {
      FlowEvent& event = waiting_[i];
      event.time = TimeOf(event.time);
      consumer_->OnFlow(event);
    }
    waiting_.erase(waiting_.begin(), waiting_.begin() + static_cast<std::ptrdiff_t>(i));
    if (!waiting_.empty()) return;
    // Nothing waits: only the kept ticket's time (and none before it) is still needed.
    const uint64_t known_end = first_ticket_ + times_.size();
    const uint64_t keep_from = kept != kNoTicket && kept >= first_ticket_ ? std::min(kept, known_end) : known_end;
    times_.erase(times_.begin(), times_.begin() + static_cast<std::ptrdiff_t>(keep_from - first_ticket_));
    first_ticket_ = keep_from;
  }

  TimeAxis axis_;
  TimeConversion conversion_;
  FlowConsumer* consumer_;
  uint64_t last_tsc_ = 0;
  // The latest update (none before the first timing packet), and the rate of the interval
  // that ended there (the chunk's tail runs on at it).
  bool have_point_ = false;
  TimePoint point_;
  double ns_per_insn_ = 0;
  // Tickets [first_ticket_, first_ticket_ + times_.size()) are timed; the open_ ones after
  // them wait for the next update.
  uint64_t first_ticket_ = 0;
  uint64_t next_ticket_ = 0;
  std::vector<uint64_t> times_;
  std::vector<uint64_t> open_;
  std::vector<FlowEvent> waiting_;
  uint64_t last_ = 0;
};

}  // namespace ptd::decoder
