# stages/: the model's benchmark (not a test: it takes seconds and ~1 GiB).
#   build/bench/bench_model [n_events] [threads] [--shuffle]
$(O)/bench/bench_model: $(O)/stages/bench/bench_model.o $(FFM_LIBS)
	$(call msg,LINK,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(FFM_LIBS) $(SYS_LIBS)

EXTRA_PROGS += $(O)/bench/bench_model
