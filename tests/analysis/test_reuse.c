/* SPDX-License-Identifier: MIT */
/*
 * The reuse pass's pairing (analysis/reuse.c, an_reuse_find), by a table of call sequences:
 * which allocations pair with the free of their address, per thread, and which pairs repeat
 * as one temporary buffer step after step; and the price of a set (rule (c) of
 * stages/ffm_price.h, the first pair's buffer kept).
 */
#include <math.h>

#include "analysis/analysis_int.h"
#include "stages/ffm_price.h"
#include "tests/testutil.h"

#define A(tid, stack, addr, bytes, ns) { tid, FFM_CALL_ALLOC, stack, addr, bytes, ns, 1 }
#define F(tid, stack, addr, ns) { tid, FFM_CALL_FREE, stack, addr, 0, ns, 2 }
#define M(tid, addr, bytes, ns) { tid, FFM_CALL_MEMSET, 30, addr, bytes, ns, 3 }
#define MAXC 24

struct want {
	uint32_t tid;
	int64_t alloc_stack, free_stack;
	uint64_t bytes, pairs, alloc_ns, free_ns, fills, fill_bytes;
};

struct reuse_find_case {
	const char *name;
	struct an_reuse_call c[MAXC];
	struct want w[3]; /* the sets, pairs 0 ends */
};

/* Steps of one thread: alloc at stack 10, an optional fill, free at stack 20; the addresses
 * alternate (an allocator may or may not give the same block back). */
static const struct reuse_find_case cases[] = {
	{ "pairs across steps, each filled",
	  { A(1, 10, 0x1000, 4096, 100), M(1, 0x1000, 4096, 7), F(1, 20, 0x1000, 50),
	    A(1, 10, 0x2000, 4096, 110), M(1, 0x2000, 4096, 7), F(1, 20, 0x2000, 60),
	    A(1, 10, 0x1000, 4096, 120), M(1, 0x1000, 4096, 7), F(1, 20, 0x1000, 70) },
	  { { 1, 10, 20, 4096, 3, 330, 180, 3, 3 * 4096 } } },
	{ "pairs without a fill; a memset of another buffer is not theirs",
	  { A(1, 10, 0x1000, 4096, 100), M(1, 0x9000, 64, 5), F(1, 20, 0x1000, 50),
	    A(1, 10, 0x1000, 4096, 100), F(1, 20, 0x1000, 50) },
	  { { 1, 10, 20, 4096, 2, 200, 100, 0, 0 } } },
	{ "a memset inside the latest allocation is its fill",
	  { A(1, 10, 0x1000, 4096, 100), M(1, 0x1800, 1024, 5), F(1, 20, 0x1000, 50),
	    A(1, 10, 0x1000, 4096, 100), M(1, 0x2000, 16, 5), F(1, 20, 0x1000, 50) },
	  { { 1, 10, 20, 4096, 2, 200, 100, 1, 1024 } } },
	{ "a buffer kept across steps is no set; the steps' temporaries are",
	  { A(1, 11, 0x8000, 1 << 20, 900), A(1, 10, 0x1000, 4096, 100), F(1, 20, 0x1000, 50),
	    A(1, 10, 0x1000, 4096, 100), F(1, 20, 0x1000, 50), F(1, 21, 0x8000, 400) },
	  { { 1, 10, 20, 4096, 2, 200, 100, 0, 0 } } },
	{ "a buffer freed a step later (allocate the new one, free the old one) is no set",
	  { A(1, 10, 0x1000, 4096, 100), A(1, 10, 0x2000, 4096, 100), F(1, 20, 0x1000, 50),
	    A(1, 10, 0x3000, 4096, 100), F(1, 20, 0x2000, 50), A(1, 10, 0x1000, 4096, 100),
	    F(1, 20, 0x3000, 50) },
	  { { 0 } } },
	{ "a free of another address, and of another thread's buffer, pairs with nothing",
	  { A(1, 10, 0x1000, 4096, 100), F(1, 20, 0x7000, 50), F(2, 20, 0x1000, 50),
	    A(2, 10, 0x5000, 4096, 100), F(2, 20, 0x5000, 50) },
	  { { 0 } } },
	{ "one step only is no set",
	  { A(1, 10, 0x1000, 4096, 100), F(1, 20, 0x1000, 50) },
	  { { 0 } } },
	{ "threads and sizes make sets of their own; a failed allocation is none",
	  { A(1, 10, 0x1000, 4096, 100), A(2, 10, 0x2000, 4096, 100), F(1, 20, 0x1000, 50),
	    F(2, 20, 0x2000, 50), A(1, 10, 0x1000, 4096, 100), A(2, 10, 0x2000, 4096, 100),
	    F(2, 20, 0x2000, 50), F(1, 20, 0x1000, 50), A(1, 10, 0, 4096, 100),
	    A(1, 10, 0x4000, 64 << 20, 300), F(1, 20, 0x4000, 90), A(1, 10, 0x4000, 64 << 20, 300),
	    F(1, 20, 0x4000, 90) },
	  { { 1, 10, 20, 4096, 2, 200, 100, 0, 0 }, { 2, 10, 20, 4096, 2, 200, 100, 0, 0 },
	    { 1, 10, 20, 64 << 20, 2, 600, 180, 0, 0 } } },
};

