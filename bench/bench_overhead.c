/* SPDX-License-Identifier: MIT */
/*
 * bench_overhead: what ffm costs the programs it measures, and how fast it stores records.
 * Not a test: it prints numbers, side by side, from one run (bench/run-bench.sh wraps it).
 *
 *   bench_overhead [--driver PATH] [--state-dir DIR] [--reps N] [--calls N]
 *                  [--workload PATH] [--ptx FILE] [--ingest-events N] [--parts 123]
 *
 * How instrumented and plain runs are told apart without attaching and detaching probes
 * between them (each detach costs the kernel an RCU grace period): the driver file is copied
 * three times into a scratch directory, byte for byte: "plain" carries no probe, "s1" the
 * stage-1 probe (the wait function), "s2" the stage-2 set (wait function + every synchronizing,
 * transfer, alloc, free, memset and launch entry point). A program picks its copy with
 * LD_LIBRARY_PATH. Modes, interleaved in each repetition so machine noise hits all alike:
 *   plain      copy "plain", process not tracked                    (no ffm)
 *   untracked  copy "s2", process not tracked, a stage-2 job active (a process outside the jobs,
 *              system-wide probes: FFM_PROBE_SCOPE=system or a kernel without per-process scope)
 *   untr-pp    copy "s2p", process not tracked; the stage-2 set is attached to the copy for
 *              another process only (ffmd's per-process scope: the kernel plants no breakpoint
 *              in this one)
 *   bare       copy "s1b": the wait function probed with a program that does nothing but ask
 *              for the return (the kernel's price of a probe pair: stage 1 minus it is ffm's)
 *   stage1     copy "s1", process in a stage-1 job
 *   stage2     copy "s2", process in a stage-2 job
 *   stage2+q   copy "s2q", process in a stage-2 job, the stage-1 list's queries probed too (as
 *              stage 2 did before it left them out: what that saves per query call)
 * The collector's records are consumed and stored by a thread doing what ffmd does (a job run
 * per stage: recorder + SQLite store), so its CPU use competes as it would.
 *
 * 1. Per-call cost: a child program (bench_overhead_child, beside this one) dlopens the copy and
 *    times N calls
 *    of each kind, one by one: cuCtxSynchronize on an idle GPU (enters the wait function),
 *    cuLaunchKernel and cuMemcpyHtoDAsync_v2 of 4 bytes (traced at stage 2), cuStreamQuery (no
 *    probe at any stage: shows the noise floor); then stage 2's cost per driver function kind:
 *    cuStreamSynchronize (idle), cuMemcpyHtoD_v2 of 4 bytes, cuMemsetD32Async of 4 bytes, a
 *    cuMemAlloc_v2 + cuMemFree_v2 pair, and the queries cuModuleGetFunction, cuFuncGetAttribute
 *    and cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags (the last two where the driver
 *    has them) that a stage-1 list names (S1_LIST). Overhead = mode - plain, per call, from the
 *    medians (and the minima) over the repetitions. Then ffm's own share of a stage-1 wait,
 *    twice: stage1 - bare, and the wait programs' run time from the kernel's BPF statistics
 *    (the second is free of the traps' noise).
 * 2. Slowdown of a sync-heavy program: tests/workloads/unnecessary_sync with 100 us kernels and
 *    100 us of CPU work per iteration (about 5k syncs/s), its LOOP_S per mode.
 * 3. Ingest: the records of the stage-1 and stage-2 runs (captured on the way) replayed through
 *    a fresh job run (recorder + store) until N events: events/s of ffmd's path from decoded
 *    record to committed SQLite row, and the drops of the live runs.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "daemon/apis.h"
#include "daemon/collector.h"
#include "daemon/driver_setup.h"
#include "daemon/jobrun.h"
#include "daemon/probes.h"
#include "daemon/resolve.h"
#include "stages/ffm_plan.h"
#include "store/ffm_store.h"
#include "symbols/ffm_driver.h"
#include "symbols/ffm_stack.h"

enum { M_PLAIN, M_UNTRACKED, M_UNTRACKED_PP, M_BARE, M_S1, M_S2, M_S2Q, M__N };
static const char *const MODE_NAME[M__N] = { "plain", "untracked", "untr-pp", "bare", "stage1", "stage2",
					     "stage2+q" };
static const char *const MODE_DIR[M__N] = { "plain", "s2", "s2p", "s1b", "s1", "s2", "s2q" };
/* As bench_overhead_child.c numbers them. */
enum { C_SYNC, C_LAUNCH, C_HTOD, C_QUERY, C_SSYNC, C_HTOD_SYNC, C_MEMSET, C_ALLOC_FREE, C_GETFN,
       C_FATTR, C_OCC, C__N };
