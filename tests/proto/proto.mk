# libFuzzer targets, built only by `make fuzz` (clang; never part of `all` or `make test`):
#   $(O)/fuzz/fuzz_proto   daemon/proto.c's request parser (tests/proto/proto_check.h properties)
#   $(O)/fuzz/fuzz_json    common/json.c over jansson: the reader of ffmd's answers, the
#                          string sanitiser and writer
#   $(O)/fuzz/fuzz_driver, $(O)/fuzz/fuzz_ldcache
#                          the driver-file and ld.so.cache parsers (tests/symbols/fuzz.mk)
# `make fuzz-run FUZZ_TIME=60` runs each for FUZZ_TIME seconds from its seeds (FUZZ_SEEDS_<name>,
# made then) and checked-in corpus (FUZZ_CORPUS_<name>), with its dictionary if it has one
# (FUZZ_DICT_<name>). New inputs go to $(O)/fuzz/corpus-<name>, never into the checked-in
# corpus, and crashes to $(O)/fuzz/crash-*. FUZZ_TARGETS="driver ldcache" runs only those;
# FUZZ_ARGS adds libFuzzer options (e.g. -print_final_stats=1).
FUZZ_TIME   ?= 30
FUZZ_ARGS   ?=
FUZZ_CFLAGS := -g -O1 -std=gnu11 -D_GNU_SOURCE -I. -I$(O) \
	       -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
FUZZ_PROGS  := $(O)/fuzz/fuzz_proto $(O)/fuzz/fuzz_json
FUZZ_MAXLEN_proto := 8192
FUZZ_CORPUS_proto := tests/proto/corpus
FUZZ_MAXLEN_json  := 8192
FUZZ_CORPUS_json  := tests/proto/corpus

$(O)/fuzz/fuzz_proto: tests/proto/fuzz_proto.c tests/proto/proto_check.h daemon/proto.c daemon/proto.h
	$(call msg,FUZZ,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(FUZZ_CFLAGS) -o $@ tests/proto/fuzz_proto.c daemon/proto.c

$(O)/fuzz/fuzz_json: tests/proto/fuzz_json.c common/json.c common/ffm_json.h
	$(call msg,FUZZ,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(FUZZ_CFLAGS) -o $@ tests/proto/fuzz_json.c common/json.c -ljansson -lm

include tests/symbols/fuzz.mk

FUZZ_TARGETS ?= $(patsubst $(O)/fuzz/fuzz_%,%,$(FUZZ_PROGS))

fuzz: $(FUZZ_PROGS)

# Each target's seeds (FUZZ_SEEDS_<name>) are made only when it runs.
fuzz-run: fuzz $(foreach f,$(FUZZ_TARGETS),$(FUZZ_SEEDS_$(f)))
	$(Q)set -e; $(foreach f,$(FUZZ_TARGETS),mkdir -p $(O)/fuzz/corpus-$(f); \
		$(O)/fuzz/fuzz_$(f) -max_total_time=$(FUZZ_TIME) -max_len=$(FUZZ_MAXLEN_$(f)) \
			-artifact_prefix=$(O)/fuzz/ $(if $(FUZZ_DICT_$(f)),-dict=$(FUZZ_DICT_$(f))) \
			$(FUZZ_ARGS) \
			$(O)/fuzz/corpus-$(f) $(FUZZ_CORPUS_$(f));)

.PHONY: fuzz fuzz-run
