# analysis/: libanalysis.a is built from analysis/*.c by the top-level Makefile. Its tests
# (tests/analysis/test_*.c) also use the synthetic stores of tests/report/synth.h.
ANALYSIS_TEST_OBJS := $(O)/tests/report/synth.o

$(patsubst tests/%.c,$(O)/tests/%,$(wildcard tests/analysis/test_*.c)): $(ANALYSIS_TEST_OBJS)
$(O)/tests/analysis/%: FFM_LDFLAGS += $(ANALYSIS_TEST_OBJS)
