/* SPDX-License-Identifier: MIT */
/*
 * The analysis library (analysis/) on synthetic stores with known answers
 * (tests/report/synth.h): planted problems -> expected benefits to the nanosecond, call sites,
 * groupings, subsequences, the stage 2 <-> 3/4 join (tolerance, majority, partial coverage,
 * several rows per sync), parallel slices, which runs a job's report uses.
 */
#include <stdlib.h>
#include <sys/stat.h>

#include "analysis/ffm_analysis.h"
#include "tests/report/synth.h"
#include "tests/testutil.h"

static char tmpl[] = "/tmp/ffm-test-analysis-XXXXXX";
static char *root;
static int seq;

/* A fresh state directory per store. */
static const char *fresh_dir(void)
{
	static char dir[512];

	if (!root)
		root = mkdtemp(tmpl);
	snprintf(dir, sizeof(dir), "%s/s%d", root, ++seq);
	return dir;
}

static struct synth_opts base(unsigned scenarios)
{
	return (struct synth_opts){
		.state_dir = fresh_dir(), .key = "key", .job_id = "j1", .scenarios = scenarios,
		.iters = 50, .stages = 4,
	};
}

static struct ffm_store *open_store(const struct synth_opts *o)
{
	struct ffm_store_opts so = { .sz = sizeof(so), .read_only = true };
	struct ffm_store *s = NULL;

	if (ffm_store__open_key(o->state_dir, &(struct ffm_store_key){ .key = o->key, .uid = SYNTH_UID },
				&so, &s))
		return NULL;
	return s;
}

/* Write o's store and analyse job j1 with the given grouping. */
static struct ffm_analysis *analyse(const struct synth_opts *o, enum ffm_grouping g,
				    unsigned threads, bool keep)
{
	struct ffm_analysis_opts ao = { .sz = sizeof(ao), .job_id = o->job_id, .grouping = g,
					.scan_threads = threads, .keep_graph = keep };
	struct ffm_analysis *a = NULL;
	struct ffm_store *s;
	int err = synth__write(o);

	if (err)
		FAIL("synth__write: %s", strerror(-err));
	s = open_store(o);
	if (!s)
		FAIL("cannot open the synthetic store");
	err = ffm_analysis__run(s, &ao, &a);
	/* the analysis keeps no pointer into the store for its results, but the graph needs it
	 * only during run: closing here also checks that */
	ffm_store__free(s);
	if (err)
		FAIL("ffm_analysis__run: %s", strerror(-err));
	return a;
}

static unsigned main_type_of(const uint64_t *n_type)
{
	unsigned best = 0;

	for (unsigned t = 1; t < FFM_PROBLEM__MAX; t++)
		if (n_type[t] > n_type[best])
			best = t;
	return best;
}

static const struct ffm_an_site *site_at_line(const struct ffm_analysis_result *r, uint32_t line)
{
	for (size_t i = 0; i < r->n_sites; i++)
		if (r->sites[i].line == line)
			return &r->sites[i];
	return NULL;
}

/*
 * The required-read rule (docs/ACCURACY.md): a host read whose value is first used before its
 * thread's next GPU submission may feed it: conditional, priced apart, in no total; one used
 * after that submission only counts. The sync waits K, its call returns 20 µs later, C after
 * that the next iteration launches; the use comes use_us after the wait.
 */
TEST(reads_whose_value_may_feed_the_next_step_are_conditional)
{
	static const struct {
		uint32_t k_us, c_us, use_us;
		bool conditional;
	} cases[] = {
		{ 2000, 100, 100, true },   /* used at 100 µs, the next launch at 120 µs */
		{ 2000, 100, 119, true },   /* ... just before it */
		{ 2000, 100, 150, false },  /* the launch first: the value waits for nothing */
		{ 2000, 30, 100, false },   /* ... a shorter CPU stretch */
		{ 500, 1000, 2, true },	    /* the default loop: used at once */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct synth_opts o = base(1u << SYN_HOST_READ);
		const struct ffm_analysis_result *r;
		const struct ffm_an_site *x;
		struct ffm_analysis *a;
		uint64_t want;

		o.iters = 2 * FFM_HOST_READ_MIN_COUNT;
		o.k_us = cases[i].k_us;
		o.c_us = cases[i].c_us;
		o.use_us = cases[i].use_us;
		want = synth__expected(&o, SYN_HOST_READ);
		a = analyse(&o, FFM_GROUP_POINT, 1, false);
		r = ffm_analysis__result(a);
		ASSERT_EQ(r->n_groups, 1);
		x = &r->sites[r->groups[0].site];
		ASSERT_MSG(x->read_conditional == cases[i].conditional,
			   "case %zu: %" PRIu64 " uses first, %" PRIu64 " submissions first", i,
			   x->n_use_first, x->n_submit_first);
		ASSERT_EQ(r->groups[0].conditional, cases[i].conditional);
		/* the price is the model's either way: reading every N iterations */
		ASSERT_MSG(r->groups[0].benefit_ns == want, "case %zu: %" PRIu64 " ns, want %" PRIu64,
			   i, r->groups[0].benefit_ns, want);
		ASSERT_EQ(r->totals.total_ns, cases[i].conditional ? 0 : want);
		ASSERT_EQ(r->apis[0].benefit_ns + (r->n_apis > 1 ? r->apis[1].benefit_ns : 0),
			  cases[i].conditional ? 0 : r->apis[0].benefit_ns +
							(r->n_apis > 1 ? r->apis[1].benefit_ns : 0));
		ffm_analysis__free(a);
	}
}

/* What the model prices: the headline, or a conditional read's own price (the only group). */
static uint64_t priced_ns(const struct ffm_analysis_result *r)
{
	return r->n_groups == 1 && r->groups[0].conditional ? r->groups[0].benefit_ns :
							       r->totals.total_ns;
}

