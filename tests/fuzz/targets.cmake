# One line per fuzz target; the same list builds the libFuzzer binaries (PTD_FUZZ=ON) and
# the corpus/regression replay tests in the ordinary build (tests/fuzz_replay).
ptd_fuzzer(trace_meta DEPS ptd_common)
ptd_fuzzer(ground_truth DEPS ptd_recorder)
ptd_fuzzer(proc_maps DEPS ptd_recorder)
ptd_fuzzer(data_ring DEPS ptd_recorder)
ptd_fuzzer(ftf_reader DEPS ptd_ftf)
ptd_fuzzer(pt_config DEPS ptd_recorder)
ptd_fuzzer(decoder DEPS ptd_decoder ptd_image)
ptd_fuzzer(perf_data DEPS ptd_perfdata ptd_common)
ptd_fuzzer(sideband_records DEPS ptd_sideband)
ptd_fuzzer(packet_query DEPS ptd_decoder absl::strings)
