# daemon/: programs beside libdaemon.a.
#
#   $(O)/bench/bench_overhead        what ffm costs the measured programs, per stage, and the
#                                    ingest rate (bench/run-bench.sh; not a test)
#   $(O)/bench/bench_overhead_child  its call timer: dlopens a libcuda, so it is linked
#                                    against libc only and never -static (runs on GPU nodes),
#                                    never sanitized (it is a timer, and no test runs it)
BENCH_OVERHEAD := $(O)/bench/bench_overhead $(O)/bench/bench_overhead_child

$(O)/bench/bench_overhead: $(O)/bench/bench_overhead.o $(FFM_LIBS)
	$(call msg,LINK,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $< $(FFM_LIBS) $(SYS_LIBS)

$(O)/bench/bench_overhead_child: bench/bench_overhead_child.c
	$(call msg,LINK,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(FFM_CPPFLAGS) $(CPPFLAGS) $(CFLAGS) $(FFM_CFLAGS) -o $@ $< -ldl

EXTRA_PROGS += $(BENCH_OVERHEAD)

# The route table's lookups per record (not a test): build/bench/bench_routes [routes] [lookups]
$(O)/bench/bench_routes: $(O)/daemon/bench/bench_routes.o $(FFM_LIBS)
	$(call msg,LINK,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $< $(FFM_LIBS) $(SYS_LIBS)

EXTRA_PROGS += $(O)/bench/bench_routes

# One uprobe attach's price, per process and system-wide (not a test):
# build/bench/bench_attach PATH [rounds] [idle_ms] [burst]
$(O)/bench/bench_attach: $(O)/daemon/bench/bench_attach.o $(FFM_LIBS)
	$(call msg,LINK,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $< $(FFM_LIBS) $(SYS_LIBS)

EXTRA_PROGS += $(O)/bench/bench_attach
