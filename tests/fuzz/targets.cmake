# One line per fuzz target; the same list builds the libFuzzer binaries (PTD_FUZZ=ON) and
# the corpus/regression replay tests in the ordinary build (tests/fuzz_replay).
ptd_fuzzer(trace_meta DEPS ptd_common)