static const char *const CALL_NAME[C__N] = {
	"cuCtxSynchronize (idle)", "cuLaunchKernel", "cuMemcpyHtoDAsync 4 B", "cuStreamQuery (unprobed)",
	"cuStreamSynchronize (idle)", "cuMemcpyHtoD 4 B", "cuMemsetD32Async 4 B", "cuMemAlloc+Free 256 B",
	"cuModuleGetFunction", "cuFuncGetAttribute", "cuOccupancyMaxActive...",
};
/* The stage-1 list stage2 and stage2+q get: explicit syncs and a copy, as for any program, and
 * the queries PyTorch's list holds (their first call loads a module: it waits). stage2 leaves
 * the queries out (ffm_api_is_query), stage2+q probes them (FFM_PROBE_SYNC_QUERIES). */
static const char *const S1_LIST[] = { "cuCtxSynchronize", "cuStreamSynchronize", "cuMemcpyHtoD",
				       "cuModuleGetFunction", "cuFuncGetAttribute", "cuKernelGetFunction",
				       "cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags" };
#define S2_API                                                                                     \
	(FFM_PROBE_SYNC_FUNCS | FFM_PROBE_TRANSFER | FFM_PROBE_ALLOC | FFM_PROBE_FREE |            \
	 FFM_PROBE_MEMSET | FFM_PROBE_LAUNCH)

static double now_s(void)
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

static double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_d);
	return n ? v[n / 2] : 0;
}

/* ---- the measuring side ----------------------------------------------------------------- */

struct bench {
	char child[PATH_MAX], dir[PATH_MAX], state[PATH_MAX], ptx[PATH_MAX], workload[PATH_MAX];
	char driver[PATH_MAX];
	struct ffm_collector *col;
	struct ffm_symbolizer *sym;
	struct ffm_apis *apis;
	struct ffm_ready_driver rd;
	struct ffm_attachment *att_s1, *att_bare, *att_s2_wait, *att_s2_api, *att_pp_wait, *att_pp_api;
	struct ffm_attachment *att_s2q_wait, *att_s2q_api;
	struct ffm_jobrun *jr[2]; /* slot 0: stage 1, slot 1: stage 2 */
	pthread_t consumer;
	pthread_mutex_t lock;     /* the job runs: consumer thread vs. main */
	volatile bool stop;
	uint64_t records;
	/* Captured records for the ingest replay. */
	unsigned char *cap;
	size_t cap_len, cap_size;
};

static int on_record(void *ctx, const void *rec, size_t size)
{
	struct bench *b = ctx;
	const struct ffm_rec_hdr *h = rec;

	b->records++;
	if (h->job < 2 && b->jr[h->job])
		ffm_jobrun__record(b->jr[h->job], rec, size);
	/* Keep up to 64 MiB of records (stacks included) for the replay. */
	if (b->cap_len + size + 8 <= b->cap_size) {
		uint64_t sz = size;

		memcpy(b->cap + b->cap_len, &sz, 8);
		memcpy(b->cap + b->cap_len + 8, rec, size);
		b->cap_len += 8 + size;
	}
	return 0;
}

static void *consume_loop(void *arg)
{
	struct bench *b = arg;

	while (!b->stop) {
		pthread_mutex_lock(&b->lock);
		ffm_collector__consume(b->col);
		pthread_mutex_unlock(&b->lock);
		usleep(10000); /* ffmd's wake-up threshold is 8 MiB: it polls too */
	}
	return NULL;
}

