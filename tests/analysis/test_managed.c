/* SPDX-License-Identifier: MIT */
/*
 * The managed memset's rule (analysis/managed.c) by tables: which occurrences are the pattern
 * (a memset of managed memory that waited, whose pages the host faulted back after it, by stage
 * 4's count), and the call each one prices (rule (a) of stages/ffm_price.h) against the costs
 * the simulated driver plants: per call, the migration of every page of the buffer to the GPU
 * and one fault per page the host touches after.
 */
#include <math.h>

#include "analysis/analysis_int.h"
#include "stages/ffm_price.h"
#include "tests/testutil.h"

#define KiB 1024ull
#define MiB (1024ull * KiB)
#define US 1000.0

static const struct ffm_event sync_ev = {
	.dur_ns = 900000, .wait_ns = 880000, .flags = FFM_EVENT_SYNC,
	.problem = FFM_PROBLEM_UNNECESSARY_SYNC,
};

TEST(managed_rule_detection_table)
{
	static const struct {
		const char *name;
		struct an_managed_site x;
		uint8_t problem, flags;
		uint64_t wait_ns;
		bool hit;
	} t[] = {
		{ "memset, faults after every call", { FFM_EV_MEMSET, 400, 400 * 2 * MiB, 400, 204800 },
		  FFM_PROBLEM_UNNECESSARY_SYNC, FFM_EVENT_SYNC, 880000, true },
		{ "its wait judged required (the host uses the bytes)",
		  { FFM_EV_MEMSET, 400, 400 * 2 * MiB, 400, 204800 }, FFM_PROBLEM_NONE,
		  FFM_EVENT_SYNC, 880000, true },
		{ "judged misplaced", { FFM_EV_MEMSET, 400, 400 * 2 * MiB, 400, 400 },
		  FFM_PROBLEM_MISPLACED_SYNC, FFM_EVENT_SYNC, 880000, true },
		{ "no fault after it (the device or nobody reads it)",
		  { FFM_EV_MEMSET, 400, 400 * 2 * MiB, 400, 0 }, FFM_PROBLEM_UNNECESSARY_SYNC,
		  FFM_EVENT_SYNC, 880000, false },
		{ "not on managed memory (device memory: no operation counted)",
		  { FFM_EV_MEMSET, 400, 400 * 2 * MiB, 0, 0 }, FFM_PROBLEM_UNNECESSARY_SYNC,
		  FFM_EVENT_SYNC, 880000, false },
		{ "a copy into managed memory", { FFM_EV_TRANSFER, 400, 400 * 2 * MiB, 400, 204800 },
		  FFM_PROBLEM_UNNECESSARY_SYNC, FFM_EVENT_SYNC, 880000, false },
		{ "a launch before the faults", { FFM_EV_LAUNCH, 400, 0, 400, 204800 },
		  FFM_PROBLEM_NONE, FFM_EVENT_SYNC, 880000, false },
		{ "a memset that did not wait", { FFM_EV_MEMSET, 400, 400 * 2 * MiB, 400, 204800 },
		  FFM_PROBLEM_NONE, 0, 0, false },
		{ "a duplicate's sync half", { FFM_EV_MEMSET, 400, 400 * 2 * MiB, 400, 204800 },
		  FFM_PROBLEM_UNNECESSARY_SYNC, FFM_EVENT_SYNC | FFM_EVENT_SPLIT, 880000, false },
		{ "a host read stays a host read", { FFM_EV_MEMSET, 400, 400 * 2 * MiB, 400, 204800 },
		  FFM_PROBLEM_HOST_READ, FFM_EVENT_SYNC, 880000, false },
		{ "no calls in the timeline", { FFM_EV_MEMSET, 0, 0, 400, 204800 },
		  FFM_PROBLEM_UNNECESSARY_SYNC, FFM_EVENT_SYNC, 880000, false },
	};

	const struct ffm_node_model nm4k = { .page_size = 4 * KiB };

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct ffm_event e = sync_ev;
		struct ffm_price_call c;

		e.problem = t[i].problem;
		e.flags = t[i].flags;
		e.wait_ns = t[i].wait_ns;
		ASSERT_MSG(an_managed_rule(&t[i].x, &e, false, &nm4k, &c) == t[i].hit, "%s", t[i].name);
	}
}

/* The simulated driver's planted costs as a node model: @mig_us a page to the GPU, @fault_us
 * a page back. */
