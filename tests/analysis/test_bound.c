/* SPDX-License-Identifier: MIT */
/*
 * The bound pass (analysis/bound.c, an_stream_bound) on timelines built by hand: the busiest
 * stream's busy time, the CPU time before its first work (the head) and the cap on every
 * benefit that follows, where the stream's first work is an empty interval (its first launch,
 * copy or memset, analysis/events.c) and its waits are few or removed by the fixes.
 */
#include "analysis/analysis_int.h"
#include "tests/testutil.h"

#define MS 1000000ull
#define NOWAIT UINT32_MAX

/* A run of 1000 ms from t = 0: busy intervals of stream 7 (start, end, event), one site whose
 * benefit is 300 ms, no process (no tail). */
struct bound_case {
	struct an_timeline tl;
	struct ffm_analysis_result res;
	struct ffm_an_site site;
};

static void bound_case_init(struct bound_case *c)
{
	memset(c, 0, sizeof(*c));
	c->tl.run_start_ns = 1; /* 0 reads as "not known" */
	c->tl.run_end_ns = 1000 * MS;
	c->tl.deleted = c->tl.streams = OATAB_U32_INIT;
	c->res.wall_ns = 1000 * MS;
	c->site.benefit_ns = 300 * MS;
	c->res.sites = &c->site;
	c->res.n_sites = 1;
	c->res.totals.total_ns = 300 * MS;
}

static void add_busy(struct bound_case *c, uint64_t start, uint64_t end, uint32_t ev)
{
	ASSERT_OK(ffm_grow((void **)&c->tl.busy, &c->tl.cap_busy, c->tl.n_busy + 1,
			   sizeof(*c->tl.busy)));
	c->tl.busy[c->tl.n_busy++] = (struct busy){ .stream = 7, .start = start, .end = end,
						    .tgid = 1, .tid = 1, .ev = ev };
}

static void bound_case_fini(struct bound_case *c)
{
	free(c->tl.busy);
	oatab_free(&c->tl.deleted);
	oatab_free(&c->tl.streams);
}

TEST(the_head_ends_at_the_streams_first_work_not_at_its_first_kept_wait)
{
	/* The H200's dup_transfer variant: the stream's work began at 100 ms (its first launch),
	 * but the only wait the bound keeps is the last read's, 10 µs at 990 ms. The head is
	 * the 100 ms before the first work, and the 300 ms benefit is not capped. */
	struct bound_case c;

	bound_case_init(&c);
	add_busy(&c, 100 * MS, 100 * MS, NOWAIT);
	add_busy(&c, 990 * MS, 990 * MS + 10000, NOWAIT - 1);
	an_stream_bound(&c.tl, &c.res);
	ASSERT_EQ(c.res.q.stream_busy_ns, 10000);
	ASSERT_EQ(c.res.q.stream_head_ns, 100 * MS - 1);
	ASSERT_EQ(c.res.totals.total_ns, 300 * MS);
	ASSERT_EQ(c.site.benefit_ns, 300 * MS);
	ASSERT(!c.res.q.stream_capped);
	bound_case_fini(&c);
}

TEST(waits_whose_work_the_fixes_delete_do_not_move_the_streams_start)
{
	/* Waits of 1 ms every 10 ms from 100 ms on, each one's work deleted by its fix (a
	 * pageable copy's staging), and a kept wait of 600 ms at the end: the head is still the
	 * 100 ms before the first wait, the busy time the 600 ms, and the cap 1000 - 100 - 600. */
	struct bound_case c;

	bound_case_init(&c);
	for (uint32_t i = 0; i < 20; i++) {
		add_busy(&c, (100 + 10 * i) * MS, (101 + 10 * i) * MS, i);
		ASSERT_OK(oatab_put_u32(&c.tl.deleted, i, (uint32_t)(2 * MS)));
	}
	add_busy(&c, 390 * MS, 990 * MS, 100);
	an_stream_bound(&c.tl, &c.res);
	ASSERT_EQ(c.res.q.stream_busy_ns, 600 * MS);
	ASSERT_EQ(c.res.q.stream_head_ns, 100 * MS - 1);
	ASSERT_EQ(c.res.totals.total_ns, 300 * MS); /* the cap, 1000 - 600 - (100 - 1), is more */
	ASSERT(!c.res.q.stream_capped);
	bound_case_fini(&c);

	/* With a kept wait of 700 ms the cap binds: 1000 - 700 - 99.999999 ms. */
	bound_case_init(&c);
	add_busy(&c, 100 * MS, 101 * MS, 0);
	ASSERT_OK(oatab_put_u32(&c.tl.deleted, 0, (uint32_t)(2 * MS)));
	add_busy(&c, 290 * MS, 990 * MS, 1);
	an_stream_bound(&c.tl, &c.res);
	ASSERT_EQ(c.res.q.stream_busy_ns, 700 * MS);
	ASSERT_EQ(c.res.totals.total_ns, 1000 * MS - 700 * MS - (100 * MS - 1));
	ASSERT(c.res.q.stream_capped);
	bound_case_fini(&c);
}

TEST_MAIN()
