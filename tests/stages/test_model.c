// SPDX-License-Identifier: MIT
/*
 * Table-driven tests of the expected-benefit model (stages/ffm_model.h), after the cases of the
 * Diogenes paper (SC'19, 3.5): Figure 4's limited- and full-benefit removal, sequences with
 * carry-forward, misplaced syncs, duplicate transfers, idle-time bounds, groupings and
 * subsequences; then property tests over random timelines against a literal transcription of
 * Figure 5 that writes durations into a copy of the graph.
 */
#include <stdbool.h>

#include "tests/testutil.h"

#include "stages/ffm_model.h"

/* ---- building timelines from tables ------------------------------------------------------- */

/* One call: `gap` ns of CPU work after the previous call returned, then the call. */
struct step {
	uint32_t tid;
	uint64_t gap, dur, wait;
	uint8_t kind, problem, flags;
	uint64_t stack, first_use;
	uint32_t fold;
};

#define MAX_STEPS 32
#define L(g_, d_) { .gap = (g_), .dur = (d_), .kind = FFM_CALL_LAUNCH }
#define XFER(g_, d_, w_, p_, st_) \
	{ .gap = (g_), .dur = (d_), .wait = (w_), .kind = FFM_CALL_TRANSFER, .problem = (p_), \
	  .stack = (st_) }
#define SYNC(g_, w_, p_, st_) \
	{ .gap = (g_), .dur = (w_), .wait = (w_), .kind = FFM_CALL_SYNC, .problem = (p_), \
	  .flags = FFM_EVENT_SYNC, .stack = (st_), .fold = (uint32_t)(st_) }
#define MISPLACED(g_, w_, fu_, st_) \
	{ .gap = (g_), .dur = (w_), .wait = (w_), .kind = FFM_CALL_SYNC, \
	  .problem = FFM_PROBLEM_MISPLACED_SYNC, .flags = FFM_EVENT_SYNC, .stack = (st_), \
	  .first_use = (fu_), .fold = (uint32_t)(st_) }
#define NONE FFM_PROBLEM_NONE
#define UNN FFM_PROBLEM_UNNECESSARY_SYNC
#define DUP FFM_PROBLEM_DUPLICATE_TRANSFER

/* Lays the steps out per thread from t = 1000; returns the number of events. */
static size_t lay_out(const struct step *s, size_t n, struct ffm_event *ev)
{
	uint64_t t[4] = { 1000, 1000, 1000, 1000 };

	for (size_t i = 0; i < n; i++) {
		uint32_t tid = s[i].tid;
		t[tid] += s[i].gap;
		ev[i] = (struct ffm_event){
			.start_ns = t[tid],
			.dur_ns = s[i].dur,
			.wait_ns = s[i].wait,
			.stack_id = s[i].stack,
			.first_use_ns = s[i].first_use,
			.tid = 100 + tid,
			.fold_id = s[i].fold,
			.kind = s[i].kind,
			.problem = s[i].problem,
			.flags = s[i].flags,
		};
		t[tid] += s[i].dur;
	}
	return n;
}

/* ---- table: per-problem benefits ---------------------------------------------------------- */

struct benefit_case {
	const char *name;
	struct step steps[MAX_STEPS];
	uint64_t tail;                /* CPU time after the last call until the run ends */
	uint64_t expect[MAX_STEPS];   /* benefit of each problematic node, timeline order */
	size_t n_expect;
	uint64_t expect_total;
};

static const struct benefit_case benefit_cases[] = {
	{
		/* Figure 4, limited benefit: after CWait0 the CPU has little to do before the next
		 * (required) wait, which grows by what the GPU still had to do. */
		.name = "fig4-limited",
		.steps = { L(0, 5), SYNC(0, 100, UNN, 1), L(0, 10), SYNC(10, 50, NONE, 2) },
		.expect = { 20 }, .n_expect = 1, .expect_total = 20,
	},
	{
		/* Figure 4, full benefit: the same wait, but enough CPU work follows to absorb it. */
		.name = "fig4-full",
		.steps = { L(0, 5), SYNC(0, 100, UNN, 1), L(0, 10), SYNC(200, 50, NONE, 2) },
		.expect = { 100 }, .n_expect = 1, .expect_total = 100,
	},
	{
		/* Idle bound: only CLaunch/CWork between the node and NextSync count. */
		.name = "idle-bound-launches",
		.steps = { SYNC(0, 100, UNN, 1), L(0, 10), L(0, 10), L(0, 10), SYNC(0, 5, NONE, 2) },
		.expect = { 30 }, .n_expect = 1, .expect_total = 30,
	},
	{
		/* A non-sync wait (internal short wait) is neither NextSync nor GPU idle time. */
		.name = "non-sync-wait-skipped",
		.steps = { SYNC(0, 100, UNN, 1), L(0, 10),
			   { .gap = 0, .dur = 30, .wait = 20, .kind = FFM_CALL_OTHER },
			   L(5, 10), SYNC(0, 5, NONE, 2) },
		/* idle: L 10 + other's CPU part 10 + gap 5 + L 10 = 35 (its 20 ns wait excluded) */
		.expect = { 35 }, .n_expect = 1, .expect_total = 35,
	},
	{
		/* No later sync: the end of the run is the implicit sync; the CPU time up to it
		 * (trailing work included) absorbs the wait. */
		.name = "no-next-sync-run-end",
		.steps = { SYNC(0, 100, UNN, 1), L(0, 10) },
		.tail = 20,
		.expect = { 30 }, .n_expect = 1, .expect_total = 30,
	},
	{
		/* Sequence carry-forward: A's 80 ns that the 20 ns of work cannot absorb grow B
		 * (the next sync, also unnecessary), whose removal spreads them over 200 ns. */
		.name = "sequence-carry-forward",
		.steps = { SYNC(0, 100, UNN, 1), SYNC(20, 10, UNN, 2), SYNC(200, 5, NONE, 3) },
		.expect = { 20, 90 }, .n_expect = 2, .expect_total = 110,
	},
	{
		/* Carry stops at a required sync: C's removal cannot use what R kept. */
		.name = "carry-stops-at-required",
		.steps = { SYNC(0, 100, UNN, 1), SYNC(20, 10, NONE, 2), SYNC(500, 10, UNN, 3),
			   SYNC(500, 5, NONE, 4) },
		.expect = { 20, 10 }, .n_expect = 2, .expect_total = 30,
	},
	{
		/* GPU-busy CPU time: NextSync waited for the GPU, so the 3000 ns of CPU work
		 * after the launch ran beside that kernel; only the launch's 10 ns were GPU idle. */
		.name = "gpu-busy-after-submission",
		.steps = { SYNC(0, 50000, UNN, 1), L(0, 10), SYNC(3000, 20000, NONE, 2) },
		.expect = { 10 }, .n_expect = 1, .expect_total = 10,
	},
	{
		/* The same with a NextSync that barely waited: the kernel may have ended early and
		 * the GPU idled through the CPU work, Figure 5's case. */
		.name = "gpu-maybe-idle-after-submission",
		.steps = { SYNC(0, 50000, UNN, 1), L(0, 10), SYNC(3000, 5000, NONE, 2) },
		.expect = { 3010 }, .n_expect = 1, .expect_total = 3010,
	},
	{
		/* Misplaced: moving the sync by its first-use time hides that much of the wait. */
		.name = "misplaced",
		.steps = { L(0, 5), MISPLACED(0, 100, 30, 1), L(40, 5) },
		.expect = { 30 }, .n_expect = 1, .expect_total = 30,
	},
	{
		/* Misplaced, capped: a first use later than the wait saves only the wait. */
		.name = "misplaced-capped",
		.steps = { L(0, 5), MISPLACED(0, 20, 50, 1), L(60, 5) },
		.expect = { 20 }, .n_expect = 1, .expect_total = 20,
	},
	{
		/* Misplaced after an unnecessary sync: the carry grows it, the first use caps it. */
		.name = "misplaced-after-carry",
		.steps = { SYNC(0, 100, UNN, 1), MISPLACED(20, 10, 50, 2), L(100, 5) },
		.expect = { 20, 50 }, .n_expect = 2, .expect_total = 70,
	},
	{
		/* Duplicate asynchronous transfer: the call's CPU time. */
		.name = "duplicate-async",
		.steps = { L(0, 5), XFER(10, 40, 0, DUP, 1), L(10, 5) },
		.expect = { 40 }, .n_expect = 1, .expect_total = 40,
	},
	{
		/* Duplicate synchronous transfer: its CLaunch part only; its wait stays a sync. */
		.name = "duplicate-sync-copy",
		.steps = { L(0, 5),
			   { .gap = 10, .dur = 100, .wait = 70, .kind = FFM_CALL_TRANSFER,
			     .problem = DUP, .flags = FFM_EVENT_SYNC, .stack = 1 },
			   L(10, 5) },
		.expect = { 30 }, .n_expect = 1, .expect_total = 30,
	},
	{
		/* Unnecessary sync before a duplicate transfer, both fixed: the transfer's CPU
		 * time is gone from the fixed program, so it absorbs nothing of the sync's wait
		 * (the paper's in-order processing counted it twice: idle for the sync, then the
		 * transfer's own benefit, 50 + 40). */
		.name = "unnecessary-then-duplicate",
		.steps = { SYNC(0, 100, UNN, 1), XFER(0, 40, 0, DUP, 2), L(0, 10),
			   SYNC(0, 5, NONE, 3) },
		.expect = { 10, 40 }, .n_expect = 2, .expect_total = 50,
	},
	{
		/* Two threads: one chain each; the wait of thread 1 is absorbed by thread 1's work
		 * only, not by thread 0's. */
		.name = "two-threads",
		.steps = { SYNC(0, 100, UNN, 1),
			   { .tid = 1, .gap = 0, .dur = 100, .wait = 100, .kind = FFM_CALL_SYNC,
			     .problem = UNN, .flags = FFM_EVENT_SYNC, .stack = 2 },
			   L(500, 10),
			   { .tid = 1, .gap = 10, .dur = 5, .kind = FFM_CALL_LAUNCH },
			   { .tid = 1, .gap = 0, .dur = 5, .wait = 5, .kind = FFM_CALL_SYNC,
			     .flags = FFM_EVENT_SYNC },
			   SYNC(0, 5, NONE, 3) },
		/* chain tid 100 first: 100 (500 of work); chain 101: 10 + 5 = 15 */
		.expect = { 100, 15 }, .n_expect = 2, .expect_total = 115,
	},
	{
		.name = "no-problems",
		.steps = { L(0, 5), SYNC(0, 100, NONE, 1), L(10, 10), SYNC(10, 50, NONE, 2) },
		.n_expect = 0, .expect_total = 0,
	},
};