static int copy_file(const char *from, const char *to)
{
	char buf[1 << 16];
	int in = open(from, O_RDONLY | O_CLOEXEC), out = -1, err = 0;
	ssize_t n;

	if (in < 0)
		return -errno;
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	if (out < 0) {
		err = -errno;
		goto out;
	}
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, n) != n) {
			err = -EIO;
			break;
		}
out:
	close(in);
	if (out >= 0)
		close(out);
	return err;
}

/* Fork a child that waits on a gate, then execs @argv with LD_LIBRARY_PATH=@llp; stdout to a pipe. */
static pid_t spawn(char *const *argv, const char *llp, int *gate, int *out)
{
	int g[2], o[2];
	pid_t pid;

	if (pipe(g) || pipe(o))
		return -1;
	pid = fork();
	if (pid == 0) {
		char c;

		close(g[1]);
		close(o[0]);
		dup2(o[1], 1);
		if (read(g[0], &c, 1) < 0)
			_exit(125);
		setenv("LD_LIBRARY_PATH", llp, 1);
		execv(argv[0], argv);
		_exit(127);
	}
	close(g[0]);
	close(o[1]);
	*gate = g[1];
	*out = o[0];
	return pid;
}

/* Run one mode of @argv; its stdout into @buf. 0, or -1 when it failed. */
static int run_mode(struct bench *b, int mode, char *const *argv, char *buf, size_t len)
{
	char llp[PATH_MAX + 8];
	size_t off = 0;
	int gate, out, st;
	pid_t pid;
	ssize_t n;

	snprintf(llp, sizeof(llp), "%s/%s", b->dir, MODE_DIR[mode]);
	pid = spawn(argv, llp, &gate, &out);
	if (pid < 0)
		return -1;
	if (mode == M_S1 || mode == M_S2 || mode == M_S2Q)
		ffm_collector__track_pid(b->col, pid, mode == M_S1 ? 0 : 1);
	close(gate);
	while ((n = read(out, buf + off, len - 1 - off)) > 0)
		off += n;
	buf[off] = 0;
	close(out);
	waitpid(pid, &st, 0);
	return WIFEXITED(st) && !WEXITSTATUS(st) ? 0 : -1;
}