static bool same(const struct an_reuse_set *s, const struct want *w)
{
	return s->tid == w->tid && s->alloc_stack == w->alloc_stack && s->bytes == w->bytes;
}

static void check_sets(const struct reuse_find_case *t, const struct an_reuse_find *f)
{
	const struct an_reuse_set *s;
	size_t it = 0, nw = 0, ns = 0;

	while (nw < 3 && t->w[nw].pairs)
		nw++;
	while ((s = an_reuse_find_next(f, &it))) {
		const struct want *w = NULL;

		ns++;
		for (size_t k = 0; k < nw && !w; k++)
			if (same(s, &t->w[k]))
				w = &t->w[k];
		ASSERT_MSG(w, "%s: an unexpected set (tid %u, stack %lld, %llu bytes)", t->name,
			   s->tid, (long long)s->alloc_stack, (unsigned long long)s->bytes);
		ASSERT_MSG(s->free_stack == w->free_stack && s->pairs == w->pairs &&
				   s->alloc_ns == w->alloc_ns && s->free_ns == w->free_ns &&
				   s->fills == w->fills && s->fill_bytes == w->fill_bytes,
			   "%s: pairs %llu alloc %llu free %llu fills %llu (%llu bytes)", t->name,
			   (unsigned long long)s->pairs, (unsigned long long)s->alloc_ns,
			   (unsigned long long)s->free_ns, (unsigned long long)s->fills,
			   (unsigned long long)s->fill_bytes);
	}
	ASSERT_MSG(ns == nw, "%s: %zu sets, want %zu", t->name, ns, nw);
}

TEST(reuse_pairs_table)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct reuse_find_case *t = &cases[i];
		struct an_reuse_find f;

		an_reuse_find_init(&f);
		for (size_t k = 0; k < MAXC && t->c[k].kind; k++)
			ASSERT_OK(an_reuse_find_call(&f, &t->c[k]));
		check_sets(t, &f);
		an_reuse_find_fini(&f);
	}
}

/* The set's price: every allocation and free but the first pair's (the buffer that stays),
 * at their own times, and every fill. */
TEST(reuse_set_price)
{
	struct an_reuse_set s = { .tid = 1, .alloc_stack = 10, .free_stack = 20, .bytes = 4096,
				  .pairs = 4, .alloc_ns = 900 + 3 * 100, .free_ns = 300 + 3 * 50,
				  .first_alloc_ns = 900, .first_free_ns = 300, .fills = 4,
				  .fill_ns = 4 * 7, .fill_bytes = 4 * 4096 };
	struct ffm_price p;

	ASSERT_OK(an_reuse_price(&s, false, &p));
	ASSERT_MSG(fabs(p.saved_ns - (3 * 100 + 3 * 50 + 4 * 7)) < 1e-6, "saved %.1f", p.saved_ns);
	s.fills = s.fill_ns = s.fill_bytes = 0;
	ASSERT_OK(an_reuse_price(&s, true, &p));
	ASSERT_MSG(fabs(p.saved_ns - (3 * 100 + 3 * 50)) < 1e-6, "saved %.1f", p.saved_ns);
}

TEST_MAIN()