static size_t count_steps(const struct step *s)
{
	size_t n = 0;
	while (n < MAX_STEPS && s[n].dur + s[n].gap + s[n].kind + s[n].tid)
		n++;
	return n;
}

static struct ffm_graph *build_case(const struct step *steps, uint64_t tail, struct ffm_event *ev,
				    size_t *n_ev)
{
	struct ffm_graph_opts o = { 0 };
	struct ffm_graph *g = NULL;
	size_t n = lay_out(steps, count_steps(steps), ev);
	uint64_t end = 0;

	for (size_t i = 0; i < n; i++)
		if (ev[i].start_ns + ev[i].dur_ns > end)
			end = ev[i].start_ns + ev[i].dur_ns;
	o.run_end_ns = end + tail;
	if (ffm_graph__build(ev, n, &o, &g) < 0)
		return NULL;
	*n_ev = n;
	return g;
}

TEST(benefit_table)
{
	for (size_t c = 0; c < sizeof(benefit_cases) / sizeof(benefit_cases[0]); c++) {
		const struct benefit_case *bc = &benefit_cases[c];
		struct ffm_event ev[MAX_STEPS];
		uint64_t got[MAX_STEPS];
		struct ffm_totals tot;
		size_t n_ev = 0;
		struct ffm_graph *g = build_case(bc->steps, bc->tail, ev, &n_ev);

		ASSERT_MSG(g, "%s: build failed", bc->name);
		ASSERT_MSG(ffm_graph__problem_count(g) == bc->n_expect, "%s: %zu problems, want %zu",
			   bc->name, ffm_graph__problem_count(g), bc->n_expect);
		ASSERT_OK(ffm_model__benefit(g, got, &tot));
		for (size_t k = 0; k < bc->n_expect; k++)
			ASSERT_MSG(got[k] == bc->expect[k], "%s: benefit[%zu] = %llu, want %llu",
				   bc->name, k, (unsigned long long)got[k],
				   (unsigned long long)bc->expect[k]);
		ASSERT_MSG(tot.sum_ns == bc->expect_total, "%s: total %llu, want %llu", bc->name,
			   (unsigned long long)tot.sum_ns, (unsigned long long)bc->expect_total);
		ASSERT(tot.total_ns <= tot.wall_ns);
		ffm_graph__free(g);
	}
}

/* @threads threads of @steps loop steps each (launch, an unnecessary sync of 1000 ns, 2000 ns of
 * CPU work), all starting at once (@in_turn 0) or each after the previous one ended. */
static size_t thread_steps(struct ffm_event *ev, unsigned threads, unsigned steps, bool in_turn)
{
	size_t n = 0;

	for (unsigned t = 0; t < threads; t++) {
		uint64_t at = 1000 + (in_turn ? (uint64_t)t * steps * 3100 + t * 100 : 0);

		for (unsigned k = 0; k < steps; k++) {
			ev[n++] = (struct ffm_event){ .start_ns = at, .dur_ns = 10, .tid = 100 + t,
						      .kind = FFM_CALL_LAUNCH };
			ev[n++] = (struct ffm_event){ .start_ns = at + 10, .dur_ns = 1000,
						      .wait_ns = 1000, .tid = 100 + t, .stack_id = 1,
						      .kind = FFM_CALL_SYNC, .problem = UNN,
						      .flags = FFM_EVENT_SYNC };
			at += 3010 + 90 * (t & 1); /* threads out of step, as real ones are */
		}
		ev[n++] = (struct ffm_event){ .start_ns = at, .dur_ns = 10, .tid = 100 + t,
					      .kind = FFM_CALL_LAUNCH };
	}
	return n;
}