static int setup(struct bench *b)
{
	struct ffm_probe_set ps = {};
	char why[256], path[PATH_MAX + 32], pp_path[PATH_MAX + 32];
	const char *modes[] = { "plain", "s1", "s2", "s2p", "s1b", "s2q" };
	char q_path[PATH_MAX + 32];
	int err;

	err = ffm_driver_ready(b->driver, b->state, FFM_READY_RUN_UNTRUSTED, &b->rd, why, sizeof(why));
	if (err < 0) {
		fprintf(stderr, "bench: driver %s is not usable: %s\n", b->driver, why);
		return err;
	}
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", b->dir, modes[i]);
		mkdir(path, 0755);
		snprintf(path, sizeof(path), "%s/%s/libcuda.so.1", b->dir, modes[i]);
		if ((err = copy_file(b->driver, path)) < 0) {
			fprintf(stderr, "bench: cannot copy %s to %s: %s\n", b->driver, path, strerror(-err));
			return err;
		}
	}
	if ((err = ffm_collector__open(&(struct ffm_collector_opts){ .sz = sizeof(struct ffm_collector_opts),
				       .on_record = on_record, .ctx = b,
				       .bare_probes = true }, &b->col)) < 0) {
		fprintf(stderr, "bench: cannot load the BPF collector: %s (run as root)\n", strerror(-err));
		return err;
	}
	if ((err = ffm_apis__new(&b->apis)) < 0 || (err = ffm_symbolizer__new(NULL, &b->sym)) < 0)
		return err;
	/* The probes, once: s1 the wait function, s2 the stage-2 set (the static sync list stands
	 * in for a stage-1 list, as for a key without one). */
	snprintf(path, sizeof(path), "%s/s1/libcuda.so.1", b->dir);
	if ((err = ffm_probe_set__build(&ps, b->rd.drv, b->apis, FFM_PROBE_WAIT, b->rd.wait_off, NULL, 0)) < 0 ||
	    (err = ffm_collector__attach(b->col, path, -1, ps.p, ps.n, &b->att_s1)) < 0)
		goto fail;
	snprintf(path, sizeof(path), "%s/s1b/libcuda.so.1", b->dir);
	for (size_t i = 0; i < ps.n; i++)
		ps.p[i].bare = true;
	err = ffm_collector__attach(b->col, path, -1, ps.p, ps.n, &b->att_bare);
	for (size_t i = 0; i < ps.n; i++)
		ps.p[i].bare = false;
	if (err < 0)
		goto fail;
	snprintf(path, sizeof(path), "%s/s2/libcuda.so.1", b->dir);
	snprintf(q_path, sizeof(q_path), "%s/s2q/libcuda.so.1", b->dir);
	if ((err = ffm_collector__attach(b->col, path, -1, ps.p, ps.n, &b->att_s2_wait)) < 0 ||
	    (err = ffm_collector__attach(b->col, q_path, -1, ps.p, ps.n, &b->att_s2q_wait)) < 0)
		goto fail;
	/* s2p: the same sets, for this process only (which never maps the copy): how ffmd's
	 * per-process scope attaches them for a job's process. */
	snprintf(pp_path, sizeof(pp_path), "%s/s2p/libcuda.so.1", b->dir);
	if ((err = ffm_collector__attach(b->col, pp_path, getpid(), ps.p, ps.n, &b->att_pp_wait)) < 0)
		goto fail;
	ffm_probe_set__release(&ps);
	if ((err = ffm_probe_set__build(&ps, b->rd.drv, b->apis, S2_API, 0, S1_LIST,
					sizeof(S1_LIST) / sizeof(S1_LIST[0]))) < 0 ||
	    (err = ffm_collector__attach(b->col, path, -1, ps.p, ps.n, &b->att_s2_api)) < 0 ||
	    (err = ffm_collector__attach(b->col, pp_path, getpid(), ps.p, ps.n, &b->att_pp_api)) < 0)
		goto fail;
	ffm_probe_set__release(&ps);
	if ((err = ffm_probe_set__build(&ps, b->rd.drv, b->apis, S2_API | FFM_PROBE_SYNC_QUERIES, 0,
					S1_LIST, sizeof(S1_LIST) / sizeof(S1_LIST[0]))) < 0 ||
	    (err = ffm_collector__attach(b->col, q_path, -1, ps.p, ps.n, &b->att_s2q_api)) < 0)
		goto fail;
	printf("probes: stage 1 %zu, stage 2 %zu, stage 2 with the list's queries %zu (+ the wait "
	       "function) on copies of %s\n", ffm_attachment__count(b->att_s1),
	       ffm_attachment__count(b->att_s2_api), ffm_attachment__count(b->att_s2q_api), b->driver);
	ffm_probe_set__release(&ps);
	for (int s = 0; s < 2; s++) {
		struct ffm_jobrun_opts jo = { .sz = sizeof(jo), .state_dir = b->state, .uid = getuid(),
					      .override_stage = s + 1, .slot = (uint32_t)s,
					      .collector = b->col, .sym = b->sym, .apis = b->apis,
					      .driver_path = b->driver,
					      .driver_build_id = ffm_driver__build_id(b->rd.drv),
					      .wait_off = b->rd.wait_off, .wait_size = b->rd.wait_size };
		struct ffm_job_cfg cfg = { .stage = (uint32_t)s + 1,
					   .flags = FFM_JOB_ACTIVE | FFM_JOB_STACKS | (s ? FFM_JOB_CALLS : 0) };
		char key[64];

		snprintf(key, sizeof(key), "bench-overhead-stage%d-%d", s + 1, getpid());
		jo.key = key;
		jo.job_id = key;
		if ((err = ffm_jobrun__begin(&jo, &b->jr[s])) < 0) {
			fprintf(stderr, "bench: cannot open a store in %s: %s\n", b->state, ffm_store__strerror(err));
			return err;
		}
		ffm_collector__set_job(b->col, (uint32_t)s, &cfg);
	}
	pthread_mutex_init(&b->lock, NULL);
	return pthread_create(&b->consumer, NULL, consume_loop, b) ? -EAGAIN : 0;
