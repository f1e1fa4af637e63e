// SPDX-License-Identifier: MIT
/* Table-driven tests of the FFM stage plan (stages/ffm_plan.h). */
#include <stdbool.h>

#include "tests/testutil.h"

#include "stages/ffm_plan.h"

#define B(s) FFM_STAGE_BIT(s)
#define ALL (B(1) | B(2) | B(3) | B(4))

struct plan_case {
	const char *name;
	struct ffm_plan_input in;
	uint32_t stage, reason;
	uint32_t probes_set, probes_clear; /* flags that must be set / clear */
	uint32_t skipped, invalidate;
	bool ready;
};

static const struct plan_case plan_cases[] = {
	{ "first run", { 0 }, 1, FFM_PLAN_NEXT, FFM_PROBE_WAIT | FFM_PROBE_PROC,
	  FFM_PROBE_TRANSFER | FFM_PROBE_LAUNCH | FFM_PROBE_SYNC_FUNCS, 0, 0, false },
	{ "after 1", { .completed = B(1) }, 2, FFM_PLAN_NEXT,
	  FFM_PROBE_WAIT | FFM_PROBE_SYNC_FUNCS | FFM_PROBE_TRANSFER | FFM_PROBE_ALLOC |
		  FFM_PROBE_FREE | FFM_PROBE_MEMSET | FFM_PROBE_LAUNCH,
	  FFM_PROBE_SYNC_STATIC | FFM_PROBE_MEMTRACE | FFM_PROBE_HASH, 0, 0, false },
	{ "after 2", { .completed = B(1) | B(2) }, 3, FFM_PLAN_NEXT,
	  FFM_PROBE_MEMTRACE | FFM_PROBE_HASH | FFM_PROBE_TRANSFER, FFM_PROBE_SYNC_USE, 0, 0,
	  false },
	{ "after 3", { .completed = B(1) | B(2) | B(3) }, 4, FFM_PLAN_NEXT,
	  FFM_PROBE_SYNC_USE | FFM_PROBE_SYNC_FUNCS, FFM_PROBE_MEMTRACE | FFM_PROBE_HASH, 0, 0,
	  false },
	{ "all done: monitor", { .completed = ALL }, 1, FFM_PLAN_MONITOR, FFM_PROBE_WAIT,
	  FFM_PROBE_TRANSFER, 0, 0, true },
	{ "monitor times the copies of a key with duplicates",
	  { .completed = ALL, .time_copies = true }, 1, FFM_PLAN_MONITOR,
	  FFM_PROBE_WAIT | FFM_PROBE_TRANSFER | FFM_PROBE_MEMSET,
	  FFM_PROBE_LAUNCH | FFM_PROBE_SYNC_FUNCS | FFM_PROBE_ALLOC | FFM_PROBE_FREE, 0, 0, true },
	{ "duplicates before stage 4 change nothing", { .completed = B(1) | B(2) | B(3),
	  .time_copies = true }, 4, FFM_PLAN_NEXT, FFM_PROBE_SYNC_USE, FFM_PROBE_MEMSET, 0, 0,
	  false },
	{ "an override of stage 1 times no copies",
	  { .completed = ALL, .time_copies = true, .override_stage = 1 }, 1, FFM_PLAN_OVERRIDE,
	  FFM_PROBE_WAIT, FFM_PROBE_TRANSFER, 0, 0, true },
	{ "drift: re-trace", { .completed = ALL, .drift = true }, 2, FFM_PLAN_DRIFT,
	  FFM_PROBE_SYNC_FUNCS, 0, 0, B(2) | B(3) | B(4), true },
	{ "drift before done is ignored", { .completed = B(1), .drift = true }, 2, FFM_PLAN_NEXT,
	  0, 0, 0, 0, false },
	{ "partial stage 2 retried", { .completed = B(1), .failures = { [2] = 1 } }, 2,
	  FFM_PLAN_RETRY, FFM_PROBE_TRANSFER, 0, 0, 0, false },
	{ "stage 2 given up", { .completed = B(1), .failures = { [2] = 2 } }, 3, FFM_PLAN_NEXT,
	  FFM_PROBE_MEMTRACE, 0, B(2), 0, false },
	{ "stage 1 given up: static syncs",
	  { .failures = { [1] = FFM_PLAN_MAX_FAILURES } }, 2, FFM_PLAN_NEXT,
	  FFM_PROBE_SYNC_STATIC | FFM_PROBE_TRANSFER, FFM_PROBE_SYNC_FUNCS, B(1), 0, false },
	{ "stage 3 given up skips 4", { .completed = B(1) | B(2), .failures = { [3] = 5 } }, 1,
	  FFM_PLAN_MONITOR, FFM_PROBE_WAIT, 0, B(3) | B(4), 0, true },
	{ "a completed stage is never given up",
	  { .completed = ALL, .failures = { [3] = 9 } }, 1, FFM_PLAN_MONITOR, 0, 0, 0, 0, true },
	{ "out-of-order completion fills the gap", { .completed = B(1) | B(3) }, 2,
	  FFM_PLAN_NEXT, 0, 0, 0, 0, false },
	{ "override wins over order", { .completed = B(1), .override_stage = 4 }, 4,
	  FFM_PLAN_OVERRIDE, FFM_PROBE_SYNC_USE, 0, 0, 0, false },
	{ "override wins over monitor", { .completed = ALL, .override_stage = 3 }, 3,
	  FFM_PLAN_OVERRIDE, FFM_PROBE_MEMTRACE, 0, 0, 0, true },
	{ "override without stage 1", { .override_stage = 2 }, 2, FFM_PLAN_OVERRIDE,
	  FFM_PROBE_SYNC_STATIC, FFM_PROBE_SYNC_FUNCS, 0, 0, false },
	{ "override wins over drift", { .completed = ALL, .drift = true, .override_stage = 1 }, 1,
	  FFM_PLAN_OVERRIDE, 0, 0, 0, 0, true },
};