/* A duplicate transfer absorbs a removed wait only where it stays in the program. */
TEST(a_duplicate_absorbs_only_where_it_stays)
{
	static const struct step st[MAX_STEPS] = { SYNC(0, 100, UNN, 1), XFER(0, 40, 0, DUP, 2),
						   L(0, 10), SYNC(0, 5, NONE, 3) };
	struct ffm_event ev[MAX_STEPS];
	size_t n_ev = 0;
	struct ffm_graph *g = build_case(st, 0, ev, &n_ev);
	uint32_t nodes[2];
	uint64_t b;

	ASSERT(g);
	nodes[0] = (uint32_t)ffm_graph__problem_node(g, 0);
	nodes[1] = (uint32_t)ffm_graph__problem_node(g, 1);
	ASSERT_OK(ffm_model__estimate(g, nodes, 1, NULL, &b));
	ASSERT_EQ(b, 50); /* the sync alone: the copy's 40 ns and the launch's 10 absorb it */
	ASSERT_OK(ffm_model__estimate(g, &nodes[1], 1, NULL, &b));
	ASSERT_EQ(b, 40);
	ASSERT_OK(ffm_model__estimate(g, nodes, 2, NULL, &b));
	ASSERT_EQ(b, 50); /* both: 10 + 40, the copy's time counted once */
	ffm_graph__free(g);
}

TEST(threads_side_by_side_and_in_turn)
{
	/* Four threads that wait at the same time save the wall time once; two that run one
	 * after the other save both threads' waits. The per-thread Figure 5 sums are the same. */
	static struct ffm_event ev[4 * (2 * 200 + 1)];
	struct ffm_group *gr = NULL;
	struct ffm_totals tot;
	struct ffm_graph *g = NULL;
	size_t n, ng;

	for (unsigned steps = 1; steps <= 200; steps *= 200) {
		n = thread_steps(ev, 4, steps, false);
		ASSERT_OK(ffm_graph__build(ev, n, NULL, &g));
		ASSERT_OK(ffm_model__benefit(g, NULL, &tot));
		ASSERT_EQ(tot.sum_ns, 4000ull * steps);
		/* each thread saves 1000 a step (its last sync: the CPU work after it only) */
		ASSERT_MSG(tot.total_ns >= 1000ull * steps - 1000 && tot.total_ns <= 1100ull * steps,
			   "%u steps: %llu", steps, (unsigned long long)tot.total_ns);
		ASSERT(tot.max_chain_ns <= 1000ull * steps);
		ASSERT_OK(ffm_model__group(g, FFM_GROUP_POINT, &gr, &ng));
		ASSERT_EQ(ng, 1);
		ASSERT_EQ(gr[0].benefit_ns, tot.total_ns); /* the one call site of the four threads */
		free(gr);
		g = ffm_graph__free(g);
	}

	n = thread_steps(ev, 2, 200, true);
	ASSERT_OK(ffm_graph__build(ev, n, NULL, &g));
	ASSERT_OK(ffm_model__benefit(g, NULL, &tot));
	ASSERT_MSG(tot.total_ns >= tot.sum_ns * 95 / 100, "in turn: %llu of %llu",
		   (unsigned long long)tot.total_ns, (unsigned long long)tot.sum_ns);
	ffm_graph__free(g);
}

TEST(worker_chain_ends_with_its_last_call)
{
	/* A worker's last sync: after it the thread is gone, so nothing absorbs its wait; the
	 * main thread's trailing CPU time to the run's end does. */
	struct ffm_event ev[2] = {
		{ .start_ns = 1000, .dur_ns = 500, .wait_ns = 500, .tid = 1, .kind = FFM_CALL_SYNC,
		  .problem = UNN, .flags = FFM_EVENT_SYNC },
		{ .start_ns = 1000, .dur_ns = 500, .wait_ns = 500, .tid = 2, .kind = FFM_CALL_SYNC,
		  .problem = UNN, .flags = FFM_EVENT_SYNC | FFM_EVENT_WORKER },
	};
	struct ffm_graph_opts o = { .run_end_ns = 5000 };
	struct ffm_graph *g = NULL;
	struct ffm_chain ch;
	uint64_t ben[2];

	ASSERT_OK(ffm_graph__build(ev, 2, &o, &g));
	ASSERT_OK(ffm_model__benefit(g, ben, NULL));
	ASSERT_EQ(ben[0], 500); /* main: 3500 ns of CPU time after it */
	ASSERT_EQ(ben[1], 0);
	ASSERT_OK(ffm_graph__chain(g, 1, &ch));
	ASSERT_EQ(ch.end_ns, 1500);
	ffm_graph__free(g);
}

TEST(host_read_and_launch_blocked)
{
	/* A host read is removed like an unnecessary sync; a blocked launch is named, saves
	 * nothing, and keeps what a removed sync before it carries. */
	static const struct step st[] = {
		{ .dur = 10, .kind = FFM_CALL_LAUNCH },
		{ .dur = 800, .wait = 800, .kind = FFM_CALL_SYNC, .problem = FFM_PROBLEM_HOST_READ,
		  .flags = FFM_EVENT_SYNC, .stack = 1 },
		{ .gap = 300, .dur = 500, .wait = 490, .kind = FFM_CALL_LAUNCH,
		  .problem = FFM_PROBLEM_LAUNCH_BLOCKED, .stack = 2 },
		{ .gap = 50, .dur = 10, .kind = FFM_CALL_LAUNCH },
		{ 0 },
	};
	struct ffm_event ev[MAX_STEPS];
	uint64_t got[2];
	struct ffm_totals tot;
	size_t n_ev;
	struct ffm_graph *g = build_case(st, 0, ev, &n_ev);

	ASSERT(g);
	ASSERT_EQ(ffm_graph__problem_count(g), 2);
	ASSERT_OK(ffm_model__benefit(g, got, &tot));
	ASSERT_EQ(got[0], 310); /* gap 300 + the launch's 10 ns outside its wait */
	ASSERT_EQ(got[1], 0);
	ASSERT_EQ(tot.total_ns, 310);
	ffm_graph__free(g);

}

TEST(removed_cpu_time)
{
	/* An unnecessary explicit sync deleted with its 30 ns outside the wait: both saved when
	 * the CPU time after it absorbs them, the excess carried to the next sync otherwise. */
	static const struct step st[] = {
		{ .dur = 10, .kind = FFM_CALL_LAUNCH },
		{ .gap = 0, .dur = 130, .wait = 100, .kind = FFM_CALL_SYNC, .problem = UNN,
		  .flags = FFM_EVENT_SYNC, .stack = 1 },
		{ .gap = 1000, .dur = 10, .kind = FFM_CALL_LAUNCH },
		{ .gap = 0, .dur = 100, .wait = 100, .kind = FFM_CALL_SYNC, .problem = UNN,
		  .flags = FFM_EVENT_SYNC, .stack = 2 },
		{ .gap = 50, .dur = 60, .wait = 60, .kind = FFM_CALL_SYNC, .flags = FFM_EVENT_SYNC,
		  .stack = 3 },
		{ 0 },
	};
	struct ffm_event ev[MAX_STEPS];
	uint64_t got[2];
	size_t n_ev = lay_out(st, 5, ev);
	struct ffm_graph *g;

	ev[1].removed_ns = 30;
	ev[3].removed_ns = 40;
	ASSERT_OK(ffm_graph__build(ev, n_ev, NULL, &g));
	ASSERT_OK(ffm_model__benefit(g, got, NULL));
	ASSERT_EQ(got[0], 130);	/* 1010 ns of CPU time after it: all of 100 + 30 */
	ASSERT_EQ(got[1], 50);	/* 50 ns before the required sync: 140 - 50 carried */
	ffm_graph__free(g);
}

