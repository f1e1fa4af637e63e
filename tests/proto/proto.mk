# libFuzzer targets, built only by `make fuzz` (clang; never part of `all` or `make test`):
#   $(O)/fuzz/fuzz_proto   daemon/proto.c's request parser (tests/proto/proto_check.h properties)
#   $(O)/fuzz/fuzz_json    cli/json.c, the reader of ffmd's status answer
# `make fuzz-run FUZZ_TIME=60` runs each for FUZZ_TIME seconds from tests/proto/corpus (new
# inputs go to $(O)/fuzz/corpus-*, never into the checked-in corpus).
FUZZ_TIME   ?= 30
FUZZ_CFLAGS := -g -O1 -std=gnu11 -D_GNU_SOURCE -I. -I$(O) \
	       -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
FUZZ_PROGS  := $(O)/fuzz/fuzz_proto $(O)/fuzz/fuzz_json

$(O)/fuzz/fuzz_proto: tests/proto/fuzz_proto.c tests/proto/proto_check.h daemon/proto.c daemon/proto.h
	$(call msg,FUZZ,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(FUZZ_CFLAGS) -o $@ tests/proto/fuzz_proto.c daemon/proto.c

$(O)/fuzz/fuzz_json: tests/proto/fuzz_json.c cli/json.c cli/json.h
	$(call msg,FUZZ,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(FUZZ_CFLAGS) -o $@ tests/proto/fuzz_json.c cli/json.c -lm

fuzz: $(FUZZ_PROGS)

fuzz-run: fuzz
	$(Q)for f in proto json; do mkdir -p $(O)/fuzz/corpus-$$f && \
		$(O)/fuzz/fuzz_$$f -max_total_time=$(FUZZ_TIME) -max_len=8192 \
			$(O)/fuzz/corpus-$$f tests/proto/corpus || exit 1; done

.PHONY: fuzz fuzz-run
