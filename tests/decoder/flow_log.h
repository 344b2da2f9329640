#pragma once
// A FlowConsumer that keeps every flow event it is handed, in order.

#include <vector>

#include "decoder/flow/flow_decoder.h"
#include "decoder/flow/flow_event.h"

namespace ptd::decoder::testing {

class FlowLog : public FlowConsumer {
 public:
  void OnFlow(const FlowEvent& event) override { events.push_back(event); }
  std::vector<FlowEvent> events;
};

}  // namespace ptd::decoder::testing