TEST(plan_table)
{
	for (size_t i = 0; i < sizeof(plan_cases) / sizeof(plan_cases[0]); i++) {
		const struct plan_case *c = &plan_cases[i];
		struct ffm_plan p;

		ASSERT_OK(ffm_plan__next(&c->in, &p));
		ASSERT_MSG(p.stage == c->stage, "%s: stage %u, want %u", c->name, p.stage, c->stage);
		ASSERT_MSG(p.reason == c->reason, "%s: reason %u, want %u", c->name, p.reason,
			   c->reason);
		ASSERT_MSG((p.probes & c->probes_set) == c->probes_set, "%s: probes %#x lack %#x",
			   c->name, p.probes, c->probes_set);
		ASSERT_MSG(!(p.probes & c->probes_clear), "%s: probes %#x have %#x", c->name,
			   p.probes, p.probes & c->probes_clear);
		ASSERT_MSG(p.skipped == c->skipped, "%s: skipped %#x, want %#x", c->name, p.skipped,
			   c->skipped);
		ASSERT_MSG(p.invalidate == c->invalidate, "%s: invalidate %#x, want %#x", c->name,
			   p.invalidate, c->invalidate);
		ASSERT_MSG(p.analysis_ready == c->ready, "%s: ready %d", c->name, p.analysis_ready);
	}
}

TEST(plan_walk_of_a_job_key)
{
	/* Runs of one job key as the store would feed them back: 1, 2 (aborted), 2, 3, 4, then
	 * monitoring. */
	struct ffm_plan_input in = { 0 };
	static const struct {
		uint32_t stage;
		bool ok;
	} runs[] = { { 1, true }, { 2, false }, { 2, true }, { 3, true }, { 4, true }, { 1, true } };
	struct ffm_plan p;

	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		ASSERT_OK(ffm_plan__next(&in, &p));
		ASSERT_EQ(p.stage, runs[i].stage);
		if (runs[i].ok) {
			in.completed |= B(p.stage);
			in.failures[p.stage] = 0;
		} else {
			in.failures[p.stage]++;
		}
	}
	ASSERT_EQ(p.reason, FFM_PLAN_MONITOR);
	ASSERT(p.analysis_ready);
}

TEST(plan_errors)
{
	struct ffm_plan_input in = { .override_stage = 5 };
	struct ffm_plan p;

	ASSERT_EQ(ffm_plan__next(&in, &p), -EINVAL);
	in.override_stage = -1;
	ASSERT_EQ(ffm_plan__next(&in, &p), -EINVAL);
	ASSERT_EQ(ffm_plan__next(NULL, &p), -EINVAL);
	ASSERT_EQ(ffm_plan__next(&in, NULL), -EINVAL);
	ASSERT_EQ(ffm_plan__probes(FFM_STAGE_NONE), 0);
	ASSERT_EQ(ffm_plan__probes((enum ffm_stage)9), 0);
}

TEST(plan_stage_probes_nest)
{
	/* Stage 1 is the subset every stage has; stage 2 probes every call class. */
	uint32_t s1 = ffm_plan__probes(FFM_STAGE_BASELINE);
	uint32_t s2 = ffm_plan__probes(FFM_STAGE_DETAIL);

	ASSERT_EQ(s1, FFM_PROBE_PROC | FFM_PROBE_WAIT);
	for (int s = 1; s < FFM_STAGE__MAX; s++)
		ASSERT_EQ(ffm_plan__probes((enum ffm_stage)s) & s1, s1);
	ASSERT_EQ(s2 & (FFM_PROBE_TRANSFER | FFM_PROBE_ALLOC | FFM_PROBE_FREE | FFM_PROBE_MEMSET |
			FFM_PROBE_LAUNCH | FFM_PROBE_SYNC_FUNCS),
		  FFM_PROBE_TRANSFER | FFM_PROBE_ALLOC | FFM_PROBE_FREE | FFM_PROBE_MEMSET |
			  FFM_PROBE_LAUNCH | FFM_PROBE_SYNC_FUNCS);
}

TEST_MAIN()