fail:
	fprintf(stderr, "bench: cannot attach probes to %s: %s\n", path, strerror(-err));
	ffm_probe_set__release(&ps);
	return err;
}

static void per_call(struct bench *b, int reps, long calls)
{
	static double v[M__N][C__N][64];
	char calls_s[32], buf[4096];
	char *argv[] = { b->child, NULL, b->ptx, calls_s, NULL };
	char lib[M__N][PATH_MAX + 32];
	double med[M__N][C__N], mn[M__N][C__N];

	snprintf(calls_s, sizeof(calls_s), "%ld", calls);
	for (int m = 0; m < M__N; m++)
		snprintf(lib[m], sizeof(lib[m]), "%s/%s/libcuda.so.1", b->dir, MODE_DIR[m]);
	for (int r = 0; r < reps; r++)
		for (int m = 0; m < M__N; m++) {
			argv[1] = lib[m];
			if (run_mode(b, m, argv, buf, sizeof(buf)) < 0) {
				fprintf(stderr, "bench: the per-call child failed in mode %s\n", MODE_NAME[m]);
				exit(1);
			}
			for (char *p = buf; *p;) {
				int c;
				double x;
				int n;

				if (sscanf(p, "%d %lf%n", &c, &x, &n) != 2 || c < 0 || c >= C__N)
					break;
				v[m][c][r] = x;
				p += n;
				while (*p == '\n')
					p++;
			}
		}
	for (int m = 0; m < M__N; m++)
		for (int c = 0; c < C__N; c++) {
			double t[64];

			memcpy(t, v[m][c], sizeof(double) * reps);
			med[m][c] = median(t, reps);
			mn[m][c] = t[0];
		}
	printf("\n1. per call, ns (median of %d runs of %ld calls each; min in parentheses)\n", reps, calls);
	printf("%-26s", "call");
	for (int m = 0; m < M__N; m++)
		printf(" %14s", MODE_NAME[m]);
	printf(" | overhead: untracked / untr-pp / bare / s1 / s2 / s2+q\n");
	for (int c = 0; c < C__N; c++) {
		if (!med[M_PLAIN][c])
			continue; /* not in this driver */
		printf("%-26s", CALL_NAME[c]);
		for (int m = 0; m < M__N; m++)
			printf(" %6.0f (%5.0f)", med[m][c], mn[m][c]);
		printf(" |");
		for (int m = M_UNTRACKED; m < M__N; m++)
			printf(" %+6.0f%s", med[m][c] - med[M_PLAIN][c], m + 1 < M__N ? " /" : "\n");
	}
	printf("stage 1 per wait: %+.0f ns (min %+.0f) = the kernel's entry and return probe (bare) %+.0f ns\n"
	       "  + ffm's programs %+.0f ns (min %+.0f)\n",
	       med[M_S1][C_SYNC] - med[M_PLAIN][C_SYNC], mn[M_S1][C_SYNC] - mn[M_PLAIN][C_SYNC],
	       med[M_BARE][C_SYNC] - med[M_PLAIN][C_SYNC], med[M_S1][C_SYNC] - med[M_BARE][C_SYNC],
	       mn[M_S1][C_SYNC] - mn[M_BARE][C_SYNC]);
	printf("targets: stage 1 <= 1500 ns per wait (cuCtxSynchronize, stage1 column), stage 2 <= 3000 ns per\n"
	       "traced call (launch, copy: stage2 column), untracked <= 500 ns per driver call (untracked:\n"
	       "system-wide probes; untr-pp: ffmd's per-process scope, the default where the kernel has it).\n");
}

