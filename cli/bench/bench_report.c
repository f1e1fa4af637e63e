/* SPDX-License-Identifier: MIT */
/*
 * bench_report: how long `ffmctl report` takes and how much memory it needs for a big run.
 * Not a test (it writes a ~1 GB store and takes a minute). Writes a synthetic store (tests/
 * report/synth.h: unnecessary syncs, two events per iteration) with stage 2's timeline of
 * N events and stage 3's verdicts, then runs `ffmctl report --json` on it R times as a child
 * and prints wall time and peak RSS (wait4's ru_maxrss) for each, min and median.
 *
 *   build/bench/bench_report [--events N] [--repeat R] [--dir DIR] [--keep]
 * Targets (issue 6): 10M events in <= 5 s and <= 1 GiB.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/report/synth.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "events", required_argument, NULL, 'n' }, { "repeat", required_argument, NULL, 'r' },
		{ "dir", required_argument, NULL, 'd' },    { "keep", no_argument, NULL, 'k' },
		{},
	};
	const char *build = getenv("FFM_BUILD");
	char dir[512] = "", ffmctl[600], cmd[2048];
	unsigned long long events = 10000000;
	double t_gen, wall[32], rss[32];
	int repeat = 3, c;
	bool keep = false;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'n': events = strtoull(optarg, NULL, 10); break;
		case 'r': repeat = atoi(optarg); break;
		case 'd': snprintf(dir, sizeof(dir), "%s", optarg); break;
		case 'k': keep = true; break;
		default: return 2;
		}
	}
	if (repeat < 1 || repeat > 32 || events < 2)
		return 2;
	snprintf(ffmctl, sizeof(ffmctl), "%s/ffmctl", build && *build ? build : "build");
	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "/var/tmp/ffm-bench-report-XXXXXX");
		if (!mkdtemp(dir)) {
			perror("mkdtemp");
			return 1;
		}
	}
	t_gen = now();
	{
		struct synth_opts o = {
			.state_dir = dir, .key = "bench", .job_id = "bench-1", .first_stage = 2,
			.stages = 3, .iters = (uint32_t)(events / 2), .fast = true,
			.scenarios = 1u << SYN_UNNECESSARY,
		};
		int err = synth__write(&o);

		if (err) {
			fprintf(stderr, "bench_report: cannot write the store in %s: %s\n", dir, strerror(-err));
			return 1;
		}
		printf("store: %llu stage-2 events + %llu stage-3 verdicts in %s, written in %.1f "
		       "s; expected benefit %.3f s\n",
		       events, events / 2, dir, now() - t_gen,
		       synth__expected(&o, SYN_UNNECESSARY) / 1e9);
	}
	for (int i = 0; i < repeat; i++) {
		struct rusage ru;
		double t0 = now();
		int status;
		pid_t pid = fork();

		if (pid == 0) {
			int fd = open("/dev/null", O_WRONLY);

			dup2(fd, 1);
			execl(ffmctl, ffmctl, "--state-dir", dir, "report", "bench-1", "--json", NULL);
			_exit(127);
		}
		if (pid < 0 || wait4(pid, &status, 0, &ru) < 0) {
			perror("fork/wait4");
			return 1;
		}
		wall[i] = now() - t0;
		rss[i] = ru.ru_maxrss / 1024.0;
		if (!WIFEXITED(status) || WEXITSTATUS(status)) {
			fprintf(stderr, "bench_report: %s report failed (status %#x)\n", ffmctl, status);
			return 1;
		}
		printf("report %d: %.2f s, peak RSS %.0f MiB\n", i + 1, wall[i], rss[i]);
	}
	qsort(wall, repeat, sizeof(double), cmp_d);
	qsort(rss, repeat, sizeof(double), cmp_d);
	printf("report of %llu events: time min %.2f s median %.2f s (target <= 5 s); peak RSS min "
	       "%.0f MiB median %.0f MiB (target <= 1024 MiB)\n",
	       events, wall[0], wall[repeat / 2], rss[0], rss[repeat / 2]);
	if (!keep) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd))
			fprintf(stderr, "bench_report: could not remove %s\n", dir);
	}
	return 0;
}
