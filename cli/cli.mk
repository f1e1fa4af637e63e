# cli/: the report's test and benchmark support.
#   build/tests/ffm-synth          synthetic stores with known answers (tests/report/synth.h)
#   build/bench/bench_report       report time and peak RSS for a 10M-event run (not a test)
# The report's unit tests (tests/report/test_*.c) link the synthesizer besides the ffm
# libraries (the analysis is one of them, analysis/).
REPORT_TEST_OBJS := $(O)/tests/report/synth.o

$(O)/tests/ffm-synth: $(O)/tests/report/synth_main.o $(O)/tests/report/synth.o $(FFM_LIBS)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $(filter %.o,$^) $(FFM_LIBS) $(SYS_LIBS)

$(O)/bench/bench_report: $(O)/cli/bench/bench_report.o $(O)/tests/report/synth.o $(FFM_LIBS)
	$(call msg,LINK,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $(filter %.o,$^) $(FFM_LIBS) $(SYS_LIBS)

$(patsubst tests/%.c,$(O)/tests/%,$(wildcard tests/report/test_*.c)): $(REPORT_TEST_OBJS)
$(O)/tests/report/%: FFM_LDFLAGS += $(REPORT_TEST_OBJS)

EXTRA_PROGS += $(O)/tests/ffm-synth $(O)/bench/bench_report
