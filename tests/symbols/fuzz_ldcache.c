/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the ld.so.cache parser (ffm_ld_cache_lookup, symbols/driver.c): ffmd
 * (root) reads a container's /etc/ld.so.cache, a file of that container's user, to find
 * libcuda.so.1. The input is the cache, handed over as a memfd opened through /proc/self/fd/N;
 * tests/symbols/parse_check.h says what must hold. Built only by `make fuzz`; run it with its
 * seeds (the machine's /etc/ld.so.cache, copied at run time, and tests/symbols/corpus/ldcache):
 *
 *     make O=build-fuzz fuzz-run FUZZ_TARGETS=ldcache FUZZ_TIME=600
 *
 * An input that finds something belongs in tests/symbols/corpus/ldcache/ (README there), which
 * test_parse_corpus replays under `make test`.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "tests/symbols/fuzz_memfd.h"
#include "tests/symbols/parse_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64];
	const char *broken;
	int err;

	fuzz_memfd_write(data, size, path, sizeof(path));
	broken = ldcache_check(path, &err);
	if (broken) {
		fprintf(stderr, "ffm_ld_cache_lookup: %s (returned %d)\n", broken, err);
		abort();
	}
	return 0;
}