/* The first problem's benefit in @ev, with event 1's deleted work @del (UINT32_MAX: none). */
static uint64_t first_benefit(const struct ffm_event *ev, size_t n, uint32_t del)
{
	struct oatab tab = OATAB_U32_INIT;
	struct ffm_graph *g = NULL;
	uint64_t got[4] = { 0 };

	if (del != UINT32_MAX && oatab_put_u32(&tab, 1, del))
		FAIL("no memory");
	if (ffm_graph__build(ev, n, &(struct ffm_graph_opts){ .deleted_of = &tab }, &g) ||
	    ffm_model__benefit(g, got, NULL))
		FAIL("graph or model");
	ffm_graph__free(g);
	oatab_free(&tab);
	return got[0];
}

TEST(deleted_work_needs_no_cpu_to_hide_under)
{
	/* A pageable async copy that waited: 1000 ns for the kernel, then 2000 ns of staging
	 * inside the call (removed_ns); a pinned buffer leaves 100 ns of copy to the GPU, so
	 * 1900 ns are deleted outright (deleted_of). With 500 ns of CPU work before the next
	 * (required) sync, the CPU-bound rule alone saves 500; with the deletion, 500 + 1900:
	 * plain 1000 + 2000 + 500, fixed max(500, 1000 + 100). */
	static const struct step st[] = {
		{ .dur = 10, .kind = FFM_CALL_LAUNCH },
		{ .gap = 0, .dur = 3000, .wait = 1000, .kind = FFM_CALL_TRANSFER, .problem = UNN,
		  .flags = FFM_EVENT_SYNC, .stack = 1 },
		{ .gap = 500, .dur = 60, .wait = 60, .kind = FFM_CALL_SYNC, .flags = FFM_EVENT_SYNC,
		  .stack = 2 },
		{ 0 },
	};
	struct ffm_event ev[MAX_STEPS];
	size_t n_ev = lay_out(st, 3, ev);

	ev[1].removed_ns = 2000;
	/* the CPU work after it is all the wait could hide under */
	ASSERT_EQ(first_benefit(ev, n_ev, UINT32_MAX), 500);
	ASSERT_EQ(first_benefit(ev, n_ev, 1900), 2400);
	/* never more than the call's wait and removed time */
	ASSERT_EQ(first_benefit(ev, n_ev, 5000), 3000);
}

TEST(misplaced_wait_saves_its_exit_latency)
{
	/* A 1000 ns wait moved 300 ns later: 300 saved; its mode's exit latency 50 ns shorter
	 * for the shorter wait: 350; never more than the wait. */
	static const struct step st[] = { L(0, 5), MISPLACED(0, 1000, 300, 1), L(400, 5), { 0 } };
	struct ffm_event ev[MAX_STEPS];
	size_t n_ev = lay_out(st, 3, ev);

	ASSERT_EQ(first_benefit(ev, n_ev, UINT32_MAX), 300);
	ASSERT_EQ(first_benefit(ev, n_ev, 50), 350);
	ASSERT_EQ(first_benefit(ev, n_ev, 5000), 1000);
}

TEST(temp_buffer_saves_its_deleted_calls)
{
	/* A temporary buffer's allocation (80 ns) with the set's deleted calls, 5000 ns, on it
	 * (its allocations, fills and frees but one: stages/ffm_price.h rule (c)): that much is
	 * saved whichever side bounds, and nothing without them. Its piece of CPU time stays a
	 * node of its own beside the CPU work around it, and it is no sync: the unnecessary sync
	 * before it walks past it to the CPU work that absorbs its wait (100 + 300 ns). */
	static const struct step st[] = {
		{ .dur = 10, .kind = FFM_CALL_LAUNCH },
		{ .gap = 0, .dur = 350, .wait = 350, .kind = FFM_CALL_FREE, .problem = UNN,
		  .flags = FFM_EVENT_SYNC, .stack = 2 },
		{ .gap = 100, .dur = 80, .kind = FFM_CALL_ALLOC, .problem = FFM_PROBLEM_TEMP_BUFFER,
		  .stack = 1 },
		{ .gap = 300, .dur = 60, .wait = 60, .kind = FFM_CALL_SYNC, .flags = FFM_EVENT_SYNC,
		  .stack = 3 },
		{ 0 },
	};
	struct ffm_event ev[MAX_STEPS];
	size_t n_ev = lay_out(st, 4, ev);
	struct oatab tab = OATAB_U32_INIT;
	struct ffm_graph *g = NULL;
	struct ffm_node nd;
	uint64_t got[2] = { 0 };
	int64_t k;

	ASSERT_OK(oatab_put_u32(&tab, 2, 5000));
	ASSERT_OK(ffm_graph__build(ev, n_ev, &(struct ffm_graph_opts){ .deleted_of = &tab }, &g));
	ASSERT_EQ(ffm_graph__problem_count(g), 2);
	k = ffm_graph__problem_node(g, 1);
	ASSERT(k > 0);
	ASSERT_OK(ffm_graph__node(g, (size_t)k, &nd));
	ASSERT_EQ(nd.type, FFM_NODE_CWORK);
	ASSERT_EQ(nd.dur_ns, 80);
	ASSERT_EQ(nd.sync, 0);
	ASSERT_OK(ffm_graph__node(g, (size_t)k - 1, &nd)); /* the 100 ns gap before it */
	ASSERT_EQ(nd.dur_ns, 100);
	ASSERT_OK(ffm_model__benefit(g, got, NULL));
	ASSERT_EQ(got[0], 350); /* 100 + 300 ns of CPU work after the wait: all of it */
	ASSERT_EQ(got[1], 5000);
	ffm_graph__free(g);
	/* without its deleted calls it saves nothing */
	oatab_free(&tab);
	tab = OATAB_U32_INIT;
	ASSERT_OK(ffm_graph__build(ev, n_ev, &(struct ffm_graph_opts){ .deleted_of = &tab }, &g));
	ASSERT_OK(ffm_model__benefit(g, got, NULL));
	ASSERT_EQ(got[1], 0);
	ffm_graph__free(g);
	oatab_free(&tab);
}

TEST(graph_shape)
{
	/* gap 7, launch 5, gap 3, sync(wait 100, CPU 4 outside the wait), alloc 6, gap 2, end */
	struct ffm_event ev[] = {
		{ .start_ns = 1007, .dur_ns = 5, .kind = FFM_CALL_LAUNCH, .tid = 1 },
		{ .start_ns = 1015, .dur_ns = 104, .wait_ns = 100, .kind = FFM_CALL_SYNC,
		  .flags = FFM_EVENT_SYNC, .tid = 1, .stack_id = 9 },
		{ .start_ns = 1119, .dur_ns = 6, .kind = FFM_CALL_ALLOC, .tid = 1 },
	};
	struct ffm_graph_opts o = { .run_start_ns = 1000, .run_end_ns = 1127 };
	struct ffm_graph *g = NULL;
	struct ffm_node nd;
	struct ffm_chain ch;
	static const struct {
		uint8_t type;
		uint64_t start, dur;
		uint8_t sync, end;
	} want[] = {
		{ FFM_NODE_CLAUNCH, 1007, 5, 0, 0 },
		{ FFM_NODE_CWORK, 1012, 7, 0, 0 }, /* gap 3 + the sync call's 4 ns outside the wait */
		{ FFM_NODE_CWAIT, 1019, 100, 1, 0 },
		{ FFM_NODE_CWORK, 1119, 8, 0, 0 }, /* alloc 6 + trailing 2, merged */
		{ FFM_NODE_CWAIT, 1127, 0, 1, 1 },
	};

	ASSERT_OK(ffm_graph__build(ev, 3, &o, &g));
	ASSERT_EQ(ffm_graph__wall_ns(g), 127);
	ASSERT_EQ(ffm_graph__chain_count(g), 1);
	ASSERT_OK(ffm_graph__chain(g, 0, &ch));
	ASSERT_EQ(ch.tid, 1);
	ASSERT_EQ(ch.n_events, 3);
	ASSERT_EQ(ffm_graph__node_count(g), sizeof(want) / sizeof(want[0]));
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		ASSERT_OK(ffm_graph__node(g, i, &nd));
		ASSERT_EQ(nd.type, want[i].type);
		ASSERT_EQ(nd.start_ns, want[i].start);
		ASSERT_EQ(nd.dur_ns, want[i].dur);
		ASSERT_EQ(nd.sync, want[i].sync);
		ASSERT_EQ(nd.end, want[i].end);
		ASSERT_EQ(nd.tid, 1);
	}
	ASSERT_OK(ffm_graph__node(g, 2, &nd));
	ASSERT_EQ(nd.stack_id, 9);
	ASSERT_EQ(nd.event, 1);
	ASSERT_EQ(ffm_graph__node(g, 5, &nd), -ERANGE);
	ffm_graph__free(g);
}

