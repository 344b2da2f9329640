#include "sideband/sideband_attr.h"

namespace ptd {

void SetSidebandRecordBits(bool context_switches, perf_event_attr* attr) {
  attr->sample_id_all = 1;
  attr->mmap = 1;
  attr->mmap2 = 1;
  attr->comm = 1;
  attr->comm_exec = 1;
  attr->task = 1;
  attr->context_switch = context_switches ? 1 : 0;
}

}  // namespace ptd
