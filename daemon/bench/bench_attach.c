// SPDX-License-Identifier: MIT
/*
 * What one uprobe attach costs ffmd (daemon/links.c attaches a wait probe per job process):
 * a wait probe (one uprobe_multi link, or a session) on driver file @path at its
 * cuCtxSynchronize entry, timed
 *   - for one process (pid filter) that has not mapped the file, after @idle_ms without an
 *     attach or detach ("first"), and again @gap_ms after it ("second");
 *   - system-wide, the same two ways;
 *   - a burst of @burst pid-filtered attaches back to back (mean);
 *   - the detaches.
 * Medians over @rounds rounds, in ms. Needs root (BPF, uprobes).
 *   build/bench/bench_attach PATH [rounds] [idle_ms] [burst] [gap_ms]
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "daemon/collector.h"
#include "symbols/ffm_driver.h"

enum { FIRST, SECOND, SYS_FIRST, SYS_SECOND, BURST, DETACH, NCOL };
static const char *const NAMES[NCOL] = { "pid first", "pid second", "system first",
					 "system second", "pid burst (each)", "detach (each)" };

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void idle(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* One attach of @p to @path for @pid (-1: system-wide), in ms; the link goes to *@a. */
static double timed_attach(struct ffm_collector *c, const char *path, pid_t pid,
			   const struct ffm_probe *p, struct ffm_attachment **a)
{
	uint64_t t0 = ffm_now_ns();
	int err = ffm_collector__attach(c, path, pid, p, 1, a);

	if (err < 0) {
		fprintf(stderr, "bench_attach: attach to %s: %s\n", path, strerror(-err));
		exit(1);
	}
	return (double)(ffm_now_ns() - t0) / 1e6;
}

static double timed_free(struct ffm_attachment *a)
{
	uint64_t t0 = ffm_now_ns();

	ffm_attachment__free(a);
	return (double)(ffm_now_ns() - t0) / 1e6;
}

/* One round: each column's figure into @row. @kids: processes that do not map the file. */
static void round_once(struct ffm_collector *c, const char *path, const struct ffm_probe *p,
		       const pid_t *kids, int burst, int idle_ms, int gap_ms, double *row)
{
	struct ffm_attachment *a[64] = { 0 };
	double det = 0;
	uint64_t t0;

	idle(idle_ms);
	row[FIRST] = timed_attach(c, path, kids[0], p, &a[0]);
	idle(gap_ms);
	row[SECOND] = timed_attach(c, path, kids[1], p, &a[1]);
	det += timed_free(a[0]) + timed_free(a[1]);
	idle(idle_ms);
	row[SYS_FIRST] = timed_attach(c, path, -1, p, &a[0]);
	idle(gap_ms);
	row[SYS_SECOND] = timed_attach(c, path, -1, p, &a[1]);
	det += timed_free(a[0]) + timed_free(a[1]);
	idle(idle_ms);
	t0 = ffm_now_ns();
	for (int i = 0; i < burst; i++)
		timed_attach(c, path, kids[i], p, &a[i]);
	row[BURST] = (double)(ffm_now_ns() - t0) / 1e6 / burst;
	for (int i = 0; i < burst; i++)
		det += timed_free(a[i]);
	row[DETACH] = det / (burst + 4);
}

int main(int argc, char **argv)
{
	int rounds = argc > 2 ? atoi(argv[2]) : 9, idle_ms = argc > 3 ? atoi(argv[3]) : 200;
	int burst = argc > 4 ? atoi(argv[4]) : 8, gap_ms = argc > 5 ? atoi(argv[5]) : 0;
	struct ffm_driver_sym sym;
	struct ffm_collector *c;
	struct ffm_driver *drv;
	pid_t kids[64];
	double *m[NCOL];
	int err;

	if (argc < 2 || rounds < 1 || burst < 2 || burst > 64 || idle_ms < 0 || gap_ms < 0) {
		fprintf(stderr, "usage: bench_attach PATH [rounds] [idle_ms] [burst 2-64] [gap_ms]\n");
		return 2;
	}
	if ((err = ffm_driver__open(argv[1], NULL, &drv)) < 0 ||
	    (err = ffm_driver__lookup(drv, "cuCtxSynchronize", &sym)) < 0) {
		fprintf(stderr, "bench_attach: %s: %s\n", argv[1], strerror(-err));
		return 1;
	}
	if ((err = ffm_collector__open(NULL, &c)) < 0) {
		fprintf(stderr, "bench_attach: the collector: %s\n", strerror(-err));
		return 1;
	}
	for (int i = 0; i < burst; i++) {
		kids[i] = fork();
		if (kids[i] == 0) {
			pause();
			_exit(0);
		}
		if (kids[i] < 0) {
			perror("bench_attach: fork");
			return 1;
		}
	}
	for (int k = 0; k < NCOL; k++)
		m[k] = calloc((size_t)rounds, sizeof(double));
	for (int r = 0; r < rounds; r++) {
		double row[NCOL];

		round_once(c, argv[1], &(struct ffm_probe){ .offset = sym.offset, .wait = true }, kids,
			   burst, idle_ms, gap_ms, row);
		for (int k = 0; k < NCOL; k++)
			m[k][r] = row[k];
	}
	printf("%s (%s mode, %d rounds, %d ms idle before each first, second %d ms after it, "
	       "burst of %d): median [min, max] ms\n", argv[1], ffm_collector__probe_mode(c), rounds,
	       idle_ms, gap_ms, burst);
	for (int k = 0; k < NCOL; k++) {
		qsort(m[k], (size_t)rounds, sizeof(double), cmp_double);
		printf("  %-18s %7.3f [%.3f, %.3f]\n", NAMES[k], m[k][rounds / 2], m[k][0],
		       m[k][rounds - 1]);
		free(m[k]);
	}
	for (int i = 0; i < burst; i++) {
		kill(kids[i], SIGKILL);
		waitpid(kids[i], NULL, 0);
	}
	ffm_collector__free(c);
	ffm_driver__free(drv);
	return 0;
}
