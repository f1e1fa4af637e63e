/* SPDX-License-Identifier: MIT */
/*
 * ffmctl export on a store built here with known contents (store API), so every number in the
 * output can be checked: tests/ops/check_export.py validates the Chrome trace against the Trace
 * Event Format's documented structure and the Hatchet tree against hatchet's literal reader
 * (frame/metrics/children, inclusive = exclusive + children), and both against this data.
 *
 * The job "exp-1" has three runs of key "exp-key":
 *   run 1, stage 1: 3 waits (kind wait, no api id) on stack S_SYNC, 80 us each
 *   run 2, stage 2: 3 cuCtxSynchronize calls on S_SYNC (100 us, 90 us waited each) and
 *                   2 cuMemcpyHtoD on S_COPY (50 us, 4096 bytes)
 *   run 3, stage 3: 2 syncs on S_SYNC, both classified unnecessary (sync_uses NONE), and 2 copies
 *                   on S_COPY, the second a duplicate of the first (xfer_hashes SAME_DST)
 * S_SYNC = libcuda internal frame, libcuda cuCtxSynchronize, step (app.c:27), main (app.c:43);
 * S_COPY = main (app.c:50).
 * The export marks what the job's report counts (the analysis's verdicts): run 2 is its
 * timeline (its 3 syncs unnecessary, its second copy a duplicate, from run 3's rows), run 3's
 * events by their own rows, run 1's waits by their call site (every checked sync unnecessary).
 * By default the trace holds the timeline (run 2) only; --all-runs every run.
 *
 * The job "exp-2" (key "exp-key2", a store of its own) has runs of identical calls to merge:
 *   run 1, stage 1: 2 waits on S_SYNC
 *   run 2, stage 2 (the timeline): thread 4000: 10 cuLaunchKernel on S_LAUNCH, 10 us each, 2 us
 *                   apart; a cuCtxSynchronize (100 us, 90 waited); 3 launches 50 us apart; a
 *                   sync. Thread 4001: 4 cuMemcpyHtoD on S_COPY, 50 us each, 5 us apart.
 *                   Thread 4002: a sync of 100 us, two waits 2 us apart, the first inside
 *                   the sync's last 10 us, the second just after it (not merged: the span
 *                   would overlap the sync partly).
 *   run 3, stage 3: the 4 copies again, the last 3 duplicates of the first (xfer_hashes)
 * The trace has one span of the 10 launches (args.count 10) with one arrow to the sync (args.
 * calls 10), the 3 spaced launches apart, the copies as 1 + 3 (the duplicates, red), and
 * thread 4002's calls apart: 22 calls in 11 spans.
 */
#include <ftw.h>
#include <sys/stat.h>

#include "store/ffm_store.h"
#include "tests/testutil.h"

#define API_SYNC 101
#define API_COPY 202
#define API_LAUNCH 303

static char dir[64];
static char ffmctl[512];

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	remove(path);
	return 0;
}

