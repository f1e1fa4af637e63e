# Stages 3-4 (daemon/memtrace.c, bpf/ffm_hash.h): programs beside the libraries.
#
#   $(O)/bench/bench_stages           slowdown of each stage vs a plain run, hashing GB/s (not a test)
#   $(O)/bench/bench_hash             the content hash's throughput in user space (not a test)
#   $(O)/tests/memtrace/xfer_big      a CUDA driver-API program that test_stages34 runs
#
# Included before tests/fakecuda/fakecuda.mk and workloads.mk: their variables are used in
# recipes only (expanded late); the simulated driver is named by its path.

MEMTRACE_PROGS := $(O)/bench/bench_stages $(O)/bench/bench_hash $(O)/tests/memtrace/xfer_big

$(O)/bench/bench_stages: $(O)/tests/memtrace/bench_stages.o $(FFM_LIBS)
	$(call msg,LINK,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $< $(FFM_LIBS) $(SYS_LIBS)

$(O)/bench/bench_hash: $(O)/tests/memtrace/bench_hash.o $(FFM_LIBS)
	$(call msg,LINK,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $< $(FFM_LIBS) $(SYS_LIBS)

$(O)/tests/memtrace/xfer_big: tests/memtrace/xfer_big.c $(O)/fakecuda/libcuda.so.1
	$(call msg,LINK,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(WL_CPPFLAGS) $(WL_CFLAGS) -o $@ $< $(WL_LDLIBS)

# The test runs it.
$(O)/tests/memtrace/test_stages34: | $(O)/tests/memtrace/xfer_big

EXTRA_PROGS += $(MEMTRACE_PROGS)
