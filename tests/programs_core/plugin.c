/* dlopen()ed by mt_target after a marker, so the recorder tests can check that the
 * MMAP2 of a library loaded at run time arrives after the marker. */
int ptd_core_plugin_answer(void) { return 42; }
