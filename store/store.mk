# store/: the ingest benchmark (not a test: it prints events/s, it asserts nothing).
#   make build/bench/bench_store && build/bench/bench_store [events] [repeats]
$(O)/bench/bench_store: $(O)/tests/store/bench_store.o $(FFM_LIBS)
	$(call msg,LINK,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(FFM_LIBS) $(SYS_LIBS)

EXTRA_PROGS += $(O)/bench/bench_store
