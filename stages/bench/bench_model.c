// SPDX-License-Identifier: MIT
/*
 * bench_model: builds a synthetic timeline (default 10M driver calls over 4 threads) and times
 * graph build + Figure 5 + the three groupings + one subsequence estimate, printing seconds and
 * peak RSS. Target: 10M events in <= 5 s and <= 1 GiB, the events array included.
 *
 *   bench_model [n_events] [threads] [--shuffle]
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "stages/ffm_model.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double peak_mib(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_maxrss / 1024.0;
}

static uint64_t rng = 0x853c49e6748fea9bULL;

static uint64_t rnd(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545F4914F6CDD1DULL;
}

/* A CUDA-like loop per thread: launches and async copies, every 8th call a synchronization;
 * ~10% of syncs unnecessary, ~5% misplaced, ~5% of copies duplicates. 1000 call sites, 100
 * folded functions. */
static void synth(struct ffm_event *ev, size_t n, unsigned threads)
{
	uint64_t t[64] = { 0 };

	for (size_t i = 0; i < n; i++) {
		unsigned tid = (unsigned)(i % threads);
		struct ffm_event *e = &ev[i];
		uint64_t r = rnd();

		memset(e, 0, sizeof(*e));
		t[tid] += 500 + r % 4000; /* CPU work between calls */
		e->start_ns = 1000000 + t[tid];
		e->tid = 1000 + tid;
		e->stack_id = (r >> 20) % 1000;
		e->fold_id = (uint32_t)(e->stack_id / 10);
		e->api_id = (uint32_t)((r >> 40) % 64);
		switch ((i / threads) % 8) {
		case 7:
			e->kind = FFM_CALL_SYNC;
			e->flags = FFM_EVENT_SYNC;
			e->wait_ns = 1000 + (r >> 8) % 200000;
			e->dur_ns = e->wait_ns + 2000;
			if ((r >> 32) % 100 < 10)
				e->problem = FFM_PROBLEM_UNNECESSARY_SYNC;
			else if ((r >> 32) % 100 < 15) {
				e->problem = FFM_PROBLEM_MISPLACED_SYNC;
				e->first_use_ns = (r >> 16) % 100000;
			}
			break;
		case 2:
		case 5:
			e->kind = FFM_CALL_TRANSFER;
			e->dur_ns = 3000 + (r >> 8) % 10000;
			if ((r >> 32) % 100 < 5)
				e->problem = FFM_PROBLEM_DUPLICATE_TRANSFER;
			break;
		default:
			e->kind = FFM_CALL_LAUNCH;
			e->dur_ns = 2000 + (r >> 8) % 3000;
			break;
		}
		t[tid] += e->dur_ns;
	}
}

int main(int argc, char **argv)
{
	size_t n = 10 * 1000 * 1000, n_groups[FFM_GROUP__MAX] = { 0 };
	unsigned threads = 4;
	bool shuffle = false;
	struct ffm_event *ev;
	struct ffm_graph *g = NULL;
	struct ffm_group *groups[FFM_GROUP__MAX] = { 0 };
	struct ffm_totals tot;
	uint64_t *ben, sub = 0;
	double t0, t_build, t_ben, t_grp[FFM_GROUP__MAX], t_sub, rss_events;
	int err, a = 1;
	static const char *gname[] = { "point", "fold", "sequence" };

	if (a < argc && argv[a][0] != '-')
		n = strtoull(argv[a++], NULL, 0);
	if (a < argc && argv[a][0] != '-')
		threads = (unsigned)strtoul(argv[a++], NULL, 0);
	if (a < argc && !strcmp(argv[a], "--shuffle"))
		shuffle = true;
	if (!threads || threads > 64) {
		fprintf(stderr, "bench_model: threads must be 1..64\n");
		return 2;
	}

	ev = malloc(n * sizeof(*ev));
	if (!ev) {
		fprintf(stderr, "bench_model: cannot allocate %zu events\n", n);
		return 1;
	}
	synth(ev, n, threads);
	if (shuffle)
		for (size_t i = n - 1; i > 0; i--) {
			size_t j = rnd() % (i + 1);
			struct ffm_event x = ev[i];
			ev[i] = ev[j];
			ev[j] = x;
		}
	rss_events = peak_mib();

	t0 = now();
	err = ffm_graph__build(ev, n, NULL, &g);
	t_build = now() - t0;
	if (err) {
		fprintf(stderr, "bench_model: build failed: %s\n", strerror(-err));
		return 1;
	}
	ben = malloc((ffm_graph__problem_count(g) + 1) * sizeof(*ben));
	t0 = now();
	err = ffm_model__benefit(g, ben, &tot);
	t_ben = now() - t0;
	if (err || !ben) {
		fprintf(stderr, "bench_model: benefit failed\n");
		return 1;
	}
	for (int h = 0; h < FFM_GROUP__MAX; h++) {
		t0 = now();
		err = ffm_model__group(g, (enum ffm_grouping)h, &groups[h], &n_groups[h]);
		t_grp[h] = now() - t0;
		if (err) {
			fprintf(stderr, "bench_model: %s grouping failed: %s\n", gname[h],
				strerror(-err));
			return 1;
		}
	}
	t0 = now();
	if (n_groups[FFM_GROUP_SEQUENCE]) {
		/* the longest sequence, its middle half */
		const struct ffm_group *best = &groups[FFM_GROUP_SEQUENCE][0];
		for (size_t i = 1; i < n_groups[FFM_GROUP_SEQUENCE]; i++)
			if (groups[FFM_GROUP_SEQUENCE][i].members > best->members)
				best = &groups[FFM_GROUP_SEQUENCE][i];
		ffm_model__subsequence(g, best, best->members / 4, best->members * 3 / 4, &sub);
	}
	t_sub = now() - t0;

	printf("events          %zu (%u threads%s), %zu nodes, %zu problems\n", n, threads,
	       shuffle ? ", shuffled" : "", ffm_graph__node_count(g), ffm_graph__problem_count(g));
	printf("build           %.3f s\n", t_build);
	printf("benefit         %.3f s  (wall %.3f s, waits %.3f s, sum %.3f s, max/thread %.3f s)\n",
	       t_ben, tot.wall_ns * 1e-9, tot.wait_ns * 1e-9, tot.sum_ns * 1e-9,
	       tot.max_chain_ns * 1e-9);
	for (int h = 0; h < FFM_GROUP__MAX; h++)
		printf("group %-9s %.3f s  (%zu groups)\n", gname[h], t_grp[h], n_groups[h]);
	printf("subsequence     %.6f s\n", t_sub);
	printf("total           %.3f s\n",
	       t_build + t_ben + t_grp[0] + t_grp[1] + t_grp[2] + t_sub);
	printf("peak RSS        %.0f MiB (events array alone: %.0f MiB)\n", peak_mib(), rss_events);

	for (int h = 0; h < FFM_GROUP__MAX; h++)
		free(groups[h]);
	free(ben);
	ffm_graph__free(g);
	free(ev);
	return 0;
}
