/* SPDX-License-Identifier: MIT */
/*
 * Ingest benchmark of store/: puts N synthetic events (default 5M) through ffm_store__put_event
 * with the default batching, flushes, and prints events/s; repeats R times (default 3) on a
 * fresh file each time and prints min and median; then streams the last run's events back in
 * time order and prints that rate and the peak RSS (the report reads 10M events in <= 1 GiB).
 * Not a test: it asserts nothing, so a slow CI
 * machine does not fail the build. Target: >= 1M events/s on a 2-core VM.
 *
 *   build/bench/bench_store [events] [repeats] [dir]
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store/ffm_store.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void rm_store(const char *dir)
{
	/* the owner's store (uid 1000), its published copy, their directories */
	static const char *const files[] = { "keys/bench@1000.db", "keys/bench@1000.db-wal",
					     "keys/bench@1000.db-shm", "done/1000/bench@1000.db" };
	static const char *const dirs[] = { "keys", "done/1000", "done" };
	char p[4200];

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, files[i]);
		unlink(p);
	}
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, dirs[i]);
		rmdir(p);
	}
}

static int count_cb(const struct ffm_store_event *ev, void *ctx)
{
	(*(long *)ctx)++;
	return 0;
}

static int one_run(const char *dir, long n, double *rate, bool read_back)
{
	struct ffm_store_opts o = { .sz = sizeof(o), .create = true };
	struct ffm_store_key k = { .key = "bench", .uid = 1000, .exe = "/bin/bench" };
	struct ffm_store_job job = { .job_id = "1", .uid = 1000, .state = FFM_JOB_RUNNING };
	struct ffm_store_run r = { .job_id = "1", .stage = 2 };
	struct ffm_store *s = NULL;
	struct ffm_store_event ev = { 0 };
	int64_t run, stacks[64];
	double t0, t1;
	int err;

	rm_store(dir);
	err = ffm_store__open_key(dir, &k, &o, &s);
	if (err)
		return err;
	err = ffm_store__job_begin(s, &job, NULL);
	if (!err)
		err = ffm_store__run_begin(s, &r, &run);
	for (int i = 0; !err && i < 64; i++) {
		struct ffm_store_frame f[3] = {
			{ .build_id = "abcd", .module = "/lib/libcuda.so.1", .offset = 0x1000 + i },
			{ .build_id = "ef01", .module = "/bin/app", .offset = 0x2000 + i * 16 },
			{ .build_id = "ef01", .module = "/bin/app", .offset = 0x3000 },
		};
		err = ffm_store__put_stack(s, 0x1234567890ull + i, f, 3, &stacks[i]);
		err = err < 0 ? err : 0;
	}
	if (!err)
		err = ffm_store__flush(s);
	if (err)
		goto out;

	ev.run = run;
	ev.tgid = 4242;
	t0 = now_s();
	for (long i = 0; i < n; i++) {
		/* a stack is one call path, so it fixes the api and the kind */
		ev.stack = stacks[i & 63];
		ev.kind = 1 + (uint32_t)((i & 63) % 7);
		ev.api = (uint32_t)((i & 63) % 40);
		ev.tid = 4242 + (uint32_t)(i & 7);
		/* mostly increasing, with some reordering as from several CPUs' ring buffers */
		ev.start_ns = 1000000000ull + (uint64_t)i * 1000 - (uint64_t)(i & 3) * 700;
		ev.dur_ns = 500 + (uint64_t)(i % 1000);
		ev.wait_ns = i & 1 ? ev.dur_ns / 2 : 0;
		ev.bytes = (uint64_t)(i & 0xffff) << 4;
		ev.dir = (uint32_t)(i % 4);
		ev.stream = i & 3;
		ev.src = 0x7f0000000000ull + (uint64_t)i * 64;
		ev.dst = 0x200000000ull + (uint64_t)i * 64;
		err = ffm_store__put_event(s, &ev, NULL);
		if (err)
			goto out;
	}
	err = ffm_store__flush(s);
	t1 = now_s();
	*rate = n / (t1 - t0);
	if (!err && read_back) {
		struct ffm_store_opts ro = { .sz = sizeof(ro), .read_only = true };
		struct ffm_store *r = NULL;
		struct rusage ru;
		long got = 0;

		err = ffm_store__open_key(dir, &k, &ro, &r);
		t0 = now_s();
		if (!err)
			err = ffm_store__for_each_event(r, run, count_cb, &got);
		t1 = now_s();
		ffm_store__free(r);
		getrusage(RUSAGE_SELF, &ru);
		if (!err)
			printf("read back: %ld events in time order, %.0f events/s, peak RSS %ld MiB\n",
			       got, got / (t1 - t0), ru.ru_maxrss / 1024);
	}
	if (!err && read_back) {
		/* What ffmd does when a job ends (off its loop): the copy readers open. */
		char copy[4200];
		struct stat st;
		uint32_t owner = 0;

		t0 = now_s();
		err = ffm_store__publish(ffm_store__path(s), dir, &owner);
		t1 = now_s();
		if (err == -ENOTSUP)
			err = 0;
		snprintf(copy, sizeof(copy), "%s/done/%u/bench@1000.db", dir, owner);
		if (!err && stat(copy, &st) == 0)
			printf("publish: a copy of %.0f MiB made in %.3f s (%.0f MiB/s)\n",
			       st.st_size / 1048576.0, t1 - t0, st.st_size / 1048576.0 / (t1 - t0));
	}
out:
	ffm_store__free(s);
	rm_store(dir);
	return err;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 5000000;
	int reps = argc > 2 ? atoi(argv[2]) : 3;
	char tmpl[] = "/tmp/ffm-bench-XXXXXX";
	const char *dir = argc > 3 ? argv[3] : NULL;
	double rates[64];
	int err;

	if (n <= 0 || reps <= 0 || reps > 64) {
		fprintf(stderr, "usage: bench_store [events>0] [repeats 1..64] [dir]\n");
		return 2;
	}
	if (!dir && !(dir = mkdtemp(tmpl))) {
		fprintf(stderr, "bench_store: mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	for (int i = 0; i < reps; i++) {
		err = one_run(dir, n, &rates[i], i == reps - 1);
		if (err) {
			fprintf(stderr, "bench_store: run %d failed: %s\n", i + 1,
				ffm_store__strerror(err));
			return 1;
		}
		printf("run %d: %ld events, %.0f events/s\n", i + 1, n, rates[i]);
		fflush(stdout);
	}
	qsort(rates, reps, sizeof(rates[0]), cmp_double);
	printf("events/s: min %.0f median %.0f (%ld events x %d runs)\n", rates[0],
	       rates[reps / 2], n, reps);
	if (dir == tmpl)
		rmdir(dir);
	return 0;
}