TEST(each_planted_problem_gets_its_expected_benefit)
{
	static const struct {
		enum synth_scenario sc;
		enum ffm_problem type;
	} cases[] = {
		{ SYN_UNNECESSARY, FFM_PROBLEM_UNNECESSARY_SYNC },
		{ SYN_MISPLACED, FFM_PROBLEM_MISPLACED_SYNC },
		{ SYN_DUP, FFM_PROBLEM_DUPLICATE_TRANSFER },
		/* the read's copy and sync calls are deleted with its wait (ffm_event.removed_ns) */
		{ SYN_HOST_READ, FFM_PROBLEM_HOST_READ },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct synth_opts o = base(1u << cases[i].sc);
		struct ffm_analysis *a;
		const struct ffm_analysis_result *r;
		const struct ffm_an_site *x;
		uint64_t want;

		if (cases[i].sc == SYN_HOST_READ)
			o.iters = 2 * FFM_HOST_READ_MIN_COUNT; /* a loop */
		a = analyse(&o, FFM_GROUP_POINT, 1, false);
		r = ffm_analysis__result(a);
		x = &r->sites[r->groups[0].site];
		want = synth__expected(&o, cases[i].sc);

		ASSERT(r->have_problems);
		ASSERT_EQ(r->n_groups, 1);
		ASSERT_EQ(r->groups[0].benefit_ns, want);
		/* the read's value is used (2 µs) before the next launch (C later): it may feed
		 * that launch, a conditional read, in no total (the required-read rule) */
		ASSERT_EQ(r->groups[0].conditional, cases[i].sc == SYN_HOST_READ);
		ASSERT_EQ(r->totals.total_ns, cases[i].sc == SYN_HOST_READ ? 0 : want);
		ASSERT_EQ(main_type_of(r->groups[0].n_type), cases[i].type);
		ASSERT_EQ(x->line, synth__line(cases[i].sc));
		ASSERT_STREQ(x->file, "app.c");
		ASSERT_STREQ(x->module, "app");
		ASSERT_EQ(x->benefit_ns, want);
		if (cases[i].sc != SYN_HOST_READ) /* there: the line's copies and syncs */
			ASSERT_EQ(r->groups[0].count, cases[i].sc == SYN_DUP ? o.iters - 1 : o.iters);
		ASSERT_EQ(r->q.divergent_sites, 0);
		ASSERT_EQ(r->q.unclassified_syncs, 0);
		ffm_analysis__free(a);
	}
}

/*
 * Waits that the timeline's probes hid (analysis/hidden.c): a removed sync takes along how
 * much longer the baseline waited, at most the larger of the probe cost since its thread's
 * first submission after the last sync and how much the thread's CPU time between two of the
 * site's syncs grew from the baseline to the timeline; nothing without a probe cost.
 */
TEST(removed_syncs_take_the_waits_the_probes_hid)
{
	static const struct {
		enum synth_scenario sc;
		uint32_t probe_us, extra_us, cpu_less_us, hidden_us;
		bool copy_waits; /* synth_opts.read_copy_waits */
		uint32_t every;	 /* synth_opts.base_extra_every */
	} cases[] = {
		/* read: launch, copy, sync: the span is two calls (the first one's cost is 0:
		 * nothing was paid before it) */
		{ SYN_HOST_READ, 3, 100, 0, 6 },   /* the probe span bounds it (same CPU time) */
		{ SYN_HOST_READ, 3, 100, 2, 6 },   /* ... the CPU grew less than accounted */
		{ SYN_HOST_READ, 3, 100, 40, 40 }, /* the CPU's growth bounds it */
		{ SYN_HOST_READ, 3, 100, 80, 48 }, /* ... up to 8 times the span: load */
		{ SYN_HOST_READ, 3, 30, 30, 30 },  /* ... and the baseline */
		{ SYN_HOST_READ, 3, 4, 0, 4 },	   /* the baseline bounds it */
		{ SYN_HOST_READ, 3, 0, 0, 0 },	   /* the GPU ran dry: nothing hidden */
		{ SYN_HOST_READ, 0, 100, 50, 0 },  /* no probe cost measured (schema 7) */
		/* every other baseline wait 100 µs longer: the mean (the top and bottom hundredth
		 * left out: 98 of 196), not the median (100 µs, which the span would cut to 60) */
		{ SYN_HOST_READ, 30, 100, 100, 50, false, 2 },
		/* the read waits inside its copy (pageable memory), which goes with it: the span
		 * ends where that wait began (the launch's cost) */
		{ SYN_HOST_READ, 3, 100, 0, 3, true },
		{ SYN_HOST_READ, 3, 100, 20, 20, true },
		{ SYN_HOST_READ, 3, 100, 40, 24, true },
		{ SYN_HOST_READ, 3, 4, 0, 3, true },
		{ SYN_HOST_READ, 3, 2, 0, 2, true },
		{ SYN_HOST_READ, 3, 0, 0, 0, true },
		{ SYN_UNNECESSARY, 5, 100, 0, 5 }, /* launch, sync: one call */
		{ SYN_UNNECESSARY, 5, 100, 35, 35 },
		{ SYN_UNNECESSARY, 5, 100, 70, 40 }, /* 8 times the span */
		{ SYN_CONTROL, 5, 100, 50, 0 },	   /* nothing removed: nothing taken along */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct synth_opts o = base(1u << cases[i].sc);
		const struct ffm_analysis_result *r;
		struct ffm_analysis *a;
		uint64_t removed, want;

		o.iters = 2 * FFM_HOST_READ_MIN_COUNT;
		o.probe_us = cases[i].probe_us;
		o.base_extra_us = cases[i].extra_us;
		o.base_cpu_less_us = cases[i].cpu_less_us;
		o.read_copy_waits = cases[i].copy_waits;
		o.base_extra_every = cases[i].every;
		removed = cases[i].sc == SYN_HOST_READ ? o.iters - o.iters / FFM_HOST_READ_EVERY :
			  cases[i].sc == SYN_UNNECESSARY ? o.iters : 0;
		want = synth__expected(&o, cases[i].sc) + removed * cases[i].hidden_us * 1000;
		a = analyse(&o, FFM_GROUP_POINT, 1, false);
		r = ffm_analysis__result(a);
		ASSERT_MSG(priced_ns(r) == want, "case %zu: %" PRIu64 " ns, want %" PRIu64, i,
			   priced_ns(r), want);
		ASSERT_MSG(r->q.hidden_removed_ns == removed * cases[i].hidden_us * 1000,
			   "case %zu: %" PRIu64 " ns hidden", i, r->q.hidden_removed_ns);
		ffm_analysis__free(a);
	}
}

/*
 * A loop whose GPU runs through the stretch before each removed sync (the baseline waited
 * longer than the timeline by the probes' cost: the GPU did not wait for the CPU): its fix
 * saves at most the time the GPU idled after each wait, until the thread's next submission
 * (stages/ffm_model.h, "GPU idle after the sync"). Where the GPU ran dry (the same waits in
 * both runs) Figure 5's CPU time until the next sync stands.
 */
