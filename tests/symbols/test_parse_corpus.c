/* SPDX-License-Identifier: MIT */
/*
 * Replays tests/symbols/corpus (README there) through the parsers of files a job's user may
 * have written: every file of driver/ through ffm_driver__open and every lookup
 * (tests/symbols/parse_check.h, as the libFuzzer target fuzz_driver asks them), every file of
 * ldcache/ through ffm_ld_cache_lookup (as fuzz_ldcache). Files named ok-* must parse,
 * bad-<ERRNO>-* must fail with that error, any other name may do either; none may crash, leak
 * or break a property (`make sanitize` runs this with ASan and UBSan).
 */
#include <dirent.h>

#include "tests/symbols/parse_check.h"
#include "tests/testutil.h"

/*
 * libelf reads each file into one heap block of its size here, as in the fuzzer, rather than
 * mapping it: under `make sanitize` a read one byte past a file's end is then a heap overflow
 * that ASan reports, where past a mapping's end it is usually a silent read of the next page.
 * This copy of elfutil.c defines every ffm_elf_* function, so libsymbols.a's is not linked.
 */
#define FFM_ELF_READ_CMD ELF_C_READ
#include "symbols/elfutil.c"

#define CORPUS "tests/symbols/corpus"

static const struct {
	const char *name;
	int err;
} errnos[] = {
	{ "ENOEXEC", ENOEXEC }, { "ENODATA", ENODATA }, { "EINVAL", EINVAL },
	{ "EFBIG", EFBIG },     { "ENOENT", ENOENT },
};

/* 1: any result; 0: success; <0: that error. */
static int wanted(const char *name)
{
	if (!strncmp(name, "ok-", 3))
		return 0;
	for (size_t i = 0; i < sizeof(errnos) / sizeof(errnos[0]); i++) {
		size_t n = strlen(errnos[i].name);

		if (!strncmp(name, "bad-", 4) && !strncmp(name + 4, errnos[i].name, n) &&
		    name[4 + n] == '-')
			return -errnos[i].err;
	}
	ASSERT_MSG(strncmp(name, "bad-", 4), "%s: unknown errno in the name (see the corpus README)",
		   name);
	return 1;
}

static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long sz;

	if (f && fseek(f, 0, SEEK_END) == 0 && (sz = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (buf = malloc((size_t)sz + 1)) && fread(buf, 1, (size_t)sz, f) == (size_t)sz)
		*len = (size_t)sz;
	else {
		free(buf);
		buf = NULL;
	}
	if (f)
		fclose(f);
	return buf;
}

/* Every file of CORPUS/@sub; returns how many. */
static int replay(const char *sub, bool driver)
{
	char dir[256];
	DIR *d;
	struct dirent *de;
	int files = 0;

	snprintf(dir, sizeof(dir), "%s/%s", CORPUS, sub);
	d = opendir(dir);
	ASSERT_MSG(d, "%s: %s (run from the repository root)", dir, strerror(errno));
	while ((de = readdir(d))) {
		char path[600];
		const char *broken;
		uint8_t *buf = NULL;
		size_t len = 0;
		int r, want;

		if (de->d_name[0] == '.' || !strcmp(de->d_name, "README.md"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		want = wanted(de->d_name);
		if (driver) {
			/* The fuzzer's addresses come from the input's last bytes: the same here. */
			buf = slurp(path, &len);
			ASSERT_MSG(buf, "cannot read %s", path);
			broken = driver_check(path, buf, len, &r);
			free(buf);
		} else {
			broken = ldcache_check(path, &r);
		}
		printf("# %s/%s: %d%s%s\n", sub, de->d_name, r, broken ? ": " : "",
		       broken ? broken : "");
		ASSERT_MSG(!broken, "%s/%s: %s (returned %d)", sub, de->d_name, broken, r);
		ASSERT_MSG(want == 1 || r == want, "%s/%s: returned %d (%s), the name says %d", sub,
			   de->d_name, r, strerror(-r), want);
		files++;
	}
	closedir(d);
	return files;
}

TEST(driver_corpus_replays)
{
	ASSERT(replay("driver", true) >= 1);
}

TEST(ldcache_corpus_replays)
{
	ASSERT(replay("ldcache", false) >= 1);
}

TEST_MAIN()
