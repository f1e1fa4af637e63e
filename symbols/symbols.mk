# symbols/: programs beside libsymbols.a (which the top-level Makefile builds from symbols/*.c).
#
#   $(O)/ffm-calib-probe            the calibration program (symbols/calib/): dlopens a libcuda
#                                   given on its command line; linked against libc only, never
#                                   -static and without LDFLAGS, so it runs on the GPU nodes;
#                                   no tail calls, so its own frame stays under each driver call;
#                                   sanitized under SANITIZE=1 like the rest of ffm's code
#   $(O)/bench/bench_symbols        symbolization throughput (not a test)
#   $(O)/tests/symbols/helpers/...  what tests/symbols/test_* need

CALIB_PROBE := $(O)/ffm-calib-probe
SYMBOLS_HELPERS := $(O)/tests/symbols/helpers/libcuda.so.1.2.3

$(CALIB_PROBE): symbols/calib/ffm-calib-probe.c $(SAN_STAMP)
	$(call msg,LINK,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(FFM_CPPFLAGS) $(CPPFLAGS) $(CFLAGS) $(FFM_CFLAGS) $(SAN_LDFLAGS) -fno-optimize-sibling-calls \
		-pthread -o $@ $<

$(O)/bench/bench_symbols: $(O)/symbols/bench/bench_symbols.o $(FFM_LIBS)
	$(call msg,LINK,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $< $(FFM_LIBS) $(SYS_LIBS)

# A stand-in libcuda with exported cu* variants, linked at a non-zero base so that symbol
# addresses and file offsets differ (what ffm_driver must convert through PT_LOAD). Never
# sanitized: it stands for the real, uninstrumented driver.
$(O)/tests/symbols/helpers/libcuda.so.1.2.3: tests/symbols/helper_libcuda.c
	$(call msg,LINK,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(FFM_CPPFLAGS) $(CPPFLAGS) $(CFLAGS) $(FFM_CFLAGS) -fPIC -shared -Wl,-soname,libcuda.so.1 \
		-Wl,-Ttext-segment=0x200000 -Wl,--build-id -o $@ $<

# The unwinding test must see functions without frame pointers.
$(O)/tests/symbols/test_stack.o: FFM_CFLAGS += -fomit-frame-pointer

EXTRA_PROGS += $(CALIB_PROBE) $(O)/bench/bench_symbols $(SYMBOLS_HELPERS)