static void cleanup(void)
{
	/* FFM_TEST_KEEP=1 leaves the store and the exports for a look. */
	if (dir[0] && !getenv("FFM_TEST_KEEP"))
		nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static int64_t stack_sync, stack_copy, stack_launch;

static void put_stacks(struct ffm_store *s)
{
	struct ffm_store_frame sync[] = {
		{ .build_id = "cudabuild", .module = "/usr/lib/libcuda.so.1", .offset = 0x22bb00 },
		{ .build_id = "cudabuild", .module = "/usr/lib/libcuda.so.1", .offset = 0x1000,
		  .func = "cuCtxSynchronize" },
		{ .build_id = "appbuild", .module = "/opt/app", .offset = 0x500, .func = "step",
		  .file = "app.c", .line = 27 },
		{ .build_id = "appbuild", .module = "/opt/app", .offset = 0x400, .func = "main",
		  .file = "app.c", .line = 43 },
	};
	struct ffm_store_frame copy[] = {
		{ .build_id = "appbuild", .module = "/opt/app", .offset = 0x480, .func = "main",
		  .file = "app.c", .line = 50 },
	};

	struct ffm_store_frame launch[] = {
		{ .build_id = "appbuild", .module = "/opt/app", .offset = 0x490, .func = "main",
		  .file = "app.c", .line = 60 },
	};

	ASSERT_OK(ffm_store__put_stack(s, 0x1111, sync, 4, &stack_sync));
	ASSERT_OK(ffm_store__put_stack(s, 0x2222, copy, 1, &stack_copy));
	ASSERT_OK(ffm_store__put_stack(s, 0x3333, launch, 1, &stack_launch));
}

static const char *cur_job = "exp-1";

static int64_t begin_run(struct ffm_store *s, int stage, uint64_t t0)
{
	int64_t run;

	ASSERT_OK(ffm_store__run_begin(s, &(struct ffm_store_run){ .job_id = cur_job, .stage = stage,
				       .start_ns = t0, .start_unix = 1700000000 }, &run));
	return run;
}

static int64_t ev(struct ffm_store *s, int64_t run, uint32_t kind, uint32_t api, uint64_t start,
		  uint64_t dur, uint64_t wait, uint64_t bytes, int64_t stack, uint32_t tid)
{
	int64_t id;

	ASSERT_OK(ffm_store__put_event(s, &(struct ffm_store_event){ .run = run, .kind = kind,
				       .api = api, .tgid = 4000, .tid = tid, .start_ns = start,
				       .dur_ns = dur, .wait_ns = wait, .bytes = bytes,
				       .dir = bytes ? FFM_DIR_HTOD : 0, .stack = stack }, &id));
	return id;
}

static void build_store(void)
{
	struct ffm_store_opts o = { .sz = sizeof(o), .create = true };
	struct ffm_store_key k = { .key = "exp-key", .uid = 1000, .exe = "/opt/app" };
	struct ffm_store *s = NULL;
	int64_t run, first;
	uint64_t t = 1000000000;

	ASSERT_OK(ffm_store__open_key(dir, &k, &o, &s));
	ASSERT_OK(ffm_store__job_begin(s, &(struct ffm_store_job){ .job_id = "exp-1", .uid = 1000,
				       .state = FFM_JOB_RUNNING, .start_unix = 1700000000 }, NULL));
	ASSERT_OK(ffm_store__put_api_name(s, API_SYNC, "cuCtxSynchronize"));
	ASSERT_OK(ffm_store__put_api_name(s, API_COPY, "cuMemcpyHtoD"));
	put_stacks(s);

	run = begin_run(s, 1, t);
	for (int i = 0; i < 3; i++)
		ev(s, run, FFM_EV_WAIT, 0, t + 1000 + i * 200000, 80000, 80000, 0, stack_sync, 4000);
	ASSERT_OK(ffm_store__run_end(s, run, t + 1000000, 0.001, 0, 0));

	t += 10000000;
	run = begin_run(s, 2, t);
	for (int i = 0; i < 3; i++)
		ev(s, run, FFM_EV_API, API_SYNC, t + 1000 + i * 200000, 100000, 90000, 0, stack_sync, 4000);
	for (int i = 0; i < 2; i++)
		ev(s, run, FFM_EV_TRANSFER, API_COPY, t + 700000 + i * 100000, 50000, 0, 4096,
		   stack_copy, 4001);
	ASSERT_OK(ffm_store__run_end(s, run, t + 1000000, 0.001, 0, 0));

	t += 10000000;
	run = begin_run(s, 3, t);
	for (int i = 0; i < 2; i++) {
		int64_t e = ev(s, run, FFM_EV_API, API_SYNC, t + 1000 + i * 200000, 100000, 90000, 0,
			       stack_sync, 4000);

		ASSERT_OK(ffm_store__put_sync_use(s, &(struct ffm_store_sync_use){ .run = run,
						  .event = e, .stack = stack_sync, .prot_lo = 0x1000,
						  .prot_hi = 0x2000, .use_delay_ns = -1,
						  .flags = FFM_SYNC_USE_NONE }, NULL));
	}
	first = ev(s, run, FFM_EV_TRANSFER, API_COPY, t + 700000, 50000, 0, 4096, stack_copy, 4001);
	ASSERT_OK(ffm_store__put_xfer_hash(s, &(struct ffm_store_xfer_hash){ .run = run,
					   .event = first, .stack = stack_copy, .hash = 42, .dst = 0xd000,
					   .bytes = 4096, .dup = FFM_DUP_NONE }, NULL));
	{
		int64_t e = ev(s, run, FFM_EV_TRANSFER, API_COPY, t + 800000, 50000, 0, 4096,
			       stack_copy, 4001);

		ASSERT_OK(ffm_store__put_xfer_hash(s, &(struct ffm_store_xfer_hash){ .run = run,
						   .event = e, .stack = stack_copy, .hash = 42,
						   .dst = 0xd000, .bytes = 4096, .first_event = first,
						   .first_stack = stack_copy, .dup = FFM_DUP_SAME_DST }, NULL));
	}
	ASSERT_OK(ffm_store__run_end(s, run, t + 1000000, 0.001, 0, 0));
	ASSERT_OK(ffm_store__job_end(s, "exp-1", FFM_JOB_DONE, 1700000001));
	ffm_store__free(s);
}

/* Job exp-2's copies in @run: 4 of 50 us, 5 us apart; with @hashes the last 3 duplicates. */
static void exp2_copies(struct ffm_store *s, int64_t run, uint64_t t, bool hashes)
{
	int64_t first = 0;

	for (int i = 0; i < 4; i++) {
		int64_t e = ev(s, run, FFM_EV_TRANSFER, API_COPY, t + 600000 + i * 55000, 50000, 0,
			       4096, stack_copy, 4001);

		first = first ? first : e;
		if (hashes)
			ASSERT_OK(ffm_store__put_xfer_hash(s, &(struct ffm_store_xfer_hash){ .run = run,
							   .event = e, .stack = stack_copy, .hash = 42,
							   .dst = 0xd000, .bytes = 4096,
							   .first_event = i ? first : 0,
							   .first_stack = i ? stack_copy : 0,
							   .dup = i ? FFM_DUP_SAME_DST : FFM_DUP_NONE }, NULL));
	}
}

static void build_store2(void)
{
	struct ffm_store_opts o = { .sz = sizeof(o), .create = true };
	struct ffm_store_key k = { .key = "exp-key2", .uid = 1000, .exe = "/opt/app2" };
	struct ffm_store *s = NULL;
	uint64_t t = 1000000000;
	int64_t run;

	cur_job = "exp-2";
	ASSERT_OK(ffm_store__open_key(dir, &k, &o, &s));
	ASSERT_OK(ffm_store__job_begin(s, &(struct ffm_store_job){ .job_id = "exp-2", .uid = 1000,
				       .state = FFM_JOB_RUNNING, .start_unix = 1700000000 }, NULL));
	ASSERT_OK(ffm_store__put_api_name(s, API_SYNC, "cuCtxSynchronize"));
	ASSERT_OK(ffm_store__put_api_name(s, API_COPY, "cuMemcpyHtoD"));
	ASSERT_OK(ffm_store__put_api_name(s, API_LAUNCH, "cuLaunchKernel"));
	put_stacks(s);

	run = begin_run(s, 1, t);
	for (int i = 0; i < 2; i++)
		ev(s, run, FFM_EV_WAIT, 0, t + 1000 + i * 200000, 80000, 80000, 0, stack_sync, 4000);
	ASSERT_OK(ffm_store__run_end(s, run, t + 1000000, 0.001, 0, 0));

	t += 10000000;
	run = begin_run(s, 2, t);
	for (int i = 0; i < 10; i++)
		ev(s, run, FFM_EV_LAUNCH, API_LAUNCH, t + 1000 + i * 12000, 10000, 0, 0, stack_launch,
		   4000);
	ev(s, run, FFM_EV_API, API_SYNC, t + 130000, 100000, 90000, 0, stack_sync, 4000);
	for (int i = 0; i < 3; i++)
		ev(s, run, FFM_EV_LAUNCH, API_LAUNCH, t + 300000 + i * 60000, 10000, 0, 0,
		   stack_launch, 4000);
	ev(s, run, FFM_EV_API, API_SYNC, t + 450000, 100000, 90000, 0, stack_sync, 4000);
	exp2_copies(s, run, t, false);
	ev(s, run, FFM_EV_API, API_SYNC, t + 900000, 100000, 0, 0, stack_sync, 4002);
	ev(s, run, FFM_EV_WAIT, 0, t + 990000, 8000, 8000, 0, stack_sync, 4002);
	ev(s, run, FFM_EV_WAIT, 0, t + 1000000, 8000, 8000, 0, stack_sync, 4002);
	ASSERT_OK(ffm_store__run_end(s, run, t + 2000000, 0.001, 0, 0));

	t += 10000000;
	run = begin_run(s, 3, t);
	exp2_copies(s, run, t, true);
	ASSERT_OK(ffm_store__run_end(s, run, t + 1000000, 0.001, 0, 0));
	ASSERT_OK(ffm_store__job_end(s, "exp-2", FFM_JOB_DONE, 1700000001));
	ffm_store__free(s);
}

static void setup(void)
{
	const char *b = getenv("FFM_BUILD");

	if (dir[0])
		return;
	snprintf(ffmctl, sizeof(ffmctl), "%s/ffmctl", b ? b : "build");
	if (access(ffmctl, X_OK))
		SKIP("ffmctl not built");
	snprintf(dir, sizeof(dir), "/tmp/ffm-export-XXXXXX");
	ASSERT(mkdtemp(dir));
	atexit(cleanup);
	build_store();
	build_store2();
}

/* Run a shell command line; its exit status. */
static int sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	int r;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	fflush(stdout);
	r = system(cmd);
	return WIFEXITED(r) ? WEXITSTATUS(r) : 128;
}