/*
 * ffm's own share of a stage-1 wait, without the traps' noise: the kernel's run-time
 * statistics of the wait programs over @reps more stage-1 runs (statistics on only for them:
 * they add two clock reads per program run).
 */
static void prog_cost(struct bench *b, int reps, long calls)
{
	char calls_s[32], buf[4096], lib[PATH_MAX + 32];
	char *argv[] = { b->child, lib, b->ptx, calls_s, NULL };
	double v[64], med;
	uint64_t runs = 0;
	int fd, n = 0;

	snprintf(calls_s, sizeof(calls_s), "%ld", calls);
	snprintf(lib, sizeof(lib), "%s/%s/libcuda.so.1", b->dir, MODE_DIR[M_S1]);
	fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (fd < 0) {
		printf("   BPF run time per stage-1 wait: not available (%s)\n", strerror(errno));
		return;
	}
	for (int r = 0; r < reps; r++) {
		uint64_t ns0, n0, ns1, n1;

		if (ffm_collector__wait_prog_stats(b->col, &ns0, &n0) < 0 ||
		    run_mode(b, M_S1, argv, buf, sizeof(buf)) < 0 ||
		    ffm_collector__wait_prog_stats(b->col, &ns1, &n1) < 0 || n1 == n0)
			continue;
		/* Each wait runs the program twice (entry, return). */
		v[n++] = 2.0 * (double)(ns1 - ns0) / (double)(n1 - n0);
		runs += n1 - n0;
	}
	close(fd);
	if (!n) {
		printf("   BPF run time per stage-1 wait: not measured\n");
		return;
	}
	med = median(v, n); /* sorts v */
	printf("   BPF run time per stage-1 wait: %.0f ns (min %.0f; entry + return, kernel BPF statistics,\n"
	       "   %" PRIu64 " program runs)\n", med, v[0], runs);
}

static double loop_s(const char *out)
{
	const char *p = strstr(out, "LOOP_S ");

	return p ? atof(p + 7) : -1;
}

static void slowdown(struct bench *b, int reps)
{
	char *argv[] = { b->workload, "--iters", "2500", "--kernel-us", "100", "--cpu-us", "100", NULL };
	double v[M__N][64], med[M__N];
	char buf[4096];
	int modes[] = { M_PLAIN, M_S1, M_S2 };

	for (int r = 0; r < reps; r++)
		for (int k = 0; k < 3; k++) {
			int m = modes[k];

			if (run_mode(b, m, argv, buf, sizeof(buf)) < 0 || loop_s(buf) <= 0) {
				fprintf(stderr, "bench: %s failed in mode %s: %s\n", b->workload, MODE_NAME[m], buf);
				exit(1);
			}
			v[m][r] = loop_s(buf);
		}
	for (int k = 0; k < 3; k++)
		med[modes[k]] = median(v[modes[k]], reps);
	printf("\n2. sync-heavy program: unnecessary_sync, 2500 iterations of 100 us kernel + sync + 100 us CPU\n");
	printf("   LOOP_S median of %d: plain %.4f s (%.0f syncs/s), stage1 %.4f s (%+.2f%%), stage2 %.4f s (%+.2f%%)\n",
	       reps, med[M_PLAIN], 2500 / med[M_PLAIN], med[M_S1], 100 * (med[M_S1] / med[M_PLAIN] - 1), med[M_S2],
	       100 * (med[M_S2] / med[M_PLAIN] - 1));
	printf("   target: stage 1 <= 1%% slowdown at ~5k syncs/s\n");
}

/* The captured record at *off (records are stored as a u64 size, then the record), or NULL at
 * the end; advances *off. */
static const struct ffm_rec_hdr *cap_next(const struct bench *b, size_t *off, uint64_t *sz)
{
	const struct ffm_rec_hdr *h;

	if (*off + 8 > b->cap_len)
		return NULL;
	memcpy(sz, b->cap + *off, 8);
	h = (const void *)(b->cap + *off + 8);
	*off += 8 + *sz;
	return h;
}