/* A run that recorded no event (its program never loaded the driver): its wall time is its own,
 * not the time since boot that its end's timestamp counts. */
TEST(graph_of_no_event_has_the_runs_wall_time)
{
	struct ffm_graph_opts o = { .run_start_ns = 5000000000ull, .run_end_ns = 5080000000ull };
	struct ffm_graph *g = NULL;

	ASSERT_OK(ffm_graph__build(NULL, 0, &o, &g));
	ASSERT_EQ(ffm_graph__wall_ns(g), 80000000);
	ffm_graph__free(g);
}

TEST(build_unsorted_overlapping_and_errors)
{
	/* Out of order input; the second call overlaps the first and is clipped. */
	struct ffm_event ev[] = {
		{ .start_ns = 150, .dur_ns = 100, .wait_ns = 100, .kind = FFM_CALL_SYNC,
		  .flags = FFM_EVENT_SYNC, .tid = 3 },
		{ .start_ns = 100, .dur_ns = 100, .wait_ns = 80, .kind = FFM_CALL_SYNC,
		  .flags = FFM_EVENT_SYNC, .tid = 3 },
	};
	struct ffm_graph *g = NULL;
	struct ffm_node nd;
	uint64_t sum = 0;
	struct ffm_event bad = { .kind = FFM_CALL_SYNC, .problem = DUP };

	ASSERT_OK(ffm_graph__build(ev, 2, NULL, &g));
	ASSERT_EQ(ffm_graph__wall_ns(g), 150);
	for (size_t i = 0; i < ffm_graph__node_count(g); i++) {
		ASSERT_OK(ffm_graph__node(g, i, &nd));
		sum += nd.dur_ns;
	}
	ASSERT_EQ(sum, 150); /* nodes tile the chain: no nanosecond counted twice */
	ASSERT_OK(ffm_graph__node(g, 1, &nd));
	ASSERT_EQ(nd.event, 1); /* the earlier call comes first */
	ffm_graph__free(g);

	g = NULL;
	ASSERT_EQ(ffm_graph__build(&bad, 1, NULL, &g), -EINVAL);
	bad.kind = 77;
	bad.problem = 0;
	ASSERT_EQ(ffm_graph__build(&bad, 1, NULL, &g), -EINVAL);
	ASSERT_EQ(ffm_graph__build(NULL, 1, NULL, &g), -EINVAL);
	ASSERT(g == NULL);

	/* An empty run is a valid graph with nothing in it. */
	ASSERT_OK(ffm_graph__build(NULL, 0, NULL, &g));
	ASSERT_EQ(ffm_graph__node_count(g), 0);
	ASSERT_OK(ffm_model__benefit(g, NULL, NULL));
	ffm_graph__free(g);
}

/* ---- groupings ---------------------------------------------------------------------------- */

static int find_group(const struct ffm_group *gr, size_t n, uint64_t key)
{
	for (size_t i = 0; i < n; i++)
		if (gr[i].key == key)
			return (int)i;
	return -1;
}

TEST(group_point_and_fold)
{
	/* stack 7 twice and stack 8 once, each closed by a required sync; 7 and 8 are two
	 * template instances of one function (fold 1); stack 9 (fold 2) is a duplicate copy. */
	struct step s[MAX_STEPS] = {
		SYNC(0, 100, UNN, 7), L(30, 5), SYNC(0, 10, NONE, 1),
		SYNC(0, 100, UNN, 8), L(50, 5), SYNC(0, 10, NONE, 1),
		SYNC(0, 100, UNN, 7), L(200, 5), SYNC(0, 10, NONE, 1),
		XFER(0, 40, 0, DUP, 9),
	};
	struct ffm_event ev[MAX_STEPS];
	struct ffm_group *gr = NULL;
	size_t n = 0, n_ev;
	struct ffm_graph *g;
	int i;

	s[0].fold = s[3].fold = s[6].fold = 1;
	s[9].fold = 2;
	g = build_case(s, 0, ev, &n_ev);
	ASSERT(g);

	ASSERT_OK(ffm_model__group(g, FFM_GROUP_POINT, &gr, &n));
	ASSERT_EQ(n, 3);
	ASSERT_EQ(gr[0].key, 7); /* first appearance first */
	ASSERT_EQ(gr[0].members, 2);
	ASSERT_EQ(gr[0].wait_ns, 200);
	ASSERT_EQ(gr[0].benefit_ns, 35 + 100);
	ASSERT_EQ(gr[0].problems, 1u << UNN);
	i = find_group(gr, n, 8);
	ASSERT(i >= 0);
	ASSERT_EQ(gr[i].members, 1);
	ASSERT_EQ(gr[i].benefit_ns, 55);
	i = find_group(gr, n, 9);
	ASSERT(i >= 0);
	ASSERT_EQ(gr[i].benefit_ns, 40);
	ASSERT_EQ(gr[i].problems, 1u << DUP);
	free(gr);

	ASSERT_OK(ffm_model__group(g, FFM_GROUP_FOLD, &gr, &n));
	ASSERT_EQ(n, 2);
	ASSERT_EQ(gr[0].key, 1);
	ASSERT_EQ(gr[0].members, 3);
	ASSERT_EQ(gr[0].wait_ns, 300);
	ASSERT_EQ(gr[0].benefit_ns, 35 + 55 + 100);
	ASSERT_EQ(gr[1].key, 2);
	ASSERT_EQ(gr[1].benefit_ns, 40);
	free(gr);

	/* Required syncs split everything into four sequences. */
	ASSERT_OK(ffm_model__group(g, FFM_GROUP_SEQUENCE, &gr, &n));
	ASSERT_EQ(n, 4);
	for (size_t k = 0; k < n; k++) {
		ASSERT_EQ(gr[k].key, k);
		ASSERT_EQ(gr[k].members, 1);
	}
	free(gr);
	ffm_graph__free(g);
}

