/* SPDX-License-Identifier: MIT */
/*
 * Tiny test framework for ffm's C tests: each TEST() is a case, main() runs them all and prints
 * TAP lines ("ok 3 - name", "not ok 4 - name", "ok 5 - name # SKIP reason"), which
 * tests/run-tests.sh adds up into the closing "N passed, N failed, N skipped" line.
 *
 * A case fails on the first failed ASSERT*; it skips by calling SKIP("reason"). Cases run in
 * the order they are defined, in one process (keep them independent).
 */
#ifndef FFM_TESTUTIL_H
#define FFM_TESTUTIL_H

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct ffm_test {
	const char *name;
	void (*fn)(void);
};

#define FFM_MAX_TESTS 256
static struct ffm_test ffm_tests[FFM_MAX_TESTS];
static int ffm_ntests;
static jmp_buf ffm_test_jmp;
static char ffm_skip_reason[256];

#define TEST(name)                                                                                 \
	static void test_##name(void);                                                             \
	__attribute__((constructor)) static void register_##name(void)                             \
	{                                                                                          \
		if (ffm_ntests < FFM_MAX_TESTS)                                                    \
			ffm_tests[ffm_ntests++] = (struct ffm_test){ #name, test_##name };         \
	}                                                                                          \
	static void test_##name(void)

static inline __attribute__((noreturn, format(printf, 3, 4))) void
ffm_test_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	fprintf(stdout, "# %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stdout, fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
	longjmp(ffm_test_jmp, 1);
}

#define FAIL(...) ffm_test_fail(__FILE__, __LINE__, __VA_ARGS__)
#define ASSERT(cond)                                                                               \
	do {                                                                                       \
		if (!(cond))                                                                       \
			FAIL("assertion failed: %s", #cond);                                       \
	} while (0)
#define ASSERT_MSG(cond, ...)                                                                      \
	do {                                                                                       \
		if (!(cond))                                                                       \
			FAIL(__VA_ARGS__);                                                         \
	} while (0)
#define ASSERT_EQ(a, b)                                                                            \
	do {                                                                                       \
		long long _a = (long long)(a), _b = (long long)(b);                                \
		if (_a != _b)                                                                      \
			FAIL("%s == %s: %lld != %lld", #a, #b, _a, _b);                            \
	} while (0)
#define ASSERT_OK(expr)                                                                            \
	do {                                                                                       \
		long long _r = (long long)(expr);                                                  \
		if (_r < 0)                                                                        \
			FAIL("%s failed: %lld (%s)", #expr, _r, strerror((int)-_r));               \
	} while (0)
#define ASSERT_STREQ(a, b)                                                                         \
	do {                                                                                       \
		const char *_a = (a), *_b = (b);                                                   \
		if (!_a || !_b || strcmp(_a, _b))                                                  \
			FAIL("%s == %s: \"%s\" != \"%s\"", #a, #b, _a ? _a : "(null)",            \
			     _b ? _b : "(null)");                                                  \
	} while (0)
#define ASSERT_NEAR(a, b, tol)                                                                     \
	do {                                                                                       \
		double _a = (double)(a), _b = (double)(b), _t = (double)(tol);                     \
		if (_a - _b > _t || _b - _a > _t)                                                  \
			FAIL("%s ~= %s: %g vs %g (tolerance %g)", #a, #b, _a, _b, _t);             \
	} while (0)
#define SKIP(...)                                                                                  \
	do {                                                                                       \
		snprintf(ffm_skip_reason, sizeof(ffm_skip_reason), __VA_ARGS__);                 \
		longjmp(ffm_test_jmp, 2);                                                          \
	} while (0)

/* The state letter of @pid from /proc/PID/stat ('T': stopped), 0 when it is gone. */
static inline char ffm_test_proc_state(pid_t pid)
{
	char path[64], buf[512], *rp;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	rp = strrchr(buf, ')');
	return rp && rp[1] == ' ' ? rp[2] : 0;
}

/* Path of a built artifact: $FFM_BUILD (set by the runner) or "build". */
static inline const char *ffm_test_build_dir(void)
{
	const char *b = getenv("FFM_BUILD");
	return b && *b ? b : "build";
}

/* Nonzero when this process may load BPF programs (root or CAP_BPF); used to skip BPF tests. */
int ffm_test_can_bpf(char *why, size_t len);
/* Removes @dir and everything under it (no shell); NULL: nothing. 0, or -errno. */
int ffm_test_rmtree(const char *dir);

/* Set when a case ended by FAIL or SKIP: no leak check at exit (tests/testutil.c). */
extern int ffm_test_cut_short;

static inline int ffm_test_main(void)
{
	volatile int failed = 0;
	const char *only = getenv("FFM_TEST_ONLY");

	printf("1..%d\n", ffm_ntests);
	for (int i = 0; i < ffm_ntests; i++) {
		int r;
		if (only && *only && !strstr(ffm_tests[i].name, only)) {
			printf("ok %d - %s # SKIP not selected by FFM_TEST_ONLY\n", i + 1,
			       ffm_tests[i].name);
			continue;
		}
		fflush(stdout);
		r = setjmp(ffm_test_jmp);
		if (r == 0) {
			ffm_tests[i].fn();
			printf("ok %d - %s\n", i + 1, ffm_tests[i].name);
		} else if (r == 2) {
			printf("ok %d - %s # SKIP %s\n", i + 1, ffm_tests[i].name, ffm_skip_reason);
			ffm_test_cut_short = 1;
		} else {
			printf("not ok %d - %s\n", i + 1, ffm_tests[i].name);
			failed++;
			ffm_test_cut_short = 1;
		}
		fflush(stdout);
	}
	return failed ? 1 : 0;
}

#define TEST_MAIN()                                                                                \
	int main(void)                                                                             \
	{                                                                                          \
		return ffm_test_main();                                                            \
	}

#endif /* FFM_TESTUTIL_H */