TEST(gpu_bound_loops_save_the_gpus_idle_time)
{
	static const struct {
		enum synth_scenario sc;
		uint32_t probe_us, extra_us;
		uint64_t per_us; /* the benefit per removed sync */
		uint64_t idle_syncs;
	} cases[] = {
		/* the sync call's 20 µs after its wait, then C: the launch and copy after it
		 * run beside the GPU's work (the span: two calls) */
		{ SYN_HOST_READ, 25, 100, 20 + 100, 1 },
		/* C and the launch and copy until the next read (C + 2L) */
		{ SYN_HOST_READ, 25, 0, 100 + 2 * 50, 0 },
		/* a span too short to tell (6 µs) */
		{ SYN_HOST_READ, 3, 100, 100 + 2 * 50, 0 },
		{ SYN_UNNECESSARY, 25, 100, 100, 1 },
		{ SYN_UNNECESSARY, 25, 0, 100 + 50, 0 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct synth_opts o = base(1u << cases[i].sc);
		const struct ffm_analysis_result *r;
		struct ffm_analysis *a;
		uint64_t removed;

		o.iters = 2 * FFM_HOST_READ_MIN_COUNT;
		o.l_us = 50;
		o.c_us = 100;
		o.probe_us = cases[i].probe_us;
		o.base_extra_us = cases[i].extra_us;
		removed = cases[i].sc == SYN_HOST_READ ? o.iters - o.iters / FFM_HOST_READ_EVERY :
							 o.iters;
		a = analyse(&o, FFM_GROUP_POINT, 1, false);
		r = ffm_analysis__result(a);
		/* the last removed sync has no next submission: Figure 5's CPU time, here all of
		 * its wait and calls (nothing follows to absorb them, C at the end) */
		ASSERT_MSG(r->q.gpu_idle_syncs == cases[i].idle_syncs * (removed - 1) ||
				   r->q.gpu_idle_syncs == cases[i].idle_syncs * removed,
			   "case %zu: %" PRIu64 " syncs bounded by the GPU's idle time", i,
			   r->q.gpu_idle_syncs);
		ASSERT_MSG(priced_ns(r) >= removed * cases[i].per_us * 1000 - 1000 * 1000 &&
				   priced_ns(r) <= removed * cases[i].per_us * 1000 + 1000 * 1000,
			   "case %zu: %" PRIu64 " ns, want %" PRIu64 " per removed sync", i,
			   priced_ns(r), cases[i].per_us * 1000);
		ffm_analysis__free(a);
	}
}

/* Threads that sync at one line side by side: each thread's CPU gaps are its own. */
TEST(hidden_waits_count_each_threads_own_cpu_time)
{
	struct synth_opts o = base(1u << SYN_UNNECESSARY);
	const struct ffm_analysis_result *r;
	struct ffm_analysis *a;

	o.threads = 3;
	o.probe_us = 5;
	o.base_extra_us = 100;
	o.base_cpu_less_us = 35;
	a = analyse(&o, FFM_GROUP_POINT, 1, false);
	r = ffm_analysis__result(a);
	ASSERT_MSG(r->q.hidden_removed_ns == (uint64_t)o.threads * o.iters * 35 * 1000,
		   "%" PRIu64 " ns hidden", r->q.hidden_removed_ns);
	ffm_analysis__free(a);
}

/* The report of @o's job (its runs written last) read @runs baseline runs and took
 * @hidden_us along at each of the @o->iters removed syncs. */
static void check_hidden(const struct synth_opts *o, uint32_t runs, uint32_t hidden_us)
{
	struct ffm_analysis *a = analyse(o, FFM_GROUP_POINT, 1, false);
	const struct ffm_analysis_result *r = ffm_analysis__result(a);

	ASSERT_EQ(r->q.baseline_runs, runs);
	ASSERT_MSG(r->q.hidden_removed_ns == (uint64_t)o->iters * hidden_us * 1000,
		   "%" PRIu64 " ns hidden", r->q.hidden_removed_ns);
	ffm_analysis__free(a);
}

/*
 * The baseline is every usable stage-1 run of the key: the profile's and the monitoring runs
 * after it, each giving its median wait per key, the median of those counting. Failed and
 * incomplete runs stay out.
 */
TEST(hidden_waits_read_every_baseline_run)
{
	static const struct {
		const char *job;
		uint32_t extra_us; /* how much longer this stage-1 run waited */
		int32_t exit_status;
		uint32_t flags;
	} mon[] = {
		{ "m1", 100, 0, 0 },
		{ "m2", 10, 0, 0 },	 /* the newest usable: alone it would allow 10 us */
		{ "m3", 0, 1, 0 },	 /* the program failed */
		{ "m4", 0, 0, FFM_RUN_PARTIAL },
	};
	struct synth_opts o = base(1u << SYN_UNNECESSARY);

	o.probe_us = 5;
	o.base_extra_us = 100;
	o.base_cpu_less_us = 35;
	if (synth__write(&o))
		FAIL("synth__write stages 1-4");
	for (size_t i = 0; i < sizeof(mon) / sizeof(mon[0]); i++) {
		struct synth_opts m = o;

		m.job_id = mon[i].job;
		m.stages = 1;
		m.base_extra_us = mon[i].extra_us;
		m.base_cpu_less_us = mon[i].extra_us < 35 ? mon[i].extra_us : 35;
		m.exit_status = mon[i].exit_status;
		m.run_flags = mon[i].flags;
		if (i + 1 < sizeof(mon) / sizeof(mon[0]) && synth__write(&m))
			FAIL("synth__write %s", m.job_id);
		o = m;
	}
	/* baseline waits 100, 100, 10 us more than the timeline: 100; the CPU growth 35 binds */
	check_hidden(&o, 3, 35);
}

/* After a re-trace for drift, the stage-1 runs of before the drift are another program's. */
TEST(hidden_waits_after_a_retrace_read_the_runs_since_the_drift)
{
	struct synth_opts o = base(1u << SYN_UNNECESSARY), m;

	o.probe_us = 5;
	o.base_cpu_less_us = 0; /* stages 1-4 and a monitoring run that did not wait longer */
	if (synth__write(&o))
		FAIL("synth__write stages 1-4");
	m = o;
	m.job_id = "m1";
	m.stages = 1;
	if (synth__write(&m))
		FAIL("synth__write m1");
	m.job_id = "m2"; /* the run that drifted */
	m.base_extra_us = 100;
	m.base_cpu_less_us = 35;
	if (synth__write(&m))
		FAIL("synth__write m2");
	m.job_id = "r1"; /* the re-trace: stages 2-4 again */
	m.first_stage = 2;
	m.stages = 4;
	m.run_flags = FFM_RUN_RETRACE;
	check_hidden(&m, 1, 35);
}

TEST(duplicate_copies_cost_what_the_quieter_run_timed)
{
	static const struct {
		uint32_t t4_us, stages, want_us; /* T = 300 us in the timeline */
	} cases[] = {
		{ 200, 4, 200 }, /* the first-use run timed them lower: its median counts */
		{ 450, 4, 300 }, /* ... higher: the timeline's stands */
		{ 200, 3, 300 }, /* no first-use run: as measured */
	};
	uint64_t wall = 0;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct synth_opts o = base(1u << SYN_DUP);
		const struct ffm_analysis_result *r;
		struct ffm_analysis *a;
		uint64_t want, trimmed;

		o.stages = cases[i].stages;
		o.t4_us = cases[i].t4_us;
		want = (uint64_t)(o.iters - 1) * cases[i].want_us * 1000;
		trimmed = (uint64_t)(o.iters - 1) * (300 - cases[i].want_us) * 1000;
		a = analyse(&o, FFM_GROUP_POINT, 1, false);
		r = ffm_analysis__result(a);
		ASSERT_MSG(priced_ns(r) == want, "case %zu: %" PRIu64 " ns, want %" PRIu64, i,
			   priced_ns(r), want);
		ASSERT_MSG(r->q.dup_trimmed_ns == trimmed, "case %zu: %" PRIu64 " ns trimmed", i,
			   r->q.dup_trimmed_ns);
		/* the time taken off stays in the run: the timeline is the same in every case */
		ASSERT_MSG(!i || r->totals.wall_ns == wall, "case %zu: wall %" PRIu64 ", was %" PRIu64,
			   i, r->totals.wall_ns, wall);
		wall = r->totals.wall_ns;
		ffm_analysis__free(a);
	}
}

