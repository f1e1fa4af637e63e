/* SPDX-License-Identifier: MIT */
/*
 * Slowdown of FFM stages 3 and 4 against a plain run, on the workloads and the simulated driver
 * (root, BPF), and the throughput of hashing in BPF. Not a test: it prints numbers.
 *
 *   build/bench/bench_stages [--reps N] [--iters N] [workload...]
 *
 * Per workload: N plain runs with nothing attached, then N runs at stage 3 with stage 3's probe
 * set attached, then N at stage 4 with stage 4's (attached once per stage: detaching costs the
 * kernel ~0.1 s per probe). The ratio is the workload's own LOOP_S (its main loop) at the stage
 * over the median plain LOOP_S; min and median over the runs. Hashing: xfer_big moves 5 x 80 MiB,
 * all hashed at stage 3; (stage-3 time - plain time) / bytes is the hashing rate seen by the
 * application (bpf_copy_from_user + the hash, in the thread that made the call).
 */
#include <getopt.h>

#include "tests/memtrace/harness.h"

static const char *const all[] = { "unnecessary_sync", "misplaced_sync", "free_in_loop",
				    "dup_transfer", "pageable_async", "managed_memset",
				    "sequence", "control" };

static int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

#define MAXW 16
#define MAXR 16

struct wres {
	double plain[MAXR], s[5][MAXR];
};

static double med(double *v, int n)
{
	double t[MAXR];

	memcpy(t, v, n * sizeof(*v));
	qsort(t, n, sizeof(*t), cmpd);
	return t[n / 2];
}

static double mn(const double *v, int n)
{
	double m = v[0];

	for (int i = 1; i < n; i++)
		m = v[i] < m ? v[i] : m;
	return m;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = { { "reps", required_argument, NULL, 'r' },
					      { "iters", required_argument, NULL, 'i' }, {} };
	const char *names[MAXW], *iters = "200";
	static struct wres res[MAXW];
	struct h_env e;
	char why[256] = "";
	int reps = 3, nw = 0, c, err;

	while ((c = getopt_long(argc, argv, "r:i:", opts, NULL)) != -1) {
		if (c == 'r')
			reps = atoi(optarg);
		else if (c == 'i')
			iters = optarg;
		else
			return 2;
	}
	if (reps < 1 || reps > MAXR)
		reps = 3;
	for (; optind < argc && nw < MAXW; optind++)
		names[nw++] = argv[optind];
	if (!nw)
		for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
			names[nw++] = all[i];
	err = h_setup(&e, why, sizeof(why));
	if (err < 0) {
		fprintf(stderr, "bench_stages: %s (%s)\n", why, strerror(-err));
		return 1;
	}
	printf("bench_stages: %d runs per stage, --iters %s, LOOP_S ratio vs the median plain run\n",
	       reps, iters);

	/* Plain runs first: with nothing attached, as a process outside ffm runs. */
	for (int stage = 0; stage <= 4; stage++) {
		if (stage == 1 || stage == 2)
			continue;
		if (stage && (err = h_attach(&e, stage)) < 0) {
			fprintf(stderr, "bench_stages: attach stage %d: %s\n", stage, strerror(-err));
			return 1;
		}
		for (int w = 0; w < nw; w++) {
			char path[PATH_MAX], key[64];
			char *av[] = { path, "--iters", (char *)iters, NULL };

			snprintf(path, sizeof(path), "%s/workloads/%s", e.build, names[w]);
			snprintf(key, sizeof(key), "bench-%s", names[w]);
			for (int r = 0; r < reps; r++) {
				struct h_result hr;
				double loop;

				err = h_run(&e, key, stage, av, &hr);
				loop = h_out_value(&hr, "LOOP_S");
				if (err < 0 || loop <= 0) {
					fprintf(stderr, "bench_stages: %s at stage %d: %s\n", names[w], stage,
						err < 0 ? strerror(-err) : "no LOOP_S");
					return 1;
				}
				if (stage)
					res[w].s[stage][r] = loop;
				else
					res[w].plain[r] = loop;
			}
		}
	}
	printf("%-18s %10s %16s %16s\n", "workload", "plain s", "stage 3 min/med", "stage 4 min/med");
	for (int w = 0; w < nw; w++) {
		double p = med(res[w].plain, reps);

		printf("%-18s %10.3f %7.2fx/%.2fx %8.2fx/%.2fx\n", names[w], p, mn(res[w].s[3], reps) / p,
		       med(res[w].s[3], reps) / p, mn(res[w].s[4], reps) / p, med(res[w].s[4], reps) / p);
	}

	/* Hashing in BPF: xfer_big at stage 3 vs plain. */
	{
		char path[PATH_MAX];
		char *av[] = { path, "80", NULL };
		double plain[MAXR], s3[MAXR];
		struct h_result hr;

		snprintf(path, sizeof(path), "%s/tests/memtrace/xfer_big", e.build);
		e.att = ffm_attachment__free(e.att);
		for (int r = 0; r < reps; r++) {
			if (h_run(&e, NULL, 0, av, &hr) < 0)
				return 1;
			plain[r] = hr.wall;
		}
		if (h_attach(&e, 3) < 0)
			return 1;
		for (int r = 0; r < reps; r++) {
			if (h_run(&e, "bench-xfer_big", 3, av, &hr) < 0)
				return 1;
			s3[r] = hr.wall;
		}
		double extra = med(s3, reps) - med(plain, reps), bytes = 5.0 * (80 << 20);

		printf("BPF hashing (xfer_big, 5 x 80 MiB): plain %.3f s, stage 3 %.3f s: %.2f GB/s\n",
		       med(plain, reps), med(s3, reps), extra > 0 ? bytes / extra / 1e9 : 0);
	}
	h_teardown(&e);
	return 0;
}
