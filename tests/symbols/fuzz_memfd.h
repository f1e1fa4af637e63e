/* SPDX-License-Identifier: MIT */
/*
 * The libFuzzer targets of tests/symbols hand their input to the parsers as a file, the way
 * ffmd meets one: a memfd (a regular file without a name on disk) opened again by the parser
 * through /proc/self/fd/N. One memfd per process, rewritten for each input.
 */
#ifndef FFM_TESTS_SYMBOLS_FUZZ_MEMFD_H
#define FFM_TESTS_SYMBOLS_FUZZ_MEMFD_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* @path (>= 32 bytes) names a file holding exactly @data; aborts if it cannot. */
static inline void fuzz_memfd_write(const uint8_t *data, size_t size, char *path, size_t len)
{
	static int fd = -1;
	size_t done = 0;

	if (fd < 0 && (fd = memfd_create("ffm-fuzz-input", MFD_CLOEXEC)) < 0) {
		perror("memfd_create");
		abort();
	}
	if (ftruncate(fd, 0) < 0) {
		perror("ftruncate");
		abort();
	}
	while (done < size) {
		ssize_t w = pwrite(fd, data + done, size - done, (off_t)done);

		if (w <= 0) {
			perror("pwrite");
			abort();
		}
		done += (size_t)w;
	}
	snprintf(path, len, "/proc/self/fd/%d", fd);
}

#endif /* FFM_TESTS_SYMBOLS_FUZZ_MEMFD_H */