/*
 * Monitoring runs of a key whose copies repeat time them too: from 3 runs that timed a site's
 * copies on (the timeline's included), its copies cost the median of the runs' medians, higher
 * or lower than the timeline's; failed runs and runs that timed no copies give none.
 */
TEST(duplicate_copies_cost_the_median_of_the_runs_that_timed_them)
{
	static const struct {
		uint32_t mon_us[4]; /* monitoring runs' copies (0: no run; 1: waits only) */
		int32_t failed;	    /* ... the last of them failed */
		uint32_t want_us, runs;
	} cases[] = {
		/* T 300 in the timeline, 200 in the first-use run */
		{ { 450, 500, 480 }, 0, 450, 5 }, /* 200 300 450 480 500: the median, above T */
		{ { 250 }, 0, 250, 3 },		  /* 200 250 300: the first-use run's no longer */
		{ { 1, 1 }, 0, 200, 2 },	  /* waits only: the lower of two, as before */
		{ { 250, 260 }, 1, 250, 3 },	  /* the failed 260 out: 200 250 300 */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct synth_opts o = base(1u << SYN_DUP);
		const struct ffm_analysis_result *r;
		struct ffm_analysis *a;
		uint64_t want, moved;
		size_t n = 0;

		o.t4_us = 200;
		while (n < 4 && cases[i].mon_us[n])
			n++;
		for (size_t k = 0; k < n; k++) {
			if (synth__write(&o))
				FAIL("case %zu: synth__write run %zu", i, k);
			o.job_id = k == 0 ? "m1" : k == 1 ? "m2" : "m3";
			o.stages = 1;
			o.t1_us = cases[i].mon_us[k] > 1 ? cases[i].mon_us[k] : 0;
			o.exit_status = cases[i].failed && k + 1 == n;
		}
		a = analyse(&o, FFM_GROUP_POINT, 1, false);
		r = ffm_analysis__result(a);
		want = (uint64_t)(o.iters - 1) * cases[i].want_us * 1000;
		moved = (uint64_t)(o.iters - 1) * 1000 *
			(cases[i].want_us > 300 ? cases[i].want_us - 300 : 300 - cases[i].want_us);
		ASSERT_MSG(priced_ns(r) == want, "case %zu: %" PRIu64 " ns, want %" PRIu64, i,
			   priced_ns(r), want);
		ASSERT_MSG((cases[i].want_us > 300 ? r->q.dup_added_ns : r->q.dup_trimmed_ns) == moved,
			   "case %zu: %" PRIu64 " ns added, %" PRIu64 " trimmed", i, r->q.dup_added_ns,
			   r->q.dup_trimmed_ns);
		ASSERT_MSG(r->q.dup_price_runs == cases[i].runs, "case %zu: %u runs", i,
			   r->q.dup_price_runs);
		ffm_analysis__free(a);
	}
}

TEST(misplaced_evidence_first_use_and_stage4_delays)
{
	struct synth_opts o = base(1u << SYN_MISPLACED);
	struct ffm_analysis *a = analyse(&o, FFM_GROUP_POINT, 1, false);
	const struct ffm_analysis_result *r = ffm_analysis__result(a);
	const struct ffm_an_site *x = site_at_line(r, 22);

	ASSERT(x);
	ASSERT_EQ(x->n_misplaced, o.iters);
	ASSERT_EQ(x->use_delay_ns, 1000000); /* C = 1000 µs */
	ASSERT(!x->delays_from_stage3);
	ASSERT_STREQ(x->use_function, "step_misplaced");
	ASSERT_EQ(x->use_line, 24);
	ffm_analysis__free(a);

	/* Without stage 4, stage 3's delays stand, and the report is told. */
	o = base(1u << SYN_MISPLACED);
	o.stages = 3;
	a = analyse(&o, FFM_GROUP_POINT, 1, false);
	r = ffm_analysis__result(a);
	x = site_at_line(r, 22);
	ASSERT(x && x->delays_from_stage3);
	ASSERT_EQ(r->totals.total_ns, synth__expected(&o, SYN_MISPLACED));
	ffm_analysis__free(a);
}

TEST(several_protected_ranges_are_one_sync)
{
	struct synth_opts o = base(1u << SYN_MISPLACED);
	struct ffm_analysis *a;
	const struct ffm_an_site *x;

	o.rows_per_range = true; /* a second range, used 50 µs later: the first use wins */
	a = analyse(&o, FFM_GROUP_POINT, 1, false);
	x = site_at_line(ffm_analysis__result(a), 22);
	ASSERT(x);
	ASSERT_EQ(x->n_misplaced, o.iters);
	ASSERT_EQ(x->use_delay_ns, 1000000);
	ASSERT_EQ(ffm_analysis__result(a)->q.divergent_sites, 0);
	ffm_analysis__free(a);
}

