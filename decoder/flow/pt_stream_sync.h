#pragma once
// Where the decode loop (pt_stream_decoder.cc) starts and resumes in a buffer: libipt's
// configuration for it, the PSB to resynchronize at after an error, and the PSB+ events
// that mark a PSB at an IP.

#include <intel-pt.h>

#include <cstdint>
#include <vector>

#include "decoder/flow/flow_decoder.h"

namespace ptd::decoder {

// pt_config for one chunk: errata from the recording CPU, timing from meta.json.
// `errata_ok` is cleared when libipt does not know the CPU (decoded without errata).
pt_config MakeConfig(const PtDecodeConfig& config, const uint8_t* begin, size_t size, bool* errata_ok);

// Where to resynchronize after an error: the first PSB at or after the position of the
// call before the failing one (2.0.5's sync_forward would start after its read-ahead and
// can skip a whole good segment), but always past the last sync point.
bool NextSyncPoint(const std::vector<uint64_t>& psbs, uint64_t previous_call, uint64_t last_sync,
                   bool synced_once, uint64_t* out);

// A PSB+ status update bound to the IP where the PSB was taken (tracing on): the single
// decoder has run every instruction before that PSB when it reports it.
bool IsPsbAnchor(const pt_event& event);

}  // namespace ptd::decoder
