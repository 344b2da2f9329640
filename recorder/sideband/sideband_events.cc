#include "recorder/sideband/sideband_events.h"

#include <cstring>

#include "sideband/sideband_attr.h"

namespace ptd {

static_assert(kSidebandSampleType ==
                  (PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_IDENTIFIER),
              "sideband/perf_record.h and linux/perf_event.h disagree on sample_type bits");

void AddEventCommonFields(const SidebandEventOptions& options, perf_event_attr* attr) {
  attr->size = sizeof(*attr);
  attr->sample_type |= kSidebandSampleType;
  attr->sample_id_all = 1;
  attr->inherit = options.per_cpu ? 1 : 0;
  attr->disabled = 1;
  attr->enable_on_exec = options.enable_on_exec ? 1 : 0;
  if (options.clockid >= 0) {
    attr->use_clockid = 1;
    attr->clockid = options.clockid;
  }
  if (options.wakeup_watermark > 0) {
    attr->watermark = 1;
    attr->wakeup_watermark = options.wakeup_watermark;
  }
}

void AddSidebandFields(const SidebandEventOptions& options, perf_event_attr* attr) {
  AddEventCommonFields(options, attr);
  SetSidebandRecordBits(options.context_switches, attr);
}

perf_event_attr DummySidebandAttr(const SidebandEventOptions& options) {
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_DUMMY;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  AddSidebandFields(options, &attr);
  return attr;
}

}  // namespace ptd