TEST(group_sequence_carry_and_subsequence)
{
	/* A, B, C unnecessary (different points), M misplaced, then a required sync; then one
	 * more unnecessary sync D in a second sequence. */
	struct step s[MAX_STEPS] = {
		SYNC(0, 100, UNN, 1), SYNC(10, 10, UNN, 2), SYNC(20, 10, UNN, 3),
		MISPLACED(300, 10, 50, 4), L(100, 5), SYNC(0, 10, NONE, 5),
		SYNC(0, 40, UNN, 6), L(100, 5),
	};
	struct ffm_event ev[MAX_STEPS];
	struct ffm_group *seq = NULL, *pt = NULL;
	size_t n = 0, n_pt = 0, n_ev;
	struct ffm_graph *g = build_case(s, 0, ev, &n_ev);
	uint64_t b = 0, per[8], sub;
	struct ffm_totals tot;

	ASSERT(g);
	ASSERT_OK(ffm_model__benefit(g, per, &tot));
	/* A: 10 absorbed, 90 carried to B; B: 100, 20 absorbed, 80 to C; C: 90, all 300 absorb
	 * it; M: min(50, 10); D: 40 of 105. */
	ASSERT_EQ(per[0], 10);
	ASSERT_EQ(per[1], 20);
	ASSERT_EQ(per[2], 90);
	ASSERT_EQ(per[3], 10);
	ASSERT_EQ(per[4], 40);

	ASSERT_OK(ffm_model__group(g, FFM_GROUP_SEQUENCE, &seq, &n));
	ASSERT_EQ(n, 2);
	ASSERT_EQ(seq[0].members, 4);
	ASSERT_EQ(seq[0].wait_ns, 130);
	ASSERT_EQ(seq[0].benefit_ns, 130); /* every wait of the sequence, thanks to carry */
	ASSERT_EQ(seq[0].problems, (1u << UNN) | (1u << FFM_PROBLEM_MISPLACED_SYNC));
	ASSERT_EQ(seq[1].members, 1);
	ASSERT_EQ(seq[1].benefit_ns, 40);
	ASSERT_EQ(seq[0].benefit_ns + seq[1].benefit_ns, tot.sum_ns);

	/* Without carry (one point at a time) the same waits look far less profitable. */
	ASSERT_OK(ffm_model__group(g, FFM_GROUP_POINT, &pt, &n_pt));
	ASSERT_EQ(n_pt, 5);
	ASSERT_EQ(pt[0].benefit_ns, 10); /* A alone: 90 stay in B */
	ASSERT_EQ(pt[1].benefit_ns, 10); /* B alone: its own 10 */
	free(pt);

	/* Subsequences: fixing only some entries of the sequence, from the stored graph. */
	ASSERT_OK(ffm_model__subsequence(g, &seq[0], 0, 3, &sub));
	ASSERT_EQ(sub, 130);
	ASSERT_OK(ffm_model__subsequence(g, &seq[0], 0, 0, &sub));
	ASSERT_EQ(sub, 10);
	ASSERT_OK(ffm_model__subsequence(g, &seq[0], 0, 1, &sub));
	ASSERT_EQ(sub, 30); /* A+B: 80 end up in C, which stays */
	ASSERT_OK(ffm_model__subsequence(g, &seq[0], 1, 2, &sub));
	ASSERT_EQ(sub, 20);
	ASSERT_OK(ffm_model__subsequence(g, &seq[0], 3, 3, &sub));
	ASSERT_EQ(sub, 10);
	ASSERT_EQ(ffm_model__subsequence(g, &seq[0], 2, 1, &sub), -EINVAL);
	ASSERT_EQ(ffm_model__subsequence(g, &seq[0], 0, 4, &sub), -ERANGE);
	{
		struct ffm_group fake = seq[0];
		fake.first_node += 1;
		ASSERT_EQ(ffm_model__subsequence(g, &fake, 0, 0, &sub), -EINVAL);
	}

	/* estimate: the same through explicit node lists */
	{
		uint32_t nodes[2];
		nodes[0] = (uint32_t)ffm_graph__problem_node(g, 0);
		nodes[1] = (uint32_t)ffm_graph__problem_node(g, 1);
		ASSERT_OK(ffm_model__estimate(g, nodes, 2, NULL, &b));
		ASSERT_EQ(b, 30);
		nodes[1] = nodes[0];
		ASSERT_EQ(ffm_model__estimate(g, nodes, 2, NULL, &b), -EINVAL);
		nodes[0] = seq[0].last_node + 1;
		ASSERT_EQ(ffm_model__estimate(g, nodes, 1, NULL, &b), -EINVAL);
	}
	free(seq);
	ffm_graph__free(g);
}

/* ---- property tests ----------------------------------------------------------------------- */

static uint64_t rng_state;

static uint64_t rnd(void)
{
	/* xorshift64* */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1DULL;
}

static uint64_t rnd_below(uint64_t n)
{
	return n ? rnd() % n : 0;
}

/* Random events: up to 3 threads, mostly ordered, some overlapping, random problems. */
static size_t random_events(struct ffm_event *ev, size_t max, bool problems)
{
	size_t n = 1 + rnd_below(max);
	uint64_t t[3] = { 0 };
	unsigned threads = 1 + (unsigned)rnd_below(3);

	for (size_t i = 0; i < n; i++) {
		unsigned tid = (unsigned)rnd_below(threads);
		struct ffm_event *e = &ev[i];
		uint8_t kind = (uint8_t)rnd_below(FFM_CALL__MAX);

		memset(e, 0, sizeof(*e));
		t[tid] += rnd_below(4) ? rnd_below(1000) : 0;
		if (rnd_below(20) == 0 && t[tid] > 50)
			t[tid] -= rnd_below(50); /* overlap the previous call */
		e->start_ns = 1000 + t[tid];
		e->dur_ns = rnd_below(2000);
		if (rnd_below(4) == 0) /* waits on either side of FFM_MODEL_BUSY_WAIT_NS */
			e->dur_ns += FFM_MODEL_BUSY_WAIT_NS - 1000;
		e->wait_ns = rnd_below(3) ? rnd_below(e->dur_ns + 1) : 0;
		if (rnd_below(10) == 0)
			e->wait_ns = e->dur_ns + rnd_below(100); /* wait > call: clamped */
		e->tid = tid;
		e->kind = kind;
		e->stack_id = rnd_below(8);
		e->fold_id = (uint32_t)(e->stack_id / 3);
		if (kind == FFM_CALL_SYNC || rnd_below(3) == 0)
			e->flags = FFM_EVENT_SYNC;
		if (problems) {
			unsigned p = (unsigned)rnd_below(6);
			if (p == 1 && (e->flags & FFM_EVENT_SYNC)) {
				e->problem = UNN;
				e->removed_ns = rnd_below(4) ? 0 : rnd_below(200);
			}
			else if (p == 2 && (e->flags & FFM_EVENT_SYNC)) {
				e->problem = FFM_PROBLEM_MISPLACED_SYNC;
				e->first_use_ns = rnd_below(3000);
			} else if (p == 3 && kind == FFM_CALL_TRANSFER)
				e->problem = DUP;
			else if (p == 4 && (e->flags & FFM_EVENT_SYNC)) {
				e->problem = FFM_PROBLEM_HOST_READ;
				e->removed_ns = rnd_below(300);
			} else if (p == 5 && kind == FFM_CALL_LAUNCH && e->wait_ns)
				e->problem = FFM_PROBLEM_LAUNCH_BLOCKED;
			/* where the GPU ran through: idle at most until the next submission */
			if ((e->problem == UNN || e->problem == FFM_PROBLEM_HOST_READ) &&
			    rnd_below(3) == 0) {
				e->flags |= FFM_EVENT_GPU_IDLE;
				e->gpu_idle_ns = rnd_below(1500);
			}
		}
		t[tid] += e->dur_ns;
	}
	/* shuffle a little: the build must sort */
	for (size_t k = 0; k < n / 10; k++) {
		size_t a = rnd_below(n), b = rnd_below(n);
		struct ffm_event x = ev[a];
		ev[a] = ev[b];
		ev[b] = x;
	}
	return n;
}