TEST(required_syncs_used_at_once_are_no_problem)
{
	struct synth_opts o = base(1u << SYN_CONTROL);
	struct ffm_analysis *a = analyse(&o, FFM_GROUP_POINT, 1, false);
	const struct ffm_analysis_result *r = ffm_analysis__result(a);

	ASSERT(r->have_problems);
	ASSERT_EQ(r->n_groups, 0);
	ASSERT_EQ(r->totals.total_ns, 0);
	ASSERT(r->totals.wait_ns > 0);
	ASSERT_EQ(site_at_line(r, 41)->n_classified, o.iters);
	ffm_analysis__free(a);

	/* A gap above the noise floor but a sliver of a long wait is no problem either; the
	 * same gap with a short wait is. */
	o = base(1u << SYN_CONTROL);
	o.use_us = 30;	/* ≥ 20 µs floor */
	o.k_us = 5000;	/* 30 µs < 10% of 5 ms */
	a = analyse(&o, FFM_GROUP_POINT, 1, false);
	ASSERT_EQ(ffm_analysis__result(a)->n_groups, 0);
	ffm_analysis__free(a);
	o = base(1u << SYN_CONTROL);
	o.use_us = 30;
	o.k_us = 200; /* 30 µs ≥ 10% of 200 µs */
	a = analyse(&o, FFM_GROUP_POINT, 1, false);
	r = ffm_analysis__result(a);
	ASSERT_EQ(r->n_groups, 1);
	ASSERT_EQ(r->totals.total_ns, (uint64_t)o.iters * 30000);
	ffm_analysis__free(a);
}

TEST(everything_at_once_sorted_by_benefit)
{
	struct synth_opts o = base(0x1f);
	struct ffm_analysis *a = analyse(&o, FFM_GROUP_POINT, 1, false);
	const struct ffm_analysis_result *r = ffm_analysis__result(a);
	uint64_t sum = 0, sync_benefit = 0;

	for (int sc = 0; sc < SYN__MAX; sc++)
		sum += synth__expected(&o, sc);
	ASSERT_EQ(r->totals.total_ns, sum);
	/* unnecessary, misplaced, sequence A and B, dup: 5 sites */
	ASSERT_EQ(r->n_groups, 5);
	for (size_t i = 1; i < r->n_groups; i++)
		ASSERT(r->groups[i - 1].benefit_ns >= r->groups[i].benefit_ns);
	/* Table 2: cuCtxSynchronize's benefit is its three problem sites' together */
	for (size_t i = 0; i < r->n_apis; i++)
		if (!strcmp(r->apis[i].name, "cuCtxSynchronize"))
			sync_benefit = r->apis[i].benefit_ns;
	ASSERT_EQ(sync_benefit, sum - synth__expected(&o, SYN_DUP));
	ASSERT_EQ(r->n_procs, 1);
	ASSERT_EQ(r->procs[0].benefit_ns, sum);
	ffm_analysis__free(a);
}

TEST(groupings_fold_and_sequence_with_subsequences)
{
	struct synth_opts o = base(1u << SYN_SEQUENCE);
	struct ffm_analysis *a = analyse(&o, FFM_GROUP_SEQUENCE, 1, true);
	const struct ffm_analysis_result *r = ffm_analysis__result(a);
	uint64_t b, occ;

	/* one pattern (A, B) that occurred iters times */
	ASSERT_EQ(r->n_groups, 1);
	ASSERT_EQ(r->groups[0].occurrences, o.iters);
	ASSERT_EQ(r->groups[0].n_members, 2);
	ASSERT_EQ(r->sites[r->groups[0].seq_sites[0]].line, 51);
	ASSERT_EQ(r->sites[r->groups[0].seq_sites[1]].line, 52);
	ASSERT_EQ(r->groups[0].benefit_ns, synth__expected(&o, SYN_SEQUENCE));
	/* A alone: C absorbs its K; B alone: C2 absorbs K2 */
	ASSERT_OK(ffm_analysis__subsequence(a, r->groups[0].key, 0, 0, &b, &occ));
	ASSERT_EQ(b, (uint64_t)o.iters * 500000);
	ASSERT_EQ(occ, o.iters);
	ASSERT_OK(ffm_analysis__subsequence(a, r->groups[0].key, 1, 1, &b, NULL));
	ASSERT_EQ(b, (uint64_t)o.iters * 400000);
	ASSERT_EQ(ffm_analysis__subsequence(a, r->groups[0].key, 0, 2, &b, NULL), -ERANGE);
	ASSERT_EQ(ffm_analysis__subsequence(a, 12345, 0, 0, &b, NULL), -ENOENT);
	ffm_analysis__free(a);

	/* Carry-forward: A's wait longer than the CPU work after it; B's idle absorbs it. */
	o = base(1u << SYN_SEQUENCE);
	o.k_us = 1500; /* C = 1000 absorbs 1000, 500 carried into B: 900 there, C2 = 800 caps */
	a = analyse(&o, FFM_GROUP_SEQUENCE, 1, true);
	r = ffm_analysis__result(a);
	ASSERT_EQ(r->groups[0].benefit_ns, synth__expected(&o, SYN_SEQUENCE));
	ASSERT_EQ(r->groups[0].benefit_ns, (uint64_t)o.iters * (1000000 + 800000));
	ffm_analysis__free(a);

	/* Folded functions: the sequence's two syncs are in two functions. */
	o = base(1u << SYN_SEQUENCE | 1u << SYN_UNNECESSARY);
	a = analyse(&o, FFM_GROUP_FOLD, 1, false);
	r = ffm_analysis__result(a);
	ASSERT_EQ(r->n_groups, 3);
	for (size_t i = 0; i < r->n_groups; i++)
		ASSERT_EQ(r->groups[i].count, o.iters);
	ASSERT_EQ(ffm_analysis__subsequence(a, r->groups[0].key, 0, 0, &b, NULL), -EINVAL);
	ffm_analysis__free(a);
}