static void planted(struct ffm_node_model *nm, double mig_us, double fault_us)
{
	memset(nm, 0, sizeof(*nm));
	nm->page_size = 4 * KiB;
	nm->to_device_ns_per_page = mig_us * US;
	nm->to_host_ns_per_page = fault_us * US;
}

/* Each variant: the buffer, the pages the host reads back per call; what the fix deletes per
 * call is the own time, the migration of the pages the host read (the rest stays on the GPU)
 * and one fault per page read. */
TEST(managed_rule_prices_the_planted_costs)
{
	static const struct {
		const char *name;
		uint64_t bytes, pages_read, calls;
	} t[] = {
		{ "4 KiB, all of it", 4 * KiB, 1, 400 },
		{ "2 MiB, all of it", 2 * MiB, 512, 400 },
		{ "2 MiB, one page", 2 * MiB, 1, 400 },
		{ "64 MiB, all of it", 64 * MiB, 16384, 20 },
		{ "64 MiB, one page", 64 * MiB, 1, 20 },
		{ "2 MiB, all of it, 4 threads", 2 * MiB, 512, 4 * 100 },
	};
	struct ffm_node_model nm;

	planted(&nm, 2, 3);
	for (size_t i = 0; i < 2 * sizeof(t) / sizeof(t[0]); i++) {
		size_t v = i / 2;
		bool alone = i % 2;
		struct an_managed_site x = { FFM_EV_MEMSET, t[v].calls, t[v].calls * t[v].bytes,
					     t[v].calls, t[v].calls * t[v].pages_read };
		struct ffm_event e = sync_ev;
		struct ffm_price_call c;
		struct ffm_price p;
		/* alone: the recorded call, whose wait holds the migration; else its time
		 * outside the wait and the modeled migration of the pages the host read */
		double own = alone ? 900 * US : 20 * US,
		       mig = alone ? 0 : (double)t[v].pages_read * 2 * US,
		       fault = (double)t[v].pages_read * 3 * US;

		ASSERT_MSG(an_managed_rule(&x, &e, alone, &nm, &c), "%s", t[v].name);
		ASSERT_OK(ffm_price__delete(&nm, &c, &p));
		ASSERT_MSG(fabs(p.own_ns - own) < 1 && fabs(p.migrate_ns - mig) < 1 &&
				   fabs(p.fault_ns - fault) < 1,
			   "%s%s: own %.0f migrate %.0f fault %.0f, want %.0f %.0f %.0f", t[v].name,
			   alone ? " (alone)" : "", p.own_ns, p.migrate_ns, p.fault_ns, own, mig,
			   fault);
	}
	/* A driver that brings 16 pages back per fault (read-ahead): stage 4 counts a sixteenth
	 * of the faults (at least one), the node model says so, and the price is of the pages. */
	nm.host_pages_per_fault = 16;
	for (size_t v = 0; v < sizeof(t) / sizeof(t[0]); v++) {
		uint64_t counted = (t[v].pages_read + 15) / 16, pages = counted * 16,
			 buf = t[v].bytes / (4 * KiB);
		struct an_managed_site x = { FFM_EV_MEMSET, t[v].calls, t[v].calls * t[v].bytes,
					     t[v].calls, t[v].calls * counted };
		struct ffm_event e = sync_ev;
		struct ffm_price_call c;
		struct ffm_price p;
		double fault = (double)(pages < buf ? pages : buf) * 3 * US;

		ASSERT_MSG(an_managed_rule(&x, &e, false, &nm, &c), "%s", t[v].name);
		ASSERT_OK(ffm_price__delete(&nm, &c, &p));
		ASSERT_MSG(fabs(p.fault_ns - fault) < 1 &&
				   fabs(p.migrate_ns - fault / 3 * 2) < 1,
			   "%s, 16 pages a fault: fault %.0f migrate %.0f, want %.0f %.0f", t[v].name,
			   p.fault_ns, p.migrate_ns, fault, fault / 3 * 2);
	}
	nm.host_pages_per_fault = 0;
	/* without migration figures the rule wants a figure it lacks */
	{
		struct an_managed_site x = { FFM_EV_MEMSET, 1, 2 * MiB, 1, 512 };
		struct ffm_event e = sync_ev;
		struct ffm_price_call c;
		struct ffm_price p;

		nm.page_size = 0;
		ASSERT(an_managed_rule(&x, &e, false, &nm, &c));
		ASSERT_EQ(ffm_price__delete(&nm, &c, &p), -ENODATA);
	}
}

TEST_MAIN()
