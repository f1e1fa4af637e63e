/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the control protocol's parser (daemon/proto.c), the code that reads
 * what any local user sends to ffmd. Built only by `make fuzz` (clang, -fsanitize=fuzzer,
 * address,undefined); run it on the checked-in corpus:
 *
 *     make fuzz && build/fuzz/fuzz_proto -max_total_time=60 tests/proto/corpus
 *
 * New inputs that find something belong in tests/proto/corpus/ (named as its README says),
 * where test_proto_corpus replays them under `make test`.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "tests/proto/proto_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *broken;
	int r;

	broken = proto_check(data, size, &r);
	if (broken) {
		fprintf(stderr, "ffm_proto_parse: %s (returned %d)\n", broken, r);
		abort();
	}
	return 0;
}