static void ingest(struct bench *b, uint64_t want)
{
	struct ffm_jobrun_opts jo = { .sz = sizeof(jo), .state_dir = b->state, .uid = getuid(),
				      .override_stage = 2, .slot = 2, .sym = b->sym, .apis = b->apis,
				      .driver_path = b->driver, .driver_build_id = ffm_driver__build_id(b->rd.drv),
				      .wait_off = b->rd.wait_off, .wait_size = b->rd.wait_size };
	struct ffm_rec_drops d[2] = {};
	struct ffm_jobrun *jr = NULL;
	uint64_t events = 0, passes = 0;
	char key[64];
	double t0, t;
	int err;

	for (int s = 0; s < 2; s++)
		ffm_collector__drops(b->col, (uint32_t)s, &d[s]);
	printf("\n3. ingest\n   live: %" PRIu64 " records consumed; lost: stage1 %" PRIu64 ", stage2 %" PRIu64
	       " (ring buffer full)\n", b->records,
	       (uint64_t)(d[0].n[FFM_REC_DROP_RINGBUF] + d[0].n[FFM_REC_DROP_STACK]),
	       (uint64_t)(d[1].n[FFM_REC_DROP_RINGBUF] + d[1].n[FFM_REC_DROP_STACK]));
	snprintf(key, sizeof(key), "bench-ingest-%d", getpid());
	jo.key = key;
	jo.job_id = key;
	if ((err = ffm_jobrun__begin(&jo, &jr)) < 0) {
		fprintf(stderr, "bench: ingest store: %s\n", ffm_store__strerror(err));
		return;
	}
	/* Pass 0 feeds everything (stacks are unwound once); later passes only the waits and
	 * calls, shifted in time by the capture's span per pass: the steady state of a long job,
	 * whose stacks are known and whose events arrive in time order. (Replaying the same
	 * timestamps would insert every pass into the middle of the time-ordered events table,
	 * which no live job does.) */
	uint64_t lo = UINT64_MAX, hi = 0, span, sz;
	const struct ffm_rec_hdr *h;

	for (size_t off = 0; (h = cap_next(b, &off, &sz));) {
		if (h->type == FFM_REC_WAIT || h->type == FFM_REC_CALL) {
			lo = h->ts_ns < lo ? h->ts_ns : lo;
			hi = h->ts_ns > hi ? h->ts_ns : hi;
		}
	}
	span = hi >= lo ? hi - lo + 1000 : 1000;
	t0 = now_s();
	while (events < want) {
		uint64_t before = events, shift = passes * span;

		for (size_t off = 0; events < want && (h = cap_next(b, &off, &sz));) {
			union {
				struct ffm_rec_hdr h;
				struct ffm_rec_wait w;
				struct ffm_rec_call c;
			} u;

			if (h->type == FFM_REC_WAIT || h->type == FFM_REC_CALL) {
				if (sz > sizeof(u))
					continue;
				memcpy(&u, h, sz);
				u.h.ts_ns += shift;
				if (h->type == FFM_REC_WAIT)
					u.w.start_ns += shift;
				else
					u.c.start_ns += shift;
				ffm_jobrun__record(jr, &u, sz);
				events++;
			} else if (!passes) {
				ffm_jobrun__record(jr, h, sz);
			}
		}
		passes++;
		if (events == before)
			break;
	}
	ffm_jobrun__end(jr, now_s() - t0, 0, false, true);
	t = now_s() - t0;
	printf("   replay (decode + recorder + SQLite, committed): %" PRIu64 " events in %.2f s = %.0f events/s"
	       " (%" PRIu64 " passes over %zu captured bytes)\n", events, t, events / t, passes, b->cap_len);
	printf("   target: >= 1M events/s\n");
	ffm_jobrun__free(jr);
}