TEST(join_tolerates_small_count_differences_and_flags_large_ones)
{
	struct synth_opts o = base(1u << SYN_UNNECESSARY);
	struct ffm_analysis *a;
	const struct ffm_analysis_result *r;

	o.iters = 100;
	o.s3_missing = 3; /* within 5%: proportional join */
	a = analyse(&o, FFM_GROUP_POINT, 1, false);
	r = ffm_analysis__result(a);
	ASSERT_EQ(r->q.divergent_sites, 0);
	ASSERT_EQ(site_at_line(r, 11)->n_unnecessary, 100);
	ffm_analysis__free(a);

	o = base(1u << SYN_UNNECESSARY);
	o.iters = 100;
	o.s3_missing = 20; /* 80 verdicts for 100 calls: majority verdict, flagged */
	a = analyse(&o, FFM_GROUP_POINT, 1, false);
	r = ffm_analysis__result(a);
	ASSERT_EQ(r->q.divergent_sites, 1);
	ASSERT(site_at_line(r, 11)->divergent);
	ASSERT(r->groups[0].divergent);
	ASSERT_EQ(site_at_line(r, 11)->n_unnecessary, 100);
	ASSERT_EQ(r->totals.total_ns, synth__expected(&o, SYN_UNNECESSARY));
	ffm_analysis__free(a);
}

/*
 * Stage 3 watches the first word of each protected range. A use of other bytes goes unseen, so
 * "no use seen" at a site whose syncs were seen used in some iterations is not evidence: the
 * sync is needed at that call site (a fix there removes it for every iteration). Where a whole
 * range was watched, each occurrence stands on its own.
 */
TEST(site_seen_used_keeps_its_sync)
{
	struct synth_opts o = base(1u << SYN_UNNECESSARY);
	struct ffm_analysis *a;
	const struct ffm_analysis_result *r;

	o.iters = 100;
	o.seen_uses = 2; /* a 4 KiB range, read at its first word in 2 iterations only */
	a = analyse(&o, FFM_GROUP_POINT, 1, false);
	r = ffm_analysis__result(a);
	ASSERT_EQ(site_at_line(r, 11)->n_unnecessary, 0);
	ASSERT_EQ(r->q.withheld_syncs, 98);
	ASSERT_EQ(r->q.partial_syncs, 98);
	ASSERT_EQ(r->totals.total_ns, 0);
	ffm_analysis__free(a);

	o = base(1u << SYN_UNNECESSARY);
	o.iters = 100;
	o.seen_uses = 2;
	o.prot_bytes = 8; /* the whole range watched: the 98 unseen ones are unnecessary */
	a = analyse(&o, FFM_GROUP_POINT, 1, false);
	r = ffm_analysis__result(a);
	ASSERT_EQ(site_at_line(r, 11)->n_unnecessary, 98);
	ASSERT_EQ(r->q.withheld_syncs, 0);
	ASSERT_EQ(r->q.partial_syncs, 0);
	ffm_analysis__free(a);

	o = base(1u << SYN_UNNECESSARY);
	o.iters = 100; /* never seen used: unnecessary, resting on partial range coverage */
	a = analyse(&o, FFM_GROUP_POINT, 1, false);
	r = ffm_analysis__result(a);
	ASSERT_EQ(site_at_line(r, 11)->n_unnecessary, 100);
	ASSERT_EQ(r->q.partial_syncs, 100);
	ASSERT_EQ(r->totals.total_ns, synth__expected(&o, SYN_UNNECESSARY));
	ffm_analysis__free(a);
}

TEST(a_set_up_call_that_waited_is_no_problem)
{
	/* The unnecessary scenario's sync is a cuDevicePrimaryCtxRetain that waited: stage 3
	 * sees no use after it, but no fix removes a context's creation. */
	struct synth_opts o = base(1u << SYN_UNNECESSARY);
	const struct ffm_analysis_result *r;
	struct ffm_analysis *a;

	o.sync_api = "cuDevicePrimaryCtxRetain";
	a = analyse(&o, FFM_GROUP_POINT, 1, false);
	r = ffm_analysis__result(a);
	ASSERT_EQ(site_at_line(r, 11)->n_unnecessary, 0);
	ASSERT_EQ(r->totals.total_ns, 0);
	ASSERT(r->totals.wait_ns >= (uint64_t)o.iters * 500 * 1000); /* still listed as time */
	ffm_analysis__free(a);

	o = base(1u << SYN_UNNECESSARY); /* the same as a sync: the scenario's saving */
	a = analyse(&o, FFM_GROUP_POINT, 1, false);
	r = ffm_analysis__result(a);
	ASSERT_EQ(site_at_line(r, 11)->n_unnecessary, o.iters);
	ASSERT_EQ(r->totals.total_ns, synth__expected(&o, SYN_UNNECESSARY));
	ffm_analysis__free(a);
}

TEST(partial_coverage_is_reported_and_withholds_unnecessary)
{
	struct synth_opts o = base(1u << SYN_UNNECESSARY | 1u << SYN_MISPLACED);
	struct ffm_analysis *a;
	const struct ffm_analysis_result *r;

	/* Not every protected range watched: a sync without a seen use is no verdict (a use
	 * may have gone unseen), a used one stays misplaced, flagged partial. */
	o.partial = true;
	a = analyse(&o, FFM_GROUP_POINT, 1, false);
	r = ffm_analysis__result(a);
	ASSERT_EQ(r->q.partial_syncs, 2 * o.iters);
	ASSERT_EQ(r->q.withheld_syncs, o.iters);
	ASSERT_EQ(r->n_groups, 1);
	ASSERT_EQ(site_at_line(r, 22)->n_misplaced, o.iters);
	ASSERT_EQ(site_at_line(r, 11)->n_unnecessary, 0);
	ASSERT(r->groups[0].partial);
	ASSERT_EQ(r->totals.total_ns, synth__expected(&o, SYN_MISPLACED));
	ffm_analysis__free(a);
}

/*
 * A loop that reads h[i] after a misplaced sync: the windows reach element i in some
 * iterations only. The syncs whose use went unseen are the same line's, moved by the same fix:
 * misplaced at the site's median delay, counted in the data quality.
 */
TEST(unseen_uses_at_a_misplaced_site_take_its_verdict)
{
	struct synth_opts o = base(1u << SYN_MISPLACED);
	struct ffm_analysis *a;
	const struct ffm_analysis_result *r;

	o.misplaced_unseen = true;
	a = analyse(&o, FFM_GROUP_POINT, 1, false);
	r = ffm_analysis__result(a);
	ASSERT_EQ(site_at_line(r, 22)->n_misplaced, o.iters);
	ASSERT_EQ(r->q.site_misplaced_syncs, o.iters / 2);
	ASSERT_EQ(r->q.withheld_syncs, 0);
	ASSERT_EQ(r->totals.total_ns, synth__expected(&o, SYN_MISPLACED));
	ffm_analysis__free(a);
}