/* tests/ops/check_export.py MODE FILE, its report as TAP comments; fails the case if it fails. */
static void check(const char *mode, const char *file)
{
	ASSERT_EQ(sh("python3 tests/ops/check_export.py %s %s/%s > %s/check.out 2>&1; r=$?; "
		     "sed 's/^/# /' %s/check.out; exit $r", mode, dir, file, dir, dir), 0);
}

TEST(chrome_trace_structure_and_problems)
{
	setup();
	ASSERT_EQ(sh("%s --state-dir %s export exp-1 --format chrome-trace --all-runs "
		     "-o %s/trace.json", ffmctl, dir, dir), 0);
	check("chrome-trace", "trace.json");
}

TEST(chrome_trace_default_is_the_timeline_run)
{
	setup();
	ASSERT_EQ(sh("%s --state-dir %s export exp-1 --format chrome-trace -o %s/td.json 2>%s/td.err",
		     ffmctl, dir, dir, dir), 0);
	check("chrome-trace-default", "td.json");
	/* ... and it says so */
	ASSERT_EQ(sh("grep -q 'run 2 (stage 2), the timeline' %s/td.err", dir), 0);
}

TEST(chrome_trace_merges_runs_of_identical_calls)
{
	setup();
	ASSERT_EQ(sh("%s --state-dir %s export exp-2 --format chrome-trace -o %s/m.json 2>%s/m.err",
		     ffmctl, dir, dir, dir), 0);
	check("chrome-trace-merged", "m.json");
	/* One line says what was written: the trace events, from the 22 calls. */
	ASSERT_EQ(sh("sed 's/^/# /' %s/m.err; grep -Eq '^ffmctl export: wrote [0-9]+ events "
		     "\\([0-9.]+ kB, from 22 calls\\) to %s/m.json$' %s/m.err", dir, dir, dir), 0);
	ASSERT_EQ(sh("%s --state-dir %s export exp-2 --format chrome-trace --no-merge -o %s/nm.json "
		     "2>/dev/null", ffmctl, dir, dir), 0);
	check("chrome-trace-nomerge", "nm.json");
	/* The checker refuses broken variants of a merged trace. */
	check("chrome-trace-refuses", "m.json");
}