static void usage(FILE *f)
{
	fprintf(f, "Usage: bench_overhead [--driver PATH] [--state-dir DIR] [--reps N] [--calls N]\n"
		   "                      [--workload PATH] [--ptx FILE] [--ingest-events N] [--parts 123]\n"
		   "--parts: which of 1 (per call), 2 (sync-heavy program), 3 (ingest) to run\n");
}

int main(int argc, char **argv)
{
	static struct bench b;
	int reps = 5;
	long calls = 20000;
	uint64_t ingest_events = 2000000;
	const char *state = NULL, *parts = "123";
	ssize_t n;

	snprintf(b.ptx, sizeof(b.ptx), "tests/workloads/kernels.ptx");
	snprintf(b.workload, sizeof(b.workload), "build/workloads/unnecessary_sync");
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		}
		if (!v) {
			usage(stderr);
			return 2;
		}
		i++;
		if (!strcmp(a, "--driver"))
			snprintf(b.driver, sizeof(b.driver), "%s", v);
		else if (!strcmp(a, "--state-dir"))
			state = v;
		else if (!strcmp(a, "--reps"))
			reps = atoi(v);
		else if (!strcmp(a, "--calls"))
			calls = atol(v);
		else if (!strcmp(a, "--workload"))
			snprintf(b.workload, sizeof(b.workload), "%s", v);
		else if (!strcmp(a, "--ptx"))
			snprintf(b.ptx, sizeof(b.ptx), "%s", v);
		else if (!strcmp(a, "--ingest-events"))
			ingest_events = strtoull(v, NULL, 10);
		else if (!strcmp(a, "--parts") && v[strspn(v, "123")] == 0)
			parts = v;
		else {
			usage(stderr);
			return 2;
		}
	}
	if (reps < 1 || reps > 64 || calls < 1) {
		fprintf(stderr, "bench: --reps must be 1..64, --calls positive\n");
		return 2;
	}
	/* The timing child lives beside this program. */
	n = readlink("/proc/self/exe", b.child, sizeof(b.child) - 32);
	if (n <= 0)
		return 1;
	b.child[n] = 0;
	strcpy(strrchr(b.child, '/') + 1, "bench_overhead_child");
	if (access(b.child, X_OK)) {
		fprintf(stderr, "bench: %s not found\n", b.child);
		return 1;
	}
	if (!b.driver[0] && ffm_resolve_libcuda(getenv("LD_LIBRARY_PATH"), NULL, NULL, b.driver, sizeof(b.driver)) < 0) {
		fprintf(stderr, "bench: no libcuda.so.1 found (give --driver PATH)\n");
		return 1;
	}
	snprintf(b.dir, sizeof(b.dir), "/tmp/ffm-bench.XXXXXX");
	if (!mkdtemp(b.dir))
		return 1;
	snprintf(b.state, sizeof(b.state), "%s", state ? state : b.dir);
	b.cap_size = 64u << 20;
	b.cap = malloc(b.cap_size);
	if (!b.cap || setup(&b) < 0)
		return 1;
	printf("driver %s (build-id %s), wait function at %#" PRIx64 "; %ld online CPUs; uprobes as %s\n",
	       b.driver, ffm_driver__build_id(b.rd.drv), b.rd.wait_off, sysconf(_SC_NPROCESSORS_ONLN),
	       ffm_collector__probe_mode(b.col));
	if (strchr(parts, '1')) {
		per_call(&b, reps, calls);
		prog_cost(&b, reps, calls);
	}
	if (strchr(parts, '2'))
		slowdown(&b, reps);
	b.stop = true;
	pthread_join(b.consumer, NULL);
	ffm_collector__consume(b.col);
	for (int s = 0; s < 2; s++) {
		ffm_jobrun__end(b.jr[s], 0, 0, false, true);
		b.jr[s] = ffm_jobrun__free(b.jr[s]);
	}
	if (strchr(parts, '3'))
		ingest(&b, ingest_events);
	{
		char cmd[PATH_MAX + 16];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", b.dir);
		if (system(cmd) != 0)
			fprintf(stderr, "bench: could not remove %s\n", b.dir);
	}
	return 0;
}
