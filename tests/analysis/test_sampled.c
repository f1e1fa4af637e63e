// SPDX-License-Identifier: MIT
/*
 * The analysis of a sampled stage-1 run (analysis/sampled.c) on a store written here: one
 * process waits at two call sites, A every 1 ms and B every 4 ms, for 10 s. Full tracing until
 * 1 s, then a span to the end traced only in windows of 100 ms every second (the span's first
 * window is the end of the full phase, as ffmd stores it), plus waits that began in the span
 * outside the windows (the detach's lag): those do not count as windows' evidence. The report's
 * numbers must come back to the whole run's (A 10,000 and B 2,500 waits), marked sampled, with a
 * standard error; a run without sample rows keeps what was recorded.
 */
#include <math.h>
#include <stdlib.h>

#include "analysis/ffm_analysis.h"
#include "store/ffm_store.h"
#include "tests/testutil.h"

#define MS 1000000ull
#define T0 (100 * 1000 * MS)
#define TGID 777

static char tmpl[] = "/tmp/ffm-test-sampled-XXXXXX";
static char *root;

static bool traced(uint64_t t, bool sampled)
{
	uint64_t rel = (t - T0) / MS;

	if (!sampled || rel < 1000)
		return true;
	/* windows: [k s, k s + 100 ms) for k = 1..9, and 20 ms of lag after each */
	return rel % 1000 < 120;
}

static void put_site_stack(struct ffm_store *s, uint64_t hash, const char *func, uint32_t line,
			   int64_t *id)
{
	struct ffm_store_frame f[2] = {
		{ .build_id = "d1", .module = "libcuda.so.1", .offset = 0x1000 },
		{ .build_id = "a1", .module = "app", .offset = 0x100 + line, .func = func, .demangled = func,
		  .folded = func, .file = "app.c", .line = line },
	};

	ASSERT(ffm_store__put_stack(s, hash, f, 2, id) >= 0);
}

/* The key's store with one stage-1 run; @sampled: waits in windows only, and the sample rows. */
static const char *write_store(bool sampled)
{
	static char dir[512];
	static int seq;
	struct ffm_store_opts so = { .sz = sizeof(so), .create = true };
	struct ffm_store *s = NULL;
	int64_t run, sa, sb;

	if (!root)
		root = mkdtemp(tmpl);
	snprintf(dir, sizeof(dir), "%s/s%d", root, ++seq);
	ASSERT_OK(ffm_store__open_key(dir, &(struct ffm_store_key){ .key = "k", .uid = 1 }, &so, &s));
	ASSERT_OK(ffm_store__job_begin(s, &(struct ffm_store_job){ .job_id = "j", .uid = 1,
		.state = FFM_JOB_RUNNING, .start_unix = 1700000000 }, NULL));
	ASSERT_OK(ffm_store__put_api_name(s, 1, "cuStreamSynchronize"));
	ASSERT_OK(ffm_store__run_begin(s, &(struct ffm_store_run){ .job_id = "j", .stage = 1,
		.start_ns = T0 - MS, .start_unix = 1700000000 }, &run));
	ASSERT_OK(ffm_store__put_process(s, &(struct ffm_store_process){ .run = run, .tgid = TGID,
		.exe = "app", .start_ns = T0 - MS }));
	put_site_stack(s, 0xa, "site_a", 10, &sa);
	put_site_stack(s, 0xb, "site_b", 20, &sb);
	for (uint64_t t = T0; t < T0 + 10000 * MS; t += MS) {
		bool b = (t - T0) / MS % 4 == 0;

		if (!traced(t, sampled))
			continue;
		ASSERT_OK(ffm_store__put_event(s, &(struct ffm_store_event){ .run = run, .kind = FFM_EV_WAIT,
			.api = 1, .tgid = TGID, .tid = TGID, .start_ns = t, .dur_ns = 100000,
			.wait_ns = 100000, .stack = sa }, NULL));
		if (b)
			ASSERT_OK(ffm_store__put_event(s, &(struct ffm_store_event){ .run = run,
				.kind = FFM_EV_WAIT, .api = 1, .tgid = TGID, .tid = TGID,
				.start_ns = t + 300000, .dur_ns = 200000, .wait_ns = 200000, .stack = sb }, NULL));
	}
	if (sampled) {
		/* the span from 0.9 s (its first window: the full phase's stable end) to the end */
		ASSERT_OK(ffm_store__put_sample(s, run, &(struct ffm_store_sample){ .tgid = TGID,
			.kind = FFM_SAMPLE_SPAN, .start_ns = T0 + 900 * MS, .end_ns = T0 + 10000 * MS,
			.on_ns = 1000 * MS }));
		ASSERT_OK(ffm_store__put_sample(s, run, &(struct ffm_store_sample){ .tgid = TGID,
			.kind = FFM_SAMPLE_WINDOW, .start_ns = T0 + 900 * MS, .end_ns = T0 + 1000 * MS,
			.on_ns = 100 * MS }));
		for (uint64_t k = 1; k < 10; k++)
			ASSERT_OK(ffm_store__put_sample(s, run, &(struct ffm_store_sample){ .tgid = TGID,
				.kind = FFM_SAMPLE_WINDOW, .start_ns = T0 + k * 1000 * MS,
				.end_ns = T0 + k * 1000 * MS + 100 * MS, .on_ns = 100 * MS }));
	}
	ASSERT_OK(ffm_store__process_exit(s, run, TGID, T0 + 10000 * MS, 0));
	ASSERT_OK(ffm_store__run_end(s, run, T0 + 10001 * MS, 10.0, 0, 0));
	ASSERT_OK(ffm_store__job_end(s, "j", FFM_JOB_DONE, 1700000100));
	ffm_store__free(s);
	return dir;
}