TEST(chrome_trace_gz_is_gzip)
{
	setup();
	ASSERT_EQ(sh("%s --state-dir %s export exp-2 --format chrome-trace -o %s/m.json.gz "
		     "2>%s/gz.err", ffmctl, dir, dir, dir), 0);
	/* gzip's magic, a whole stream (gzip -t), and the same trace as the plain file */
	ASSERT_EQ(sh("[ \"$(head -c 2 %s/m.json.gz | od -An -tx1 | tr -d ' ')\" = 1f8b ] && "
		     "gzip -t %s/m.json.gz && gzip -dc %s/m.json.gz > %s/unz.json", dir, dir, dir, dir), 0);
	check("chrome-trace-merged", "m.json.gz");
	ASSERT_EQ(sh("grep -q 'uncompressed, from 22 calls) to %s/m.json.gz' %s/gz.err", dir, dir), 0);
	ASSERT_EQ(sh("%s --state-dir %s export exp-2 --format hatchet -o %s/h.json.gz 2>/dev/null && "
		     "gzip -dc %s/h.json.gz | python3 -c 'import json,sys; json.load(sys.stdin)'",
		     ffmctl, dir, dir, dir), 0);
}

TEST(chrome_trace_one_run)
{
	setup();
	ASSERT_EQ(sh("%s --state-dir %s export exp-1 --format chrome-trace --run 1 > %s/t1.json",
		     ffmctl, dir, dir), 0);
	check("chrome-trace-run1", "t1.json");
}

