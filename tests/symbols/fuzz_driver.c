/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the driver-file parser (symbols/driver.c, symbols/elfutil.c over
 * libelf): ffmd runs as root and opens libcuda.so.1 files that a job's user may have written.
 * The input is the file: ffm_driver__open reads it through /proc/self/fd/N of a memfd, then
 * tests/symbols/parse_check.h asks every lookup ffmd makes (exports, variants, FDE function
 * ranges, vaddr/offset conversions, build-id), at addresses that include the input's last
 * bytes. Built only by `make fuzz` (clang, -fsanitize=fuzzer,address,undefined), with libelf
 * reading the whole file into the heap (FFM_ELF_READ_CMD=ELF_C_READ) rather than mapping it, so
 * that AddressSanitizer sees a read one byte past the file's end; run it with its seeds:
 *
 *     make O=build-fuzz fuzz-run FUZZ_TARGETS=driver FUZZ_TIME=600
 *
 * An input that finds something belongs in tests/symbols/corpus/driver/ (README there), which
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
	broken = driver_check(path, data, size, &err);
	if (broken) {
		fprintf(stderr, "ffm_driver: %s (open returned %d)\n", broken, err);
		abort();
	}
	return 0;
}
