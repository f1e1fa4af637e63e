# Test binaries: every tests/<dir>/test_*.c becomes $(O)/tests/<dir>/test_*, linked with
# tests/testutil.c, all ffm libraries and the system libraries. Shell tests
# (tests/<dir>/test_*.sh) are run as they are. tests/run-tests.sh runs both.
TEST_SRCS := $(wildcard tests/*/test_*.c)
TEST_BINS := $(patsubst tests/%.c,$(O)/tests/%,$(TEST_SRCS))
TESTUTIL_OBJ := $(O)/tests/testutil.o

$(O)/tests/%: $(O)/tests/%.o $(TESTUTIL_OBJ) $(FFM_LIBS)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $< $(TESTUTIL_OBJ) $(FFM_LIBS) $(SYS_LIBS)
