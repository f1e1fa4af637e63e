# libFuzzer targets for the parsers of files a job's user may have written, which ffmd (root)
# reads (included by tests/proto/proto.mk; built by `make fuzz`, never by `all` or `make test`):
#   $(O)/fuzz/fuzz_driver    ffm_driver__open and every lookup on a driver file
#                            (symbols/driver.c, symbols/elfutil.c over libelf)
#   $(O)/fuzz/fuzz_ldcache   ffm_ld_cache_lookup on an ld.so.cache
# Both share tests/symbols/parse_check.h with test_parse_corpus, which replays
# tests/symbols/corpus under `make test`.
#
# Seeds are made when the fuzzers run, never checked in as large binaries:
#   $(O)/fuzz/seed-driver    three tiny libcuda.so.1 (~3 KiB, from tests/symbols/helper_libcuda.c:
#                            with .eh_frame_hdr at a non-zero base, without it, and with a
#                            "zPLR" CIE from tests/symbols/fuzz_seed_lsda.c) and the test helper
#                            libcuda.so.1.2.3 (18 KiB)
#   $(O)/fuzz/seed-ldcache   a copy of this machine's /etc/ld.so.cache
# fuzz_driver also gets a dictionary of the CFI and ELF tokens (tests/symbols/fuzz_driver.dict).
# Its inputs stay under 32 KiB: small files run four to six times as many inputs a second as
# ones the size of the simulated driver (88 KiB), which is therefore not a seed.
SYMBOLS_FUZZ_SRCS := symbols/driver.c symbols/elfutil.c symbols/maps.c
SYMBOLS_FUZZ_DEPS := $(SYMBOLS_FUZZ_SRCS) symbols/ffm_driver.h symbols/elfutil.h \
	symbols/ffm_maps.h tests/symbols/parse_check.h tests/symbols/fuzz_memfd.h

$(O)/fuzz/fuzz_driver $(O)/fuzz/fuzz_ldcache: $(O)/fuzz/fuzz_%: tests/symbols/fuzz_%.c \
		$(SYMBOLS_FUZZ_DEPS)
	$(call msg,FUZZ,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(FUZZ_CFLAGS) -DFFM_ELF_READ_CMD=ELF_C_READ -o $@ $< $(SYMBOLS_FUZZ_SRCS) -lelf

SYMBOLS_TINY_LDFLAGS := -O1 -fPIC -shared -nostdlib -Wl,-soname,libcuda.so.1 -Wl,--build-id \
	-Wl,-z,noseparate-code -Wl,-z,norelro -Wl,--hash-style=gnu

$(O)/fuzz/seed-driver/tiny-libcuda.so.1: tests/symbols/helper_libcuda.c
	$(call msg,SEED,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(SYMBOLS_TINY_LDFLAGS) -Wl,-Ttext-segment=0x200000 -o $@.tmp $< && \
		strip --strip-all -o $@ $@.tmp && rm -f $@.tmp

$(O)/fuzz/seed-driver/tiny-nohdr-libcuda.so.1: tests/symbols/helper_libcuda.c
	$(call msg,SEED,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(SYMBOLS_TINY_LDFLAGS) -Wl,--no-eh-frame-hdr -o $@.tmp $< && \
		strip --strip-all -o $@ $@.tmp && rm -f $@.tmp

$(O)/fuzz/seed-driver/tiny-eh-libcuda.so.1: tests/symbols/helper_libcuda.c tests/symbols/fuzz_seed_lsda.c
	$(call msg,SEED,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(SYMBOLS_TINY_LDFLAGS) -fexceptions -o $@.tmp $^ && \
		strip --strip-all -o $@ $@.tmp && rm -f $@.tmp

$(O)/fuzz/seed-driver/helper-libcuda.so.1.2.3: $(O)/tests/symbols/helpers/libcuda.so.1.2.3
	$(Q)cp -f $< $@

# The machine's cache, copied each run (it changes with what is installed): never checked in.
fuzz-seed-ldcache:
	$(Q)mkdir -p $(O)/fuzz/seed-ldcache && \
		{ [ ! -f /etc/ld.so.cache ] || cp -f /etc/ld.so.cache $(O)/fuzz/seed-ldcache/etc-ld.so.cache; }

FUZZ_PROGS += $(O)/fuzz/fuzz_driver $(O)/fuzz/fuzz_ldcache
FUZZ_SEEDS_driver  := $(addprefix $(O)/fuzz/seed-driver/,tiny-libcuda.so.1 \
	tiny-nohdr-libcuda.so.1 tiny-eh-libcuda.so.1 helper-libcuda.so.1.2.3)
FUZZ_SEEDS_ldcache := fuzz-seed-ldcache
FUZZ_MAXLEN_driver  := 32768
FUZZ_CORPUS_driver  := $(O)/fuzz/seed-driver tests/symbols/corpus/driver
FUZZ_DICT_driver    := tests/symbols/fuzz_driver.dict
# A machine's cache is tens of KiB (42 KiB where this was written).
FUZZ_MAXLEN_ldcache := 131072
FUZZ_CORPUS_ldcache := $(O)/fuzz/seed-ldcache tests/symbols/corpus/ldcache

.PHONY: fuzz-seed-ldcache