TEST(parallel_slices_and_threads_give_the_same_answer)
{
	for (unsigned threads = 1; threads <= 3; threads++) {
		struct synth_opts o = base(0x1f);
		uint64_t want = 0;

		o.threads = 2;
		o.iters = 40;
		for (int sc = 0; sc < SYN__MAX; sc++)
			want += 2 * synth__expected(&o, sc);
		for (unsigned slices = 1; slices <= 5; slices += 2) {
			struct ffm_analysis *a;

			o.state_dir = fresh_dir();
			a = analyse(&o, FFM_GROUP_POINT, slices, false);
			ASSERT_EQ(ffm_analysis__result(a)->totals.sum_ns, want);
			ASSERT_EQ(ffm_analysis__result(a)->events,
				  ffm_analysis__result(a)->n_sites ? 2 * o.iters * 14 : 0);
			ffm_analysis__free(a);
		}
	}
}

TEST(a_stream_busy_all_run_long_caps_every_benefit)
{
	/* Four threads sync one stream after every launch, started a quarter period apart: some
	 * thread waits on that stream almost all the time, so the GPU's work there bounds the
	 * run and removing the syncs cannot save more than the rest. */
	struct synth_opts o = base(1u << SYN_UNNECESSARY);
	const struct ffm_analysis_result *r;
	struct ffm_analysis *a;
	uint64_t busy, cap;

	o.threads = 4;
	o.stream_sync = true;
	o.stagger_us = 378; /* (L + K + C) / 4 = 1510 µs / 4 */
	a = analyse(&o, FFM_GROUP_POINT, 1, false);
	r = ffm_analysis__result(a);
	/* thread k waits [t0 + k*378 + i*1510 + 10, + 500] µs: the union is 1500 µs a period but
	 * for the 10 µs launches, i.e. every thread's waits back to back but for the first ones */
	busy = r->q.stream_busy_ns;
	ASSERT_MSG(busy >= (uint64_t)o.iters * 1400 * 1000 && busy <= r->wall_ns,
		   "busy %llu ns of %llu", (unsigned long long)busy, (unsigned long long)r->wall_ns);
	ASSERT(r->q.stream_capped);
	/* the CPU before the stream's first work is no benefit either: here the first launch */
	ASSERT(r->q.stream_head_ns <= 1000 * 1000);
	/* the stream's last work was an unnecessary sync's: what follows it may move */
	ASSERT_EQ(r->q.stream_tail_ns, 0);
	cap = r->wall_ns - busy - r->q.stream_head_ns;
	ASSERT_EQ(r->totals.total_ns, cap);
	ASSERT(r->totals.total_ns < synth__expected(&o, SYN_UNNECESSARY));
	for (size_t i = 0; i < r->n_groups; i++)
		ASSERT(r->groups[i].benefit_ns <= cap);
	ffm_analysis__free(a);

	/* Then each thread reads its results (CONTROL: a required sync on the same stream): the
	 * last thread's CPU work after its last read, C, and the process's exit, C, come after
	 * the stream's work in the fixed program too. */
	o.scenarios |= 1u << SYN_CONTROL;
	o.state_dir = fresh_dir();
	a = analyse(&o, FFM_GROUP_POINT, 1, false);
	r = ffm_analysis__result(a);
	ASSERT_MSG(r->q.stream_tail_ns == 2 * 1000 * 1000, "tail %llu ns",
		   (unsigned long long)r->q.stream_tail_ns);
	ASSERT(r->q.stream_capped);
	cap = r->wall_ns - r->q.stream_busy_ns - r->q.stream_head_ns - r->q.stream_tail_ns;
	ASSERT_EQ(r->totals.total_ns, cap);
	ffm_analysis__free(a);

	/* ... unless another thread calls the driver after that read: its work may move. */
	o.late_launch = true;
	o.state_dir = fresh_dir();
	a = analyse(&o, FFM_GROUP_POINT, 1, false);
	r = ffm_analysis__result(a);
	ASSERT_EQ(r->q.stream_tail_ns, 0);
	ASSERT_EQ(r->totals.total_ns, r->wall_ns - r->q.stream_busy_ns - r->q.stream_head_ns);
	ffm_analysis__free(a);

	/* The same on cuCtxSynchronize: no stream known, no cap. */
	o = base(1u << SYN_UNNECESSARY);
	o.threads = 4;
	o.stagger_us = 378;
	a = analyse(&o, FFM_GROUP_POINT, 1, false);
	r = ffm_analysis__result(a);
	ASSERT_EQ(r->q.stream_busy_ns, 0);
	ASSERT(!r->q.stream_capped);
	ffm_analysis__free(a);

	/* CPU work between each launch and its sync (500 µs a kernel, of which the sync waits
	 * 300): only the waits count as busy. From the launch on would be more here, but a wait
	 * can be for other work than the kernel (a copy's own, after the kernel ended during
	 * the CPU work), and then the stretch before it was idle GPU time (tests/python's
	 * pyread.py was capped at 59% of its saving that way). */
	o = base(1u << SYN_UNNECESSARY);
	o.stream_sync = true;
	o.pre_us = 200;
	a = analyse(&o, FFM_GROUP_POINT, 1, false);
	r = ffm_analysis__result(a);
	ASSERT_MSG(r->q.stream_busy_ns == (uint64_t)o.iters * 300 * 1000, "busy %llu ns",
		   (unsigned long long)r->q.stream_busy_ns);
	ffm_analysis__free(a);

	/* One thread: the bound never binds (its saving is CPU time, disjoint from its waits). */
	o = base(1u << SYN_UNNECESSARY);
	o.stream_sync = true;
	a = analyse(&o, FFM_GROUP_POINT, 1, false);
	r = ffm_analysis__result(a);
	ASSERT(r->q.stream_busy_ns > 0);
	ASSERT(!r->q.stream_capped);
	ASSERT_EQ(r->totals.total_ns, synth__expected(&o, SYN_UNNECESSARY));
	ffm_analysis__free(a);
}

TEST(an_async_copy_that_waited_loses_its_staging_with_the_fix)
{
	/* The unnecessary wait is an async copy's into pageable memory, and the call goes on
	 * 100 µs after it (the driver's staging through a bounce buffer): a pinned buffer takes
	 * both off the CPU, so each of the iters occurrences saves min(C, K + 100) = 600 µs. */
	struct synth_opts o = base(1u << SYN_UNNECESSARY);
	const struct ffm_analysis_result *r;
	struct ffm_analysis *a;

	o.copy_us = 100;
	a = analyse(&o, FFM_GROUP_POINT, 1, false);
	r = ffm_analysis__result(a);
	ASSERT_MSG(r->totals.total_ns == (uint64_t)o.iters * 600 * 1000, "saved %llu ns",
		   (unsigned long long)r->totals.total_ns);
	ffm_analysis__free(a);
}

