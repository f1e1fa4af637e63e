/* SPDX-License-Identifier: MIT */
/*
 * What must hold whatever bytes a driver file or an ld.so.cache holds: ffmd (root) parses both
 * although a job's user may have written them. Shared by the libFuzzer targets
 * (tests/symbols/fuzz_driver.c, fuzz_ldcache.c) and the replay of tests/symbols/corpus under
 * `make test` (tests/symbols/test_parse_corpus.c), so a saved input is checked the same way.
 *
 * driver_check() opens @path with ffm_driver__open and, when that succeeds, asks everything
 * ffmd asks of a driver: every exported name, its variants, the function around each export by
 * vaddr and by file offset, the conversions, and the same for a few addresses from @extra (the
 * fuzzer's bytes, so that it can steer them). ldcache_check() does ffm_ld_cache_lookup for
 * "libcuda.so.1". Each returns NULL, or which property broke; *err is the open/lookup result.
 * A crash, a leak or UB is reported by the sanitizers of the program that calls them.
 */
#ifndef FFM_TESTS_SYMBOLS_PARSE_CHECK_H
#define FFM_TESTS_SYMBOLS_PARSE_CHECK_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "symbols/ffm_driver.h"

/* At most this many exports are followed into func_at (an .eh_frame walk is linear). */
#define PARSE_CHECK_MAX_SYMS 64

/* The function found for @vaddr must contain it, and its entry must be in the file. */
static inline const char *parse_check_range(const struct ffm_driver *d, uint64_t vaddr,
					     const struct ffm_func_range *r)
{
	uint64_t off;

	if (vaddr < r->entry_vaddr || vaddr - r->entry_vaddr >= r->size)
		return "func_at: the range found does not contain the address";
	if (ffm_driver__vaddr_to_offset(d, r->entry_vaddr, &off) || off != r->entry_offset)
		return "func_at: entry_offset is not the entry's file offset";
	return NULL;
}

static inline const char *parse_check_addr(const struct ffm_driver *d, uint64_t a)
{
	struct ffm_func_range r;
	uint64_t off, va;
	const char *broken;

	if (ffm_driver__func_at(d, a, &r) == 0 && (broken = parse_check_range(d, a, &r)))
		return broken;
	if (ffm_driver__vaddr_to_offset(d, a, &off) == 0 && ffm_driver__offset_to_vaddr(d, off, &va))
		return "vaddr_to_offset gave an offset that offset_to_vaddr refuses";
	if (ffm_driver__offset_to_vaddr(d, a, &va) == 0) {
		if (ffm_driver__vaddr_to_offset(d, va, &off))
			return "offset_to_vaddr gave a vaddr that vaddr_to_offset refuses";
		if (ffm_driver__func_at_offset(d, a, &r) == 0 && (broken = parse_check_range(d, va, &r)))
			return broken;
	}
	return NULL;
}

static inline const char *driver_check(const char *path, const uint8_t *extra, size_t extra_len,
				       int *err)
{
	static const char *const names[] = { "cuInit", "cuCtxSynchronize", "cuMemcpyDtoH",
					     "cuMemcpyDtoH_v2", "cuLaunchKernel", "cu", "" };
	struct ffm_driver_opts o = { .sz = sizeof(o), .display_path = "/usr/lib/libcuda.so.580.1" };
	struct ffm_driver_sym sym, s2, var[4];
	struct ffm_driver *d;
	const char *broken = NULL, *bid;
	uint64_t dev, ino;
	size_t n;

	*err = ffm_driver__open(path, &o, &d);
	if (*err) {
		if (d)
			return "open failed but returned a driver";
		return *err < 0 ? NULL : "open returned a positive value";
	}
	bid = ffm_driver__build_id(d);
	if (!bid || strlen(bid) > 128 || strlen(bid) % 2 || strspn(bid, "0123456789abcdef") != strlen(bid))
		broken = "build-id is not lower-case hex of at most 64 bytes";
	else if (!ffm_driver__version(d) || !ffm_driver__path(d))
		broken = "no version or path";
	ffm_driver__dev_ino(d, &dev, &ino);
	n = ffm_driver__sym_count(d);
	for (size_t i = 0; !broken && i < n; i++) {
		uint64_t off;

		if (ffm_driver__sym(d, i, &sym))
			broken = "sym(i) fails below sym_count";
		else if (!sym.name || strncmp(sym.name, "cu", 2))
			broken = "an export that is not cu*";
		else if (i && ffm_driver__sym(d, i - 1, &s2) == 0 && strcmp(s2.name, sym.name) > 0)
			broken = "exports not sorted by name";
		else if (ffm_driver__lookup(d, sym.name, &s2) || strcmp(s2.name, sym.name))
			broken = "lookup does not find an export by its own name";
		else if (ffm_driver__variants(d, sym.name, var, 4) < 1)
			broken = "an export is not a variant of itself";
		else if (ffm_driver__vaddr_to_offset(d, sym.vaddr, &off) || off != sym.offset)
			broken = "an export's offset is not its vaddr's";
		else if (i < PARSE_CHECK_MAX_SYMS)
			broken = parse_check_addr(d, sym.vaddr);
	}
	if (!broken && ffm_driver__sym(d, n, &sym) != -ERANGE)
		broken = "sym(sym_count) does not fail";
	for (size_t i = 0; !broken && i < sizeof(names) / sizeof(names[0]); i++) {
		int v = ffm_driver__variants(d, names[i], var, 4);

		if (v < 0 || (size_t)v > n)
			broken = "variants counts more than there are exports";
		else if (ffm_driver__lookup(d, names[i], &sym) == 0 && strcmp(sym.name, names[i]))
			broken = "lookup found another name";
	}
	/* Addresses the input chooses: its last bytes, 8 at a time, and each +/- 1. */
	for (size_t i = 0; !broken && i < 4 && extra_len >= 8 * (i + 1); i++) {
		uint64_t a;

		memcpy(&a, extra + extra_len - 8 * (i + 1), 8);
		for (int k = -1; !broken && k <= 1; k++)
			broken = parse_check_addr(d, a + (uint64_t)k);
	}
	for (uint64_t a = 0; !broken && a < 0x10000; a += 0x1000)
		broken = parse_check_addr(d, a);
	ffm_driver__free(d);
	return broken;
}

static inline const char *ldcache_check(const char *path, int *err)
{
	const char *broken = NULL;
	char **paths = (char **)1;
	size_t n = 1;

	*err = ffm_ld_cache_lookup(path, "libcuda.so.1", &paths, &n);
	if (*err)
		return *err > 0 ? "lookup returned a positive value" :
		       paths || n ? "lookup failed but returned paths" : NULL;
	if (!n != !paths)
		broken = "paths and their count disagree";
	for (size_t i = 0; i < n; i++) {
		if (!paths[i])
			broken = "a NULL path";
		free(paths[i]);
	}
	free(paths);
	return broken;
}

#endif /* FFM_TESTS_SYMBOLS_PARSE_CHECK_H */