/*
 * Figure 5 transcribed literally: durations written into a copy of the graph's nodes;
 * only the nodes with mark[i] set are treated as problematic.
 */
static uint64_t reference_fig5(const struct ffm_graph *g, const struct ffm_event *ev,
			       const uint8_t *mark, uint64_t *out)
{
	size_t nn = ffm_graph__node_count(g), k = 0;
	struct ffm_node *nd = calloc(nn ? nn : 1, sizeof(*nd));
	uint64_t sum = 0;

	uint64_t *measured = calloc(nn ? nn : 1, sizeof(*measured));

	for (size_t i = 0; i < nn; i++) {
		ffm_graph__node(g, i, &nd[i]);
		measured[i] = nd[i].dur_ns;
	}
	for (size_t i = 0; i < nn; i++) {
		uint64_t est = 0;

		if (!mark[i])
			continue;
		if (nd[i].problem == UNN || nd[i].problem == FFM_PROBLEM_HOST_READ) {
			size_t next = i + 1, last_submit = 0;
			uint64_t idle = 0;
			while (!nd[next].sync) /* GetNextSyncNode */
				next++;
			/* ffm_model.h, "GPU-busy CPU time": when NextSync waited for the GPU as
			 * measured, the CPU nodes after the last submission kept in the fixed
			 * program overlapped the GPU already */
			for (size_t j = i + 1; j < next; j++)
				if (!mark[j] && nd[j].type == FFM_NODE_CLAUNCH)
					last_submit = j;
			if (!last_submit || nd[next].end || measured[next] < FFM_MODEL_BUSY_WAIT_NS)
				last_submit = next - 1;
			/* CPUNodesBetween, less the duplicates fixed with it (ffm_model.h) */
			for (size_t j = i + 1; j <= last_submit; j++)
				if (!mark[j] && (nd[j].type == FFM_NODE_CLAUNCH ||
						 nd[j].type == FFM_NODE_CWORK))
					idle += nd[j].dur_ns;
			/* "GPU idle after the sync" */
			if (ev[nd[i].event].flags & FFM_EVENT_GPU_IDLE &&
			    ev[nd[i].event].gpu_idle_ns < idle)
				idle = ev[nd[i].event].gpu_idle_ns;
			nd[i].dur_ns += nd[i].removed_ns; /* deleted with the wait */
			est = idle < nd[i].dur_ns ? idle : nd[i].dur_ns;
			nd[next].dur_ns += nd[i].dur_ns - est;
			nd[i].dur_ns = 0;
		} else if (nd[i].problem == FFM_PROBLEM_MISPLACED_SYNC) {
			est = nd[i].first_use_ns < nd[i].dur_ns ? nd[i].first_use_ns : nd[i].dur_ns;
			nd[i].dur_ns -= est;
		} else if (nd[i].problem == DUP) {
			est = nd[i].dur_ns;
			nd[i].dur_ns = 0;
		}
		if (out)
			out[k++] = est;
		sum += est;
	}
	free(measured);
	free(nd);
	return sum;
}

/*
 * The run's saving from the reference's per-node benefits, by the definition in ffm_model.h
 * ("Threads"): slices of the wall time (as many as give the sparsest thread with 20 or more
 * problems 20 a slice, 1 to 200), per slice the largest thread's benefit, written out the slow
 * way (every slice, every thread).
 */
static uint64_t reference_wall(const struct ffm_graph *g, const struct ffm_event *ev,
			       const uint8_t *mark)
{
	size_t nn = ffm_graph__node_count(g), np = ffm_graph__problem_count(g), nc;
	uint64_t *ben = calloc(np ? np : 1, sizeof(*ben)), lo = UINT64_MAX, hi = 0, total = 0;
	struct ffm_node nd;
	struct ffm_chain ch;
	size_t k = 0;

	unsigned slices = 1;
	size_t fewest = SIZE_MAX;

	reference_fig5(g, ev, mark, ben);
	nc = ffm_graph__chain_count(g);
	for (size_t c = 0; c < nc; c++) {
		size_t np = 0;

		ffm_graph__chain(g, c, &ch);
		lo = ch.start_ns < lo ? ch.start_ns : lo;
		hi = ch.end_ns > hi ? ch.end_ns : hi;
		for (size_t i = 0; i < ch.n_nodes; i++) {
			ffm_graph__node(g, ch.first_node + i, &nd);
			np += nd.problem != FFM_PROBLEM_NONE;
		}
		if (np >= 20 && np < fewest)
			fewest = np;
	}
	if (fewest != SIZE_MAX)
		slices = fewest / 20 < 200 ? (unsigned)(fewest / 20) : 200;
	for (unsigned sl = 0; sl < slices; sl++) {
		uint64_t best = 0;

		for (size_t c = 0; c < nc; c++) {
			uint64_t in = 0;

			ffm_graph__chain(g, c, &ch);
			k = 0;
			for (size_t i = 0; i < nn; i++) {
				uint64_t t;

				if (!mark[i])
					continue;
				ffm_graph__node(g, i, &nd);
				t = nd.event == FFM_NO_EVENT ? hi : ev[nd.event].start_ns;
				t = t > lo ? t - lo : 0;
				if (nd.tid == ch.tid && (unsigned)(t * slices / (hi - lo + 1)) == sl)
					in += ben[k];
				k++;
			}
			best = in > best ? in : best;
		}
		total += best;
	}
	free(ben);
	return total < ffm_graph__wall_ns(g) ? total : ffm_graph__wall_ns(g);
}

#define PROP_ITERS 400
#define PROP_MAX_EV 300