static const struct ffm_an_site *site(const struct ffm_analysis_result *r, const char *func)
{
	for (size_t i = 0; i < r->n_sites; i++)
		if (!strcmp(r->sites[i].function, func))
			return &r->sites[i];
	FAIL("no site %s", func);
	return NULL;
}

static struct ffm_analysis *analyse(const char *dir, struct ffm_store **s)
{
	struct ffm_store_opts so = { .sz = sizeof(so), .read_only = true };
	struct ffm_analysis *a = NULL;

	ASSERT_OK(ffm_store__open_key(dir, &(struct ffm_store_key){ .key = "k", .uid = 1 }, &so, s));
	ASSERT_OK(ffm_analysis__run(*s, &(struct ffm_analysis_opts){ .sz = sizeof(struct ffm_analysis_opts),
		.job_id = "j", .profile_stage = 1 }, &a));
	return a;
}

TEST(sampled_run_is_extrapolated)
{
	struct ffm_store *s = NULL;
	struct ffm_analysis *a = analyse(write_store(true), &s);
	const struct ffm_analysis_result *r = ffm_analysis__result(a);
	const struct ffm_an_site *x = site(r, "site_a"), *y = site(r, "site_b");

	ASSERT(r->sampled);
	ASSERT(x->sampled && y->sampled);
	/* 900 full + 9100 ms * (1000 waits in 1000 ms of windows) */
	ASSERT_MSG(fabs((double)x->count - 10000) <= 20, "site_a %llu", (unsigned long long)x->count);
	ASSERT_MSG(fabs((double)y->count - 2500) <= 10, "site_b %llu", (unsigned long long)y->count);
	ASSERT_MSG(fabs((double)x->wait_ns - 1e9) <= 2e6, "site_a wait %llu", (unsigned long long)x->wait_ns);
	ASSERT_MSG(fabs((double)y->wait_ns - 0.5e9) <= 1e6, "site_b wait %llu", (unsigned long long)y->wait_ns);
	/* a steady program: windows agree, the error is small but there */
	ASSERT(x->count_se >= 0 && x->count_se < 100);
	ffm_analysis__free(a);
	ffm_store__free(s);
}

TEST(unsampled_run_keeps_its_counts)
{
	struct ffm_store *s = NULL;
	struct ffm_analysis *a = analyse(write_store(false), &s);
	const struct ffm_analysis_result *r = ffm_analysis__result(a);
	const struct ffm_an_site *x = site(r, "site_a");

	ASSERT(!r->sampled && !x->sampled);
	ASSERT_EQ(x->count, 10000);
	ASSERT_EQ(site(r, "site_b")->count, 2500);
	ffm_analysis__free(a);
	ffm_store__free(s);
}

TEST(cleanup)
{
	ASSERT_OK(ffm_test_rmtree(root));
}

TEST_MAIN()
