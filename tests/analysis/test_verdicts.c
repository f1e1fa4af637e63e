/* SPDX-License-Identifier: MIT */
/*
 * The analysis library's rules from hand-built inputs, by tables: what one row of stage 3/4
 * says, how the rows of one sync fold, the misplaced threshold, each occurrence's verdict, the
 * stage 2 <-> 3/4 join and its majorities; the merge of several nodes' results and the
 * comparison of two jobs; and the call-site keys, which join runs and stores and so must keep
 * their values (fixed values taken before the analysis became a library).
 */
#include <stdlib.h>

#include "analysis/ffm_analysis.h"
#include "tests/report/synth.h"
#include "tests/testutil.h"

#define US 1000ll
#define MS 1000000ll

/* The required-read rule: conditional where at least half of the judged reads had their value
 * used before the thread's next GPU submission; never without a judged read. */
TEST(a_read_used_before_the_next_submission_is_conditional)
{
	static const struct {
		uint64_t before, after;
		bool conditional;
	} t[] = {
		{ 0, 0, false },  /* nothing judged (no use timed, no submission after) */
		{ 0, 10, false }, /* the submission always first */
		{ 1, 0, true },
		{ 5, 5, true },	  /* a tie: ffm cannot tell, so not in the headline */
		{ 4, 5, false },
		{ 100, 1, true },
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		ASSERT_MSG(ffm_verdict_read_conditional(t[i].before, t[i].after) == t[i].conditional,
			   "case %zu", i);
}

TEST(one_row_says_what_it_saw)
{
	static const struct {
		uint32_t flags;
		int64_t delay;
		uint64_t bytes;
		uint8_t seen;
		int64_t out_delay;
	} t[] = {
		{ 0, 5 * US, 4096, FFM_SEEN_USED, 5 * US },
		{ 0, 0, 4096, FFM_SEEN_USED, 0 },			 /* used at once */
		{ FFM_SYNC_USE_PARTIAL, 7 * US, 4096, FFM_SEEN_USED, 7 * US }, /* a use is a use */
		{ FFM_SYNC_USE_NONE, -1, 8, FFM_SEEN_NONE, -1 },	 /* watched in full */
		{ FFM_SYNC_USE_NONE, -1, 4096, FFM_SEEN_NONE_PART, -1 }, /* first 8 bytes only */
		{ FFM_SYNC_USE_NONE | FFM_SYNC_USE_PARTIAL, -1, 8, FFM_SEEN_UNKNOWN, -1 },
		{ FFM_SYNC_USE_PARTIAL, -1, 4096, FFM_SEEN_UNKNOWN, -1 },
		{ FFM_SYNC_USE_NONE, 3 * US, 8, FFM_SEEN_NONE, -1 },	 /* NONE wins over a delay */
		{ FFM_SYNC_USE_LATE, 2 * MS, 4096, FFM_SEEN_USED, -1 }, /* a window set late: used, when unknown */
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		/* one 8-byte window in place */
		struct ffm_store_sync_use u = { .flags = t[i].flags, .use_delay_ns = t[i].delay,
						.prot_lo = 0x1000, .prot_hi = 0x1000 + t[i].bytes,
						.watched_bytes = t[i].bytes < 8 ? t[i].bytes : 8 };
		int64_t d;

		ASSERT_MSG(ffm_verdict_seen(&u, &d) == t[i].seen, "row %zu", i);
		ASSERT_MSG(d == t[i].out_delay, "row %zu: delay %" PRId64, i, d);
	}
}

/* Rows of schema 7 say what their windows watched; a row watching every byte is a full NONE. */
TEST(watched_bytes_decide_none_and_coverage)
{
	static const struct {
		uint64_t bytes, watched, covered;
		uint8_t seen;
		double coverage;
	} t[] = {
		{ 4096, 0, 0, FFM_SEEN_NONE_PART, 0 },	/* nothing watched: no share claimed */
		{ 4096, 8, 8, FFM_SEEN_NONE_PART, 8.0 / 4096 }, /* an older row: the first 8 bytes */
		{ 4096, 32, 1024, FFM_SEEN_NONE_PART, 0.25 },	/* 4 windows, a quarter covered */
		{ 24, 24, 24, FFM_SEEN_NONE, 1.0 },		/* a small range watched in full */
		{ 4096, 32, 4096, FFM_SEEN_NONE_PART, 1.0 },	/* covered over time, not at once */
		{ 4096, 8, 8192, FFM_SEEN_NONE_PART, 1.0 },	/* a bound, never above 1 */
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct ffm_store_sync_use u = { .flags = FFM_SYNC_USE_NONE, .use_delay_ns = -1,
						.prot_lo = 0x1000, .prot_hi = 0x1000 + t[i].bytes,
						.watched_bytes = t[i].watched,
						.covered_bytes = t[i].covered };
		int64_t d;
		double c = ffm_verdict_coverage(&u);

		ASSERT_MSG(ffm_verdict_seen(&u, &d) == t[i].seen, "row %zu", i);
		ASSERT_MSG(c > t[i].coverage - 1e-9 && c < t[i].coverage + 1e-9, "row %zu: %f", i, c);
	}
	struct ffm_store_sync_use none = { .flags = FFM_SYNC_USE_NONE, .use_delay_ns = -1 };

	ASSERT(ffm_verdict_coverage(&none) < 0); /* protects nothing */
}

TEST(ranges_of_one_sync_fold_into_one)
{
	static const struct {
		uint8_t seen;
		int64_t delay;
		uint8_t row;
		int64_t row_delay;
		uint8_t out;
		int64_t out_delay;
	} t[] = {
		{ FFM_SEEN_NONE, -1, FFM_SEEN_USED, 9, FFM_SEEN_USED, 9 },	 /* any range used */
		{ FFM_SEEN_USED, 9, FFM_SEEN_USED, 4, FFM_SEEN_USED, 4 },	 /* earliest use */
		{ FFM_SEEN_USED, 4, FFM_SEEN_USED, 9, FFM_SEEN_USED, 4 },
		{ FFM_SEEN_USED, 4, FFM_SEEN_NONE, -1, FFM_SEEN_USED, 4 },
		{ FFM_SEEN_USED, 4, FFM_SEEN_UNKNOWN, -1, FFM_SEEN_USED, 4 },
		{ FFM_SEEN_NONE, -1, FFM_SEEN_UNKNOWN, -1, FFM_SEEN_UNKNOWN, -1 }, /* weakest "none" */
		{ FFM_SEEN_NONE, -1, FFM_SEEN_NONE_PART, -1, FFM_SEEN_NONE_PART, -1 },
		{ FFM_SEEN_NONE_PART, -1, FFM_SEEN_UNKNOWN, -1, FFM_SEEN_UNKNOWN, -1 },
		{ FFM_SEEN_UNKNOWN, -1, FFM_SEEN_NONE_PART, -1, FFM_SEEN_UNKNOWN, -1 },
		{ FFM_SEEN_UNKNOWN, -1, FFM_SEEN_NONE, -1, FFM_SEEN_UNKNOWN, -1 },
		{ FFM_SEEN_USED, 4, FFM_SEEN_USED, -1, FFM_SEEN_USED, 4 }, /* a use at an unknown time */
		{ FFM_SEEN_USED, -1, FFM_SEEN_USED, 9, FFM_SEEN_USED, 9 },
		{ FFM_SEEN_NONE, -1, FFM_SEEN_USED, -1, FFM_SEEN_USED, -1 },
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		uint8_t s = t[i].seen;
		int64_t d = t[i].delay;

		ffm_verdict_add_range(&s, &d, t[i].row, t[i].row_delay);
		ASSERT_MSG(s == t[i].out && d == t[i].out_delay, "row %zu: %u %" PRId64, i, s, d);
	}
}

TEST(misplaced_needs_a_real_gap)
{
	static const struct {
		int64_t delay;
		uint64_t wait;
		bool misplaced;
	} t[] = {
		{ -1, 500 * US, false },	/* nothing timed */
		{ 2 * US, 500 * US, false },	/* used at once: noise */
		{ 19 * US, 100 * US, false },	/* under the floor */
		{ 20 * US, 100 * US, true },	/* at the floor, 20% of the wait */
		{ 1 * MS, 10 * US, false },	/* the wait is under the floor: nothing to save */
		{ 30 * US, 10 * MS, false },	/* a sliver of a long wait */
		{ 1 * MS, 10 * MS, true },	/* 10% of the wait */
		{ 999 * US, 20 * MS, false },	/* < 10% and < 1 ms */
		{ 1 * MS, 50 * MS, true },	/* ≥ 1 ms per occurrence adds up */
		{ 1 * MS, 500 * US, true },	/* the synthetic misplaced step */
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		ASSERT_MSG(ffm_verdict_site_misplaced(t[i].delay, t[i].wait) == t[i].misplaced,
			   "row %zu", i);
}

TEST(each_occurrence_gets_one_verdict)
{
	static const struct {
		uint8_t seen;
		bool site_used, site_misplaced;
		int64_t delay;
		uint64_t wait;
		enum ffm_verdict v;
	} t[] = {
		{ FFM_SEEN_NONE, false, false, -1, 100, FFM_VERDICT_UNNECESSARY },
		{ FFM_SEEN_NONE, true, true, -1, 100, FFM_VERDICT_UNNECESSARY },
		{ FFM_SEEN_NONE_PART, false, false, -1, 100, FFM_VERDICT_UNNECESSARY },
		{ FFM_SEEN_NONE_PART, true, false, -1, 100, FFM_VERDICT_WITHHELD }, /* the site decides */
		{ FFM_SEEN_UNKNOWN, false, false, -1, 100, FFM_VERDICT_WITHHELD },
		/* a misplaced site decides for a sync whose use went unseen, if it waited */
		{ FFM_SEEN_UNKNOWN, true, true, -1, 100, FFM_VERDICT_MISPLACED },
		{ FFM_SEEN_NONE_PART, true, true, -1, 100, FFM_VERDICT_MISPLACED },
		{ FFM_SEEN_NONE_PART, true, true, -1, 0, FFM_VERDICT_WITHHELD },
		{ FFM_SEEN_USED, false, false, 5 * MS, 100, FFM_VERDICT_REQUIRED }, /* site not misplaced */
		{ FFM_SEEN_USED, true, true, 5 * MS, 100, FFM_VERDICT_MISPLACED },
		{ FFM_SEEN_USED, true, true, 0, 100, FFM_VERDICT_REQUIRED },  /* no gap here */
		{ FFM_SEEN_USED, true, true, -1, 100, FFM_VERDICT_REQUIRED }, /* not timed */
		{ FFM_SEEN_USED, true, true, 5 * MS, 0, FFM_VERDICT_REQUIRED }, /* did not wait */
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		ASSERT_MSG(ffm_verdict_sync(t[i].seen, t[i].site_used, t[i].site_misplaced,
					    t[i].delay, t[i].wait) == t[i].v, "row %zu", i);
	ASSERT_EQ(ffm_verdict_problem(FFM_VERDICT_UNNECESSARY), FFM_PROBLEM_UNNECESSARY_SYNC);
	ASSERT_EQ(ffm_verdict_problem(FFM_VERDICT_MISPLACED), FFM_PROBLEM_MISPLACED_SYNC);
	ASSERT_EQ(ffm_verdict_problem(FFM_VERDICT_REQUIRED), FFM_PROBLEM_NONE);
	ASSERT_EQ(ffm_verdict_problem(FFM_VERDICT_WITHHELD), FFM_PROBLEM_NONE);
}

TEST(join_and_majorities)
{
	static const struct {
		uint64_t k, n2;
		size_t n, j;
	} join[] = {
		{ 0, 3, 3, 0 }, { 2, 3, 3, 2 },		/* the identity when counts agree */
		{ 0, 3, 2, 0 }, { 1, 3, 2, 0 }, { 2, 3, 2, 1 }, /* fewer rows: spread */
		{ 3, 3, 6, 6 }, { 9, 3, 2, 1 },		/* past the end: the last row */
		{ 5, 0, 4, 0 },
	};
	static const struct {
		uint64_t n2, n;
		bool differ;
	} counts[] = {
		{ 100, 100, false }, { 100, 95, false }, { 100, 94, true }, { 100, 106, true },
		{ 3, 2, false }, { 3, 1, true }, { 0, 1, false }, { 0, 2, true },
	};
	size_t sync_none[4] = { 3, 1, 0, 1 }, sync_part[4] = { 1, 1, 0, 2 }, sync_used[4] = { 1, 3, 2, 0 },
	       sync_unknown[4] = { 1, 1, 3, 0 }, dup[4] = { 1, 4, 2, 0 };

	for (size_t i = 0; i < sizeof(join) / sizeof(join[0]); i++) {
		size_t want = join[i].j >= join[i].n ? join[i].n - 1 : join[i].j;

		ASSERT_MSG(ffm_verdict_join(join[i].k, join[i].n2, join[i].n) == want, "join %zu", i);
	}
	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
		ASSERT_MSG(ffm_verdict_counts_differ(counts[i].n2, counts[i].n) == counts[i].differ,
			   "counts %zu", i);
	ASSERT_EQ(ffm_verdict_majority_sync(sync_none, 5), FFM_SEEN_NONE_PART); /* 4 of 5 unused */
	ASSERT_EQ(ffm_verdict_majority_sync(sync_part, 4), FFM_SEEN_NONE_PART);
	ASSERT_EQ(ffm_verdict_majority_sync(sync_used, 6), FFM_SEEN_USED);
	ASSERT_EQ(ffm_verdict_majority_sync(sync_unknown, 5), FFM_SEEN_UNKNOWN);
	ASSERT_EQ(ffm_verdict_majority_dup(dup), FFM_DUP_SAME_DST);
}

/* ---- several results into one ------------------------------------------------------------- */

static struct ffm_an_site site_of(uint64_t key, const char *fn, uint64_t count, uint64_t dur,
				  uint64_t wait, uint64_t benefit)
{
	return (struct ffm_an_site){ .key = key, .api_name = "cuCtxSynchronize", .function = fn,
				     .file = "app.c", .module = "app", .folded = fn, .count = count,
				     .dur_ns = dur, .wait_ns = wait, .benefit_ns = benefit,
				     .use_delay_ns = -1, .first_xfer_site = -1, .in_timeline = true };
}

TEST(merge_of_nodes_by_call_site)
{
	struct ffm_an_site s1[] = { site_of(0xa, "f", 10, 100, 90, 50), site_of(0xb, "g", 5, 50, 40, 0) };
	struct ffm_an_site s2[] = { site_of(0xa, "f", 20, 200, 180, 150) };
	struct ffm_an_group g1[] = {
		{ .key = 0xa, .problems = 1u << FFM_PROBLEM_UNNECESSARY_SYNC, .count = 10,
		  .occurrences = 10, .n_type[FFM_PROBLEM_UNNECESSARY_SYNC] = 10, .wait_ns = 90,
		  .benefit_ns = 50, .site = 0 },
	};
	struct ffm_an_group g2[] = {
		{ .key = 0xa, .problems = 1u << FFM_PROBLEM_MISPLACED_SYNC, .count = 20,
		  .occurrences = 20, .n_type[FFM_PROBLEM_MISPLACED_SYNC] = 20, .wait_ns = 180,
		  .benefit_ns = 150, .site = 0, .partial = true },
		{ .key = 0xc, .count = 1, .occurrences = 1, .wait_ns = 5, .benefit_ns = 300, .site = 0 },
	};
	struct ffm_an_api a1[] = { { .api = 1, .name = "cuCtxSynchronize", .calls = 15, .dur_ns = 150,
				     .wait_ns = 130, .benefit_ns = 50, .problems = 10 } };
	struct ffm_an_api a2[] = { { .api = 7, .name = "cuCtxSynchronize", .calls = 20, .dur_ns = 200,
				     .wait_ns = 180, .benefit_ns = 150, .problems = 20 },
				   { .api = 8, .name = "cuMemFree", .calls = 0 } };
	struct ffm_an_run runs[] = { { .id = 1, .stage = 2, .ended = true },
				     { .id = 2, .stage = 3, .ended = true } };
	struct ffm_an_proc p1[] = { { .tgid = 1, .benefit_ns = 50, .threads = 1 } };
	struct ffm_an_proc p2[] = { { .tgid = 2, .benefit_ns = 150, .threads = 1 },
				    { .tgid = 3, .benefit_ns = 0, .threads = 0 } };
	struct ffm_analysis_result r1 = { .sites = s1, .n_sites = 2, .groups = g1, .n_groups = 1,
					  .apis = a1, .n_apis = 1, .runs = runs, .n_runs = 2,
					  .procs = p1, .n_procs = 1, .have_problems = true,
					  .wall_ns = 1000, .totals.total_ns = 50 };
	struct ffm_analysis_result r2 = { .sites = s2, .n_sites = 1, .groups = g2, .n_groups = 2,
					  .apis = a2, .n_apis = 2, .runs = runs, .n_runs = 1,
					  .procs = p2, .n_procs = 2, .wall_ns = 3000,
					  .totals.total_ns = 150 };
	const struct ffm_analysis_result *r[] = { &r1, &r2 };
	struct ffm_an_merged m;

	r1.q.divergent_sites = 1;
	r2.q.withheld_syncs = 4;
	ASSERT_OK(ffm_an_merge(r, 2, &m));
	ASSERT_EQ(m.n_groups, 2u);
	/* by benefit: 0xc (300) before 0xa (50 + 150) */
	ASSERT_EQ(m.groups[0].g.key, 0xcu);
	ASSERT_EQ(m.groups[0].node, 1u);
	ASSERT_EQ(m.groups[1].g.key, 0xau);
	ASSERT_EQ(m.groups[1].nodes, 2u);
	ASSERT_EQ(m.groups[1].node, 0u); /* names from the first node that has it */
	ASSERT_EQ(m.groups[1].g.benefit_ns, 200u);
	ASSERT_EQ(m.groups[1].g.count, 30u);
	ASSERT_EQ(m.groups[1].g.problems,
		  (1u << FFM_PROBLEM_UNNECESSARY_SYNC) | (1u << FFM_PROBLEM_MISPLACED_SYNC));
	ASSERT(m.groups[1].g.partial);
	ASSERT_EQ(ffm_an_main_problem(m.groups[1].g.n_type), FFM_PROBLEM_MISPLACED_SYNC);
	/* APIs by name; one without calls or problems is left out */
	ASSERT_EQ(m.n_apis, 1u);
	ASSERT_EQ(m.apis[0].calls, 35u);
	ASSERT_EQ(m.apis[0].benefit_ns, 200u);
	ASSERT_EQ(m.rec_ns, 200u);
	ASSERT_EQ(m.wall_sum_ns, 4000u);
	ASSERT_EQ(m.wall_max_ns, 3000u);
	ASSERT(m.have_problems);
	ASSERT_EQ(m.stages_done, (1u << 2) | (1u << 3));
	ASSERT_EQ(m.q.divergent_sites, 1u);
	ASSERT_EQ(m.q.withheld_syncs, 4u);
	ASSERT_NEAR(m.imbalance, 150.0 / 100.0 - 1, 1e-9);	/* max / mean - 1 over nodes */
	ASSERT_NEAR(m.proc_imbalance, 150.0 / 100.0 - 1, 1e-9); /* processes that used the driver */
	ffm_an_merged_free(&m);

	ASSERT_OK(ffm_an_merge(r, 1, &m));
	ASSERT(m.imbalance == -1 && m.proc_imbalance == -1); /* one node, one process */
	ffm_an_merged_free(&m);
}

TEST(compare_of_two_jobs_by_call_site)
{
	struct ffm_an_site pred[] = { site_of(0xa, "f", 10, 100, 90, 60),
				      site_of(0xb, "g", 5, 50, 40, 0) };
	struct ffm_an_site before[] = { site_of(0xa, "f", 10, 100, 90, 0),
					site_of(0xb, "g", 5, 50, 40, 0) };
	struct ffm_an_site after[] = { site_of(0xa, "f", 10, 30, 20, 0), site_of(0xd, "h", 2, 8, 0, 0),
				       site_of(0xe, "i", 0, 0, 0, 0) };
	struct ffm_analysis_result rp = { .sites = pred, .n_sites = 2 };
	struct ffm_analysis_result rb = { .sites = before, .n_sites = 2 };
	struct ffm_analysis_result ra = { .sites = after, .n_sites = 3 };
	const struct ffm_analysis_result *p[] = { &rp }, *b[] = { &rb }, *a[] = { &ra };
	struct ffm_an_diff_row *rows = NULL;
	size_t n = 0;

	ASSERT_OK(ffm_an_compare(p, b, 1, a, 1, 2, &rows, &n));
	ASSERT_EQ(n, 3u); /* a site without calls on either side is no row */
	ASSERT_EQ(rows[0].key, 0xau); /* the predicted first */
	ASSERT_EQ(rows[0].predicted_ns, 60u);
	ASSERT_EQ(rows[0].before_ns, 100u); /* stage 2: time in the calls */
	ASSERT_EQ(rows[0].after_ns, 30u);
	ASSERT_EQ(rows[0].n_before, 10u);
	ASSERT_EQ(rows[1].key, 0xbu); /* then by time before */
	ASSERT_EQ(rows[1].after_ns, 0u);
	ASSERT_EQ(rows[2].key, 0xdu);
	ASSERT_EQ(rows[2].n_before, 0u);
	ASSERT_EQ(rows[2].n_after, 2u);
	ASSERT_STREQ(rows[2].site->function, "h");
	free(rows);

	ASSERT_OK(ffm_an_compare(p, b, 1, a, 1, 1, &rows, &n));
	ASSERT_EQ(rows[0].before_ns, 90u); /* stage 1: time waited */
	ASSERT_EQ(rows[0].after_ns, 20u);
	free(rows);
}

/* ---- identity ----------------------------------------------------------------------------- */

TEST(call_site_keys_keep_their_values)
{
	static const struct {
		const char *api, *function;
		uint32_t line;
		uint64_t key;
	} want[] = {
		{ "cuCtxSynchronize", "step_unnecessary", 11, 0xac164f5d1aac7c47ULL },
		{ "cuCtxSynchronize", "step_misplaced", 22, 0xc92b1decc0e5c6c6ULL },
		{ "cuCtxSynchronize", "step_control", 41, 0xb0c7f21aa4566ae0ULL },
		{ "cuCtxSynchronize", "seq_required", 53, 0xdef23c5ef990c5dbULL },
		{ "cuMemcpyHtoD", "step_dup", 30, 0xd6c4759b72a9dd6cULL },
		{ "cuLaunchKernel", "seq_launch", 50, 0x58228f47441142faULL },
		{ "cuMemcpyDtoHAsync", "step_misplaced", 21, 0xbdc71295bc90e769ULL },
	};
	char dir[] = "/tmp/ffm-test-keys-XXXXXX", cmd[128];
	struct synth_opts o = { .key = "k", .job_id = "j", .scenarios = (1u << SYN__MAX) - 1,
				.iters = 10, .stages = 4 };
	struct ffm_store_opts so = { .sz = sizeof(so), .read_only = true };
	struct ffm_analysis_opts ao = { .sz = sizeof(ao), .job_id = "j",
					.grouping = FFM_GROUP_SEQUENCE };
	const struct ffm_analysis_result *r;
	struct ffm_analysis *a = NULL;
	struct ffm_store *s = NULL;
	bool seq = false;

	ASSERT(mkdtemp(dir));
	o.state_dir = dir;
	ASSERT_OK(synth__write(&o));
	ASSERT_OK(ffm_store__find_job(dir, "j", &so, &s));
	ASSERT_OK(ffm_analysis__run(s, &ao, &a));
	r = ffm_analysis__result(a);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		bool found = false;

		for (size_t k = 0; k < r->n_sites; k++)
			if (!strcmp(r->sites[k].api_name, want[i].api) &&
			    !strcmp(r->sites[k].function, want[i].function) &&
			    r->sites[k].line == want[i].line) {
				ASSERT_MSG(r->sites[k].key == want[i].key, "%s:%u: %#" PRIx64,
					   want[i].function, want[i].line, r->sites[k].key);
				found = true;
			}
		ASSERT_MSG(found, "no site %s:%u", want[i].function, want[i].line);
	}
	/* A sequence's key hashes its members' keys. */
	for (size_t i = 0; i < r->n_groups; i++)
		seq |= r->groups[i].key == 0xf0bb38ec195ea456ULL && r->groups[i].n_members == 2;
	ASSERT(seq);
	ffm_analysis__free(a);
	ffm_store__free(s);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ASSERT_EQ(system(cmd), 0);
}

TEST_MAIN()