TEST(property_random_timelines)
{
	static struct ffm_event ev[PROP_MAX_EV];
	static uint64_t ben[3 * PROP_MAX_EV], ref[3 * PROP_MAX_EV];
	static uint8_t mark[3 * PROP_MAX_EV + 8];

	rng_state = 0x9e3779b97f4a7c15ULL;
	for (int it = 0; it < PROP_ITERS; it++) {
		size_t n = random_events(ev, PROP_MAX_EV, true), np, nn;
		struct ffm_graph *g = NULL;
		struct ffm_totals tot;
		uint64_t wall;

		ASSERT_OK(ffm_graph__build(ev, n, NULL, &g));
		wall = ffm_graph__wall_ns(g);
		np = ffm_graph__problem_count(g);
		nn = ffm_graph__node_count(g);
		ASSERT(nn <= 3 * n + 2 * 3);
		ASSERT_OK(ffm_model__benefit(g, ben, &tot));

		/* Invariants: each benefit and every per-thread sum within the wall time. */
		for (size_t k = 0; k < np; k++)
			ASSERT_MSG(ben[k] <= wall, "iter %d: benefit %llu > wall %llu", it,
				   (unsigned long long)ben[k], (unsigned long long)wall);
		ASSERT(tot.total_ns <= wall);
		ASSERT(tot.max_chain_ns <= wall);
		{
			/* CPU time deleted with the waits, and duplicate copies whole */
			uint64_t rm = 0;

			for (size_t k = 0; k < np; k++) {
				struct ffm_node nd;

				ffm_graph__node(g, (size_t)ffm_graph__problem_node(g, k), &nd);
				if (nd.problem == UNN || nd.problem == FFM_PROBLEM_HOST_READ)
					rm += nd.removed_ns;
				if (nd.type != FFM_NODE_CWAIT)
					rm += nd.dur_ns;
			}
			ASSERT(tot.sum_ns <= tot.problem_wait_ns + rm);
		}
		if (ffm_graph__chain_count(g) == 1)
			ASSERT(tot.sum_ns <= wall);

		/* The chains tile their span exactly. */
		for (size_t c = 0; c < ffm_graph__chain_count(g); c++) {
			struct ffm_chain ch;
			struct ffm_node nd;
			uint64_t s = 0;
			ASSERT_OK(ffm_graph__chain(g, c, &ch));
			for (uint32_t i = 0; i < ch.n_nodes; i++) {
				ASSERT_OK(ffm_graph__node(g, ch.first_node + i, &nd));
				ASSERT_EQ(nd.tid, ch.tid);
				s += nd.dur_ns;
			}
			ASSERT_EQ(s, ch.end_ns - ch.start_ns);
			ASSERT_OK(ffm_graph__node(g, ch.first_node + ch.n_nodes - 1, &nd));
			ASSERT(nd.end && nd.sync);
		}

		/* Same numbers as the literal transcription of Figure 5. */
		memset(mark, 0, nn);
		for (size_t k = 0; k < np; k++)
			mark[ffm_graph__problem_node(g, k)] = 1;
		ASSERT_EQ(reference_fig5(g, ev, mark, ref), tot.sum_ns);
		ASSERT_EQ(reference_wall(g, ev, mark), tot.total_ns);
		ASSERT(tot.total_ns <= tot.sum_ns);
		if (ffm_graph__chain_count(g) == 1)
			ASSERT_EQ(tot.total_ns, tot.sum_ns);
		for (size_t k = 0; k < np; k++)
			ASSERT_EQ(ben[k], ref[k]);

		/* Groupings: members partition the problems; totals add up; each group's benefit is
		 * the reference algorithm over its members alone. */
		for (int how = 0; how < FFM_GROUP__MAX; how++) {
			struct ffm_group *gr = NULL;
			size_t ng = 0, members = 0;
			uint64_t waits = 0, benefits = 0;

			ASSERT_OK(ffm_model__group(g, (enum ffm_grouping)how, &gr, &ng));
			for (size_t i = 0; i < ng; i++) {
				uint64_t w = 0, rm = 0, own = 0, expect;
				uint32_t cnt = 0;

				memset(mark, 0, nn);
				for (size_t k = 0; k < np; k++) {
					struct ffm_node nd;
					uint32_t node = (uint32_t)ffm_graph__problem_node(g, k);
					bool in;

					ffm_graph__node(g, node, &nd);
					if (how == FFM_GROUP_POINT)
						in = nd.stack_id == gr[i].key;
					else if (how == FFM_GROUP_FOLD)
						in = nd.fold_id == gr[i].key;
					else
						in = node >= gr[i].first_node && node <= gr[i].last_node;
					if (in) {
						mark[node] = 1;
						/* a duplicate's copy time is no wait */
						if (nd.type == FFM_NODE_CWAIT)
							w += nd.dur_ns;
						else
							own += nd.dur_ns;
						if (nd.problem == UNN ||
						    nd.problem == FFM_PROBLEM_HOST_READ)
							rm += nd.removed_ns;
						cnt++;
					}
				}
				ASSERT_EQ(cnt, gr[i].members);
				ASSERT_EQ(w, gr[i].wait_ns);
				expect = reference_wall(g, ev, mark);
				ASSERT_EQ(gr[i].benefit_ns, expect);
				ASSERT(gr[i].benefit_ns <= wall);
				/* what a group saves: at most its waits and the
				 * CPU time deleted with them: the calls' own time
				 * with the wait, duplicate copies whole */
				ASSERT(gr[i].benefit_ns <= gr[i].wait_ns + rm + own);
				members += gr[i].members;
				waits += gr[i].wait_ns;
				benefits += gr[i].benefit_ns;
			}
			ASSERT_EQ(members, np);
			ASSERT_EQ(waits, tot.problem_wait_ns);
			/* Sequences never interact: they add up to the all-at-once sum. */
			if (how == FFM_GROUP_SEQUENCE && ffm_graph__chain_count(g) == 1)
				ASSERT_EQ(benefits, tot.sum_ns);

			/* Subsequences: a random FROM..TO of each sequence = the reference over
			 * just those entries. */
			if (how == FFM_GROUP_SEQUENCE) {
				for (size_t i = 0; i < ng; i++) {
					uint32_t from = (uint32_t)rnd_below(gr[i].members);
					uint32_t to = from + (uint32_t)rnd_below(gr[i].members - from);
					uint64_t sub, expect;
					size_t pos = 0;

					ASSERT_OK(ffm_model__subsequence(g, &gr[i], from, to, &sub));
					memset(mark, 0, nn);
					for (size_t k = 0; k < np; k++) {
						uint32_t node = (uint32_t)ffm_graph__problem_node(g, k);
						if (node < gr[i].first_node || node > gr[i].last_node)
							continue;
						if (pos >= from && pos <= to)
							mark[node] = 1;
						pos++;
					}
					expect = reference_wall(g, ev, mark);
					ASSERT_EQ(sub, expect);
					ASSERT(sub <= gr[i].benefit_ns + gr[i].wait_ns);
				}
			}
			free(gr);
		}
		ffm_graph__free(g);
	}
}

TEST(property_no_problems_no_benefit)
{
	static struct ffm_event ev[PROP_MAX_EV];

	rng_state = 12345;
	for (int it = 0; it < PROP_ITERS; it++) {
		size_t n = random_events(ev, PROP_MAX_EV, false);
		struct ffm_graph *g = NULL;
		struct ffm_group *gr = (void *)1;
		struct ffm_totals tot;
		size_t ng = 1;

		ASSERT_OK(ffm_graph__build(ev, n, NULL, &g));
		ASSERT_EQ(ffm_graph__problem_count(g), 0);
		ASSERT_OK(ffm_model__benefit(g, NULL, &tot));
		ASSERT_EQ(tot.sum_ns, 0);
		ASSERT_EQ(tot.total_ns, 0);
		ASSERT_OK(ffm_model__group(g, FFM_GROUP_SEQUENCE, &gr, &ng));
		ASSERT_EQ(ng, 0);
		ASSERT(gr == NULL);
		ffm_graph__free(g);
	}
}

TEST(property_benefit_monotone_in_idle)
{
	/* More CPU work before the next sync never lowers a removal's benefit, and the benefit
	 * never exceeds the wait: the shape of Figure 4 between its two extremes. */
	uint64_t prev = 0;

	for (uint64_t work = 0; work <= 300; work += 7) {
		struct step s[MAX_STEPS] = { L(0, 5), SYNC(0, 100, UNN, 1), L(0, 10),
					     SYNC(work, 50, NONE, 2) };
		struct ffm_event ev[MAX_STEPS];
		size_t n_ev;
		struct ffm_graph *g = build_case(s, 0, ev, &n_ev);
		uint64_t b;

		ASSERT(g);
		ASSERT_OK(ffm_model__benefit(g, &b, NULL));
		ASSERT(b >= prev);
		ASSERT(b <= 100);
		ASSERT_EQ(b, 10 + work < 100 ? 10 + work : 100);
		prev = b;
		ffm_graph__free(g);
	}
}

TEST_MAIN()