TEST(hatchet_tree_default_run_is_stage_2)
{
	setup();
	ASSERT_EQ(sh("%s --state-dir %s export exp-1 --format hatchet -o %s/tree.json", ffmctl, dir,
		     dir), 0);
	check("hatchet", "tree.json");
}

TEST(hatchet_tree_of_stage_1_names_the_driver_entry)
{
	setup();
	ASSERT_EQ(sh("%s --state-dir %s export exp-1 --format hatchet --run 1 -o %s/tree1.json",
		     ffmctl, dir, dir), 0);
	check("hatchet-run1", "tree1.json");
}

TEST(errors_are_specific_and_leave_no_file)
{
	setup();
	ASSERT_EQ(sh("%s --state-dir %s export nope --format hatchet -o %s/x.json 2>/dev/null", ffmctl,
		     dir, dir), 1);
	ASSERT_EQ(sh("%s --state-dir %s export exp-1 2>/dev/null", ffmctl, dir), 2);
	ASSERT_EQ(sh("%s --state-dir %s export exp-1 --format svg 2>/dev/null", ffmctl, dir), 2);
	ASSERT_EQ(sh("%s --state-dir %s export exp-1 --format hatchet --run 99 2>/dev/null", ffmctl,
		     dir), 2);
	ASSERT_EQ(sh("%s --state-dir %s export exp-1 --format chrome-trace --run 1 --all-runs "
		     "2>/dev/null", ffmctl, dir), 2);
	/* An unwritable destination: an error, and neither the file nor a temporary remains. */
	ASSERT_EQ(sh("%s --state-dir %s export exp-1 --format hatchet -o %s/nodir/x.json 2>/dev/null",
		     ffmctl, dir, dir), 1);
	ASSERT_EQ(sh("ls %s | grep -q -e '^x.json' -e tmp", dir), 1);
	ASSERT_EQ(sh("%s --state-dir %s export exp-1 --format chrome-trace -o %s/nodir/x.json.gz "
		     "2>/dev/null", ffmctl, dir, dir), 1);
	/* A link planted at the temporary name (FILE.tmp.PID: exec keeps the shell's pid) is not
	 * written through: the export fails, the link's target is not created. */
	for (int gz = 0; gz < 2; gz++) {
		ASSERT_EQ(sh("ln -s %s/victim %s/p.json%s.tmp.$$ && exec %s --state-dir %s export exp-1 "
			     "--format chrome-trace -o %s/p.json%s 2>/dev/null", dir, dir,
			     gz ? ".gz" : "", ffmctl, dir, dir, gz ? ".gz" : ""), 1);
		ASSERT_EQ(sh("ls %s | grep -q -e '^victim' -e '^p.json%s$'", dir, gz ? ".gz" : ""), 1);
	}
}

TEST_MAIN()
