#pragma once
// The lockstep driver of PacketQuery against libipt's query decoder (used by
// packet_query_test.cc and the packet_query fuzz target): the same bytes, the same calls,
// every return code, output, offset, sync offset and time compared after each call.

#include <intel-pt.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "decoder/packets/packet_query.h"

namespace ptd::decoder::testing {

struct Lockstep {
  uint64_t calls = 0;
  uint64_t events = 0;
  uint64_t errors = 0;
  // How often pt_qry_time changed from one call to the next, and the most MTC and CYC
  // updates it said were lost (the tests check that timing packets were exercised).
  uint64_t time_changes = 0;
  uint32_t max_lost_mtc = 0;
  uint32_t max_lost_cyc = 0;
  std::string difference;  // the first one, empty if none
};

inline std::string Hex(uint64_t v) { return absl::StrCat("0x", absl::Hex(v)); }

// Runs both query layers over `bytes` with the same calls (`seed` picks between
// conditional and indirect branch queries) until both are past the last PSB or
// `max_calls`; stops at the first difference. `scan_threads`: PacketQuery's index is
// scanned in that many stretches (long streams); `chunk_packets`: its chunk size.
inline Lockstep RunLockstep(const std::string& bytes, const pt_config& base, uint64_t seed, uint64_t max_calls,
                            int scan_threads = 1, uint64_t chunk_packets = PacketQuery::kIndexChunkPackets) {
  Lockstep out;
  std::vector<uint8_t> padded(bytes.begin(), bytes.end());
  padded.resize(bytes.size() + 64, 0);
  pt_config config = base;
  config.begin = padded.data();
  config.end = padded.data() + bytes.size();
  pt_query_decoder* ref = pt_qry_alloc_decoder(&config);
  // With the scan's TNT-8 map when the bytes pass it (as the fast decoder runs it).
  const PacketQuery::Scan scan = PacketQuery::ScanBytes(config, scan_threads, chunk_packets);
  PacketQuery ours(config, scan.supported ? &scan : nullptr);
  if (ref == nullptr || !ours.ok()) {
    out.difference = "allocation failed";
    if (ref != nullptr) pt_qry_free_decoder(ref);
    return out;
  }
  std::mt19937_64 random(seed);
  uint64_t call = 0;
  std::string what;
  auto differ = [&](const std::string& detail) {
    uint64_t offset = 0;
    pt_qry_get_offset(ref, &offset);
    out.difference = absl::StrCat("call ", call, " (", what, ") at offset ", offset, ": ", detail);
  };
  uint64_t last_time = 0;
  // After every call: offsets and time.
  auto compare_state = [&]() -> bool {
    uint64_t a = 0, b = 0;
    int ra = pt_qry_get_offset(ref, &a), rb = ours.GetOffset(&b);
    if (ra != rb || (ra >= 0 && a != b)) {
      differ(absl::StrCat("offset ", ra, "/", a, " vs ", rb, "/", b));
      return false;
    }
    ra = pt_qry_get_sync_offset(ref, &a);
    rb = ours.GetSyncOffset(&b);
    if (ra != rb || (ra >= 0 && a != b)) {
      differ(absl::StrCat("sync offset ", ra, "/", a, " vs ", rb, "/", b));
      return false;
    }
    uint32_t ma = 1, mb = 1, ca = 1, cb = 1;
    ra = pt_qry_time(ref, &a, &ma, &ca);
    rb = ours.Time(&b, &mb, &cb);
    if (ra != rb || a != b || ma != mb || ca != cb) {
      differ(absl::StrCat("time ", ra, "/", a, "/", ma, "/", ca, " vs ", rb, "/", b, "/", mb, "/", cb));
      return false;
    }
    if (ra >= 0 && a != last_time) {
      ++out.time_changes;
      last_time = a;
    }
    out.max_lost_mtc = std::max(out.max_lost_mtc, ma);
    out.max_lost_cyc = std::max(out.max_lost_cyc, ca);
    return true;
  };
  int a_event = 0;
  auto same_code = [&](int a, int b) -> bool {
    ++call;
    if (a == b) return true;
    differ(absl::StrCat("status ", a, " vs ", b));
    return false;
  };
  // An event query on both (outputs filled alike first, so unset bytes compare too).
  auto query_event = [&]() -> bool {
    pt_event ea, eb;
    std::memset(&ea, 0xa5, sizeof ea);
    std::memset(&eb, 0xa5, sizeof eb);
    a_event = pt_qry_event(ref, &ea, sizeof ea);
    const int b_event = ours.Event(&eb, sizeof eb);
    if (!same_code(a_event, b_event)) return false;
    if (a_event >= 0 && std::memcmp(&ea, &eb, sizeof ea) != 0) {
      differ(absl::StrCat("event type ", ea.type, " vs ", eb.type, ", ip_suppressed ", ea.ip_suppressed, " vs ",
                          eb.ip_suppressed, ", tsc ", ea.tsc, " vs ", eb.tsc, ", lost_mtc ", ea.lost_mtc, " vs ",
                          eb.lost_mtc, ", lost_cyc ", ea.lost_cyc, " vs ", eb.lost_cyc));
      return false;
    }
    return true;
  };
  // Sync: forward first, after an error alternately forward and to the first PSB at or
  // after the offset before the failed call (the decoders' resync remedy).
  int status = 0;
  uint64_t ip_a = 0, ip_b = 0;
  what = "sync forward";
  int a = pt_qry_sync_forward(ref, &ip_a), b = ours.SyncForward(&ip_b);
  if (!same_code(a, b) || ip_a != ip_b || !compare_state()) {
    if (out.difference.empty()) differ(absl::StrCat("ip ", Hex(ip_a), " vs ", Hex(ip_b)));
    pt_qry_free_decoder(ref);
    return out;
  }
  status = a;
  uint64_t before = 0;
  uint64_t last_sync = UINT64_MAX;
  int resyncs = 0;
  int failed_syncs = 0;
  while (call < max_calls) {
    if (status < 0) {
      ++out.errors;
      if (status == -pte_eos && before >= bytes.size()) break;
      // The first PSB pattern at or after `before`; the same one again: forward.
      const uint8_t psb[] = {0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
                             0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82};
      auto it = std::search(bytes.begin() + static_cast<long>(std::min<uint64_t>(before, bytes.size())), bytes.end(),
                            psb, psb + sizeof psb);
      const uint64_t target = static_cast<uint64_t>(it - bytes.begin());
      if (resyncs++ % 2 == 0 || it == bytes.end() || target == last_sync) {
        what = "sync forward";
        a = pt_qry_sync_forward(ref, &ip_a);
        b = ours.SyncForward(&ip_b);
      } else {
        what = absl::StrCat("sync set ", target);
        a = pt_qry_sync_set(ref, &ip_a, target);
        b = ours.SyncSet(&ip_b, target);
        last_sync = target;
      }
      if (!same_code(a, b)) break;
      if (ip_a != ip_b) {
        differ(absl::StrCat("ip ", Hex(ip_a), " vs ", Hex(ip_b)));
        break;
      }
      if (!compare_state()) break;
      if (a == -pte_eos) break;
      if (a < 0 && ++failed_syncs > 10000) break;
      status = a;
      continue;
    }
    pt_qry_get_offset(ref, &before);
    if (status & pts_event_pending) {
      what = "event";
      if (!query_event()) break;
      a = a_event;
      ++out.events;
      if (!compare_state()) break;
      status = a;
      continue;
    }
    // Mostly conditional branches (as code has); a rejected query tries the other kind,
    // a few event queries with none pending check that error too.
    const uint64_t pick = random() % 100;
    bool cond = pick < 70;
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (pick >= 98 && attempt == 0) {
        what = "event (none pending)";
        const bool same = query_event();
        a = a_event;
        if (!same) break;
      } else if (cond) {
        int ta = -1, tb = -1;
        what = "cond branch";
        a = pt_qry_cond_branch(ref, &ta);
        b = ours.CondBranch(&tb);
        if (!same_code(a, b)) break;
        if (ta != tb) {
          differ(absl::StrCat("taken ", ta, " vs ", tb));
          break;
        }
      } else {
        ip_a = ip_b = 0x1234;
        what = "indirect branch";
        a = pt_qry_indirect_branch(ref, &ip_a);
        b = ours.IndirectBranch(&ip_b);
        if (!same_code(a, b)) break;
        if (ip_a != ip_b) {
          differ(absl::StrCat("ip ", Hex(ip_a), " vs ", Hex(ip_b)));
          break;
        }
      }
      if (!compare_state()) break;
      if (a != -pte_bad_query) break;
      cond = !cond;
    }
    if (!out.difference.empty()) break;
    status = a;
  }
  out.calls = call;
  pt_qry_free_decoder(ref);
  return out;
}

}  // namespace ptd::decoder::testing