TEST(stage_by_stage_what_is_known)
{
	struct synth_opts o = base(1u << SYN_UNNECESSARY);
	struct ffm_analysis *a;
	const struct ffm_analysis_result *r;

	o.stages = 1;
	a = analyse(&o, FFM_GROUP_POINT, 1, false);
	r = ffm_analysis__result(a);
	ASSERT(!r->have_problems);
	ASSERT(r->run_baseline && !r->run_timeline);
	ASSERT(r->wall_ns > 0);
	ASSERT_EQ(site_at_line(r, 11)->wait_ns, (uint64_t)o.iters * 500000); /* stage 1 waits */
	ffm_analysis__free(a);

	o = base(1u << SYN_UNNECESSARY);
	o.stages = 2;
	a = analyse(&o, FFM_GROUP_POINT, 1, false);
	r = ffm_analysis__result(a);
	ASSERT(!r->have_problems);
	ASSERT(r->run_timeline);
	ASSERT_EQ(r->n_groups, 0);
	ASSERT_EQ(site_at_line(r, 11)->count, o.iters);
	ffm_analysis__free(a);
}

TEST(a_jobs_report_uses_the_runs_up_to_it)
{
	struct synth_opts o = base(1u << SYN_UNNECESSARY);
	struct ffm_analysis_opts ao = { .sz = sizeof(ao), .job_id = "j1" };
	struct ffm_analysis *a;
	struct ffm_store *s;

	ASSERT_OK(synth__write(&o));
	/* a later job of the same key: stage 1 only, another iteration count */
	o.job_id = "j2";
	o.stages = 1;
	o.iters = 10;
	ASSERT_OK(synth__write(&o));
	s = open_store(&o);
	ASSERT(s);
	ASSERT_OK(ffm_analysis__run(s, &ao, &a));
	ASSERT_EQ(ffm_analysis__result(a)->n_runs, 4);
	ASSERT(ffm_analysis__result(a)->have_problems);
	ffm_analysis__free(a);
	ao.job_id = "j2";
	ASSERT_OK(ffm_analysis__run(s, &ao, &a));
	ASSERT_EQ(ffm_analysis__result(a)->n_runs, 5); /* everything the key knew by then */
	ffm_analysis__free(a);
	ao.job_only = true;
	ASSERT_OK(ffm_analysis__run(s, &ao, &a));
	ASSERT_EQ(ffm_analysis__result(a)->n_runs, 1);
	ASSERT(!ffm_analysis__result(a)->have_problems);
	ASSERT_EQ(site_at_line(ffm_analysis__result(a), 11)->count, 10);
	ffm_analysis__free(a);
	ao.job_id = "nope";
	ASSERT_EQ(ffm_analysis__run(s, &ao, &a), -ENOENT);
	ASSERT(!a);
	ffm_store__free(s);
}

/* A job whose one run recorded nothing (a program that never called the driver): no groups
 * in any grouping, no APIs. Their empty lists once went to qsort as NULL (make sanitize). */
TEST(a_run_that_recorded_nothing)
{
	static const enum ffm_grouping gs[] = { FFM_GROUP_POINT, FFM_GROUP_FOLD,
						FFM_GROUP_SEQUENCE };
	struct ffm_store_opts wo = { .sz = sizeof(wo), .create = true };
	struct synth_opts o = base(0);
	struct ffm_store *s = NULL;
	int64_t run;

	ASSERT_OK(ffm_store__open_key(o.state_dir, &(struct ffm_store_key){ .key = o.key, .uid = SYNTH_UID }, &wo, &s));
	ASSERT_OK(ffm_store__job_begin(s, &(struct ffm_store_job){ .job_id = o.job_id,
		.state = FFM_JOB_RUNNING, .start_unix = 1700000000 }, NULL));
	ASSERT_OK(ffm_store__run_begin(s, &(struct ffm_store_run){ .job_id = o.job_id, .stage = 2,
		.start_ns = 1000000000, .start_unix = 1700000001 }, &run));
	ASSERT_OK(ffm_store__run_end(s, run, 2000000000, 1.0, 0, 0));
	ASSERT_OK(ffm_store__job_end(s, o.job_id, FFM_JOB_DONE, 1700000002));
	ffm_store__free(s);
	s = open_store(&o);
	ASSERT(s);
	for (size_t i = 0; i < sizeof(gs) / sizeof(gs[0]); i++) {
		struct ffm_analysis_opts ao = { .sz = sizeof(ao), .job_id = o.job_id,
						.grouping = gs[i] };
		struct ffm_analysis *a = NULL;
		const struct ffm_analysis_result *r;

		ASSERT_OK(ffm_analysis__run(s, &ao, &a));
		r = ffm_analysis__result(a);
		ASSERT_EQ(r->n_runs, 1);
		ASSERT_EQ(r->n_groups, 0);
		ASSERT_EQ(r->n_apis, 0);
		ffm_analysis__free(a);
	}
	ffm_store__free(s);
}

TEST(site_identity_is_stable_across_stages)
{
	/* stage 1's wait stacks (one more driver frame) and stage 2's call stacks of one call
	 * site have the same key: diff and multi-node merges match by it */
	struct synth_opts o = base(1u << SYN_UNNECESSARY);
	struct ffm_analysis_opts ao = { .sz = sizeof(ao) };
	struct ffm_analysis *a1, *a2;
	struct ffm_store *s;

	o.stages = 1;
	ASSERT_OK(synth__write(&o));
	s = open_store(&o);
	ASSERT_OK(ffm_analysis__run(s, &ao, &a1));
	ffm_store__free(s);
	o.stages = 2;
	o.state_dir = fresh_dir();
	ASSERT_OK(synth__write(&o));
	s = open_store(&o);
	ASSERT_OK(ffm_analysis__run(s, &ao, &a2));
	ffm_store__free(s);
	ASSERT_EQ(site_at_line(ffm_analysis__result(a1), 11)->key,
		  site_at_line(ffm_analysis__result(a2), 11)->key);
	ASSERT(site_at_line(ffm_analysis__result(a2), 11)->key !=
	       site_at_line(ffm_analysis__result(a2), 10)->key);
	ffm_analysis__free(a1);
	ffm_analysis__free(a2);
}

static void cleanup(void)
{
	char cmd[600];

	if (root) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
		if (system(cmd))
			fprintf(stderr, "# could not remove %s\n", root);
	}
}

int main(void)
{
	int r = ffm_test_main();

	cleanup();
	return r;
}
