/* SPDX-License-Identifier: MIT */
/*
 * Pass "price a temporary buffer's reuse" (analysis/analysis.c runs the passes; after the
 * verdicts and the pricing of price.c, before the graph). A step that allocates a buffer,
 * fills it (a memset, or nothing), uses it and frees it, step after step, pays the allocation,
 * the fill and the free every step; the fix allocates one buffer and reuses it. The pass reads
 * the timeline run's allocations, frees and memsets with their addresses (an allocation's
 * pointer, read at its return through its out argument; a free's and a memset's destination:
 * bpf/ffm.h, ffm_rec_call.dst), pairs per thread each allocation with the free of its address
 * (an_reuse_find), and prices each set of pairs of one size that repeats with rule (c) of
 * stages/ffm_price.h: every call of the set but one allocation and one free, at the calls'
 * recorded times. The saving goes to the set's allocations in tl.deleted (the model saves it
 * whichever side bounds the loop), each one a FFM_PROBLEM_TEMP_BUFFER at the allocation's line.
 *
 * Only the calls' own time outside their waits is deleted: a free's implicit sync (or a
 * memset's) is a wait that stage 3's verdict prices where a fix may remove it (an unnecessary
 * sync), so it is never counted twice.
 */
#include <errno.h>

#include "analysis/analysis_int.h"
#include "stages/ffm_price.h"

/* A live buffer of one thread, keyed (address, tid + 1). */
struct live {
	struct oa_key k;
	bool live;
	uint64_t site_seq;  /* its allocation site's count at its allocation (struct site_seq) */
	int64_t stack;	    /* its allocation's */
	uint64_t bytes;
	uint64_t alloc_ns;  /* its allocation's own time */
	uint64_t fills, fill_ns, fill_bytes;
	uint32_t api;	    /* its allocation's driver function */
};

/* Allocations so far of one site on one thread, keyed (stack, tid + 1). */
struct site_seq {
	struct oa_key k;
	uint64_t n;
};

/* A set of pairs, keyed (hash of allocation stack, free stack and size, tid + 1). */
struct set_ent {
	struct oa_key k;
	struct an_reuse_set s;
};

/* The latest allocation of each thread, keyed (tid + 1, 0): a memset inside it. */
struct last_alloc {
	struct oa_key k;
	uint64_t addr;
};

void an_reuse_find_init(struct an_reuse_find *f)
{
	*f = (struct an_reuse_find){
		.live = OATAB_INIT(struct live),
		.seq = OATAB_INIT(struct site_seq),
		.sets = OATAB_INIT(struct set_ent),
		.last = OATAB_INIT(struct last_alloc),
	};
}

void an_reuse_find_fini(struct an_reuse_find *f)
{
	oatab_free(&f->live);
	oatab_free(&f->seq);
	oatab_free(&f->sets);
	oatab_free(&f->last);
}

static int on_alloc(struct an_reuse_find *f, const struct an_reuse_call *c)
{
	struct site_seq *q = oatab_find(&f->seq, (uint64_t)c->stack, (uint64_t)c->tid + 1, true);
	struct last_alloc *l;
	struct live *b;

	if (!q)
		return -ENOMEM;
	q->n++;
	b = oatab_find(&f->live, c->addr, (uint64_t)c->tid + 1, true);
	if (!b)
		return -ENOMEM;
	*b = (struct live){ .k = b->k, .live = true, .site_seq = q->n, .stack = c->stack,
			    .bytes = c->bytes, .alloc_ns = c->own_ns, .api = c->api };
	l = oatab_find(&f->last, (uint64_t)c->tid + 1, 0, true);
	if (!l)
		return -ENOMEM;
	l->addr = c->addr;
	return 0;
}

/* A memset of a live buffer: at its start, or inside the thread's latest allocation. */
static void on_fill(struct an_reuse_find *f, const struct an_reuse_call *c)
{
	struct live *b = oatab_get(&f->live, c->addr, (uint64_t)c->tid + 1);
	const struct last_alloc *l;

	if (!b || !b->live) {
		l = oatab_get(&f->last, (uint64_t)c->tid + 1, 0);
		b = l ? oatab_get(&f->live, l->addr, (uint64_t)c->tid + 1) : NULL;
		if (!b || !b->live || c->addr < l->addr || c->addr - l->addr >= b->bytes)
			return;
	}
	b->fills++;
	b->fill_ns += c->own_ns;
	b->fill_bytes += c->bytes;
}

/* A free of a live buffer closes a pair; one that lived within one step (no allocation of its
 * site since its own) joins its set. A free of any other address is not a pair. */
static int on_free(struct an_reuse_find *f, const struct an_reuse_call *c)
{
	struct live *b = oatab_get(&f->live, c->addr, (uint64_t)c->tid + 1);
	const struct site_seq *q;
	struct set_ent *e;
	uint64_t h;

	if (!b || !b->live)
		return 0;
	b->live = false;
	q = oatab_get(&f->seq, (uint64_t)b->stack, (uint64_t)c->tid + 1);
	if (!q || q->n != b->site_seq || !b->bytes)
		return 0;
	h = ffm_fnv1a(FFM_FNV1A_INIT, &b->stack, sizeof(b->stack));
	h = ffm_fnv1a(h, &c->stack, sizeof(c->stack));
	h = ffm_fnv1a(h, &b->bytes, sizeof(b->bytes));
	e = oatab_find(&f->sets, h, (uint64_t)c->tid + 1, true);
	if (!e)
		return -ENOMEM;
	if (!e->s.pairs)
		e->s = (struct an_reuse_set){ .tid = c->tid, .alloc_stack = b->stack,
					      .free_stack = c->stack, .bytes = b->bytes,
					      .alloc_api = b->api, .first_alloc_ns = b->alloc_ns,
					      .first_free_ns = c->own_ns };
	e->s.pairs++;
	e->s.alloc_ns += b->alloc_ns;
	e->s.free_ns += c->own_ns;
	e->s.fills += b->fills;
	e->s.fill_ns += b->fill_ns;
	e->s.fill_bytes += b->fill_bytes;
	return 0;
}

int an_reuse_find_call(struct an_reuse_find *f, const struct an_reuse_call *c)
{
	if (!c->addr)
		return 0; /* a failed allocation, a free of NULL */
	switch (c->kind) {
	case FFM_CALL_ALLOC: return on_alloc(f, c);
	case FFM_CALL_MEMSET: on_fill(f, c); return 0;
	case FFM_CALL_FREE: return on_free(f, c);
	default: return 0;
	}
}

const struct an_reuse_set *an_reuse_find_next(const struct an_reuse_find *f, size_t *i)
{
	for (; *i < f->sets.cap; ++*i) {
		const struct set_ent *e = oatab_slot(&f->sets, *i);

		if (e && e->s.pairs >= AN_REUSE_MIN_PAIRS) {
			++*i;
			return &e->s;
		}
	}
	return NULL;
}

/*
 * The buffer that stays is the first one: its allocation is often the slow one (the driver
 * maps and populates new memory; later ones reuse what the earlier frees left), so the calls
 * the fix deletes are priced at the mean of the others, which rule (c) multiplies by their
 * count: their own times exactly.
 */
static double mean_but_first(uint64_t sum, uint64_t first, uint64_t n)
{
	return n > 1 && sum >= first ? (double)(sum - first) / (double)(n - 1) : 0;
}

int an_reuse_price(const struct an_reuse_set *s, bool managed, struct ffm_price *p)
{
	struct ffm_price_call c[3] = {
		{ .kind = FFM_PRICE_ALLOC, .calls = s->pairs, .bytes = s->bytes,
		  .call_ns = mean_but_first(s->alloc_ns, s->first_alloc_ns, s->pairs) },
		{ .kind = FFM_PRICE_FREE, .calls = s->pairs, .bytes = s->bytes,
		  .call_ns = mean_but_first(s->free_ns, s->first_free_ns, s->pairs) },
		/* any other kind than managed: a memset of device memory (ffm_price.h) */
		{ .kind = FFM_PRICE_MEMSET, .mem = managed ? FFM_MEM_MANAGED : FFM_MEM_PAGEABLE,
		  .calls = s->fills, .call_ns = s->fills ? (double)s->fill_ns / (double)s->fills : 0,
		  .bytes = s->fills ? s->fill_bytes / s->fills : 0 },
	};

	/* The calls' recorded times price every part: the node model would add a managed
	 * fill's migration and faults only where the host touches the buffer, which the pass
	 * does not know (docs/ACCURACY.md, "Pricing a fix"). */
	return ffm_price__reuse(NULL, c, s->fills && c[2].bytes ? 3 : 2, p);
}

/* ---- the pass ------------------------------------------------------------------------------ */

/* What the pass gathers per (allocation stack, tid + 1): the saving of its sets, and how many
 * of the timeline's model events it has to share it. */
struct site_save {
	struct oa_key k;
	double saved_ns;
	uint64_t events;
};

struct scan {
	const struct an_reuse_in *in;
	struct an_reuse_find f;
};

/* The site of @stack; NULL for none. */
static const struct ffm_an_site *site_of(const struct an_reuse_in *in, int64_t stack)
{
	uint32_t i = stack ? oatab_get_u32(in->site_of, (uint64_t)stack) : UINT32_MAX;

	return i == UINT32_MAX ? NULL : &in->sites[i];
}

/* Calls a reused buffer deletes: stream-ordered allocations and frees (cuMemAllocAsync,
 * cuMemFreeAsync: a pool's, cheap by design) and registrations of host memory are not. */
static bool reusable(const struct ffm_an_site *x)
{
	return x && !strstr(x->api_name, "Async") && !strstr(x->api_name, "Register");
}

static int on_store_event(const struct ffm_store_event *ev, void *ctx)
{
	struct scan *sc = ctx;
	struct an_reuse_call c = { .tid = ev->tid, .stack = ev->stack, .addr = ev->dst,
				   .bytes = ev->bytes, .own_ns = an_own_ns(ev->dur_ns, ev->wait_ns),
				   .api = ev->api };

	if (!reusable(site_of(sc->in, ev->stack)))
		return 0;
	c.kind = ev->kind == FFM_EV_ALLOC ? FFM_CALL_ALLOC :
		 ev->kind == FFM_EV_FREE ? FFM_CALL_FREE : FFM_CALL_MEMSET;
	return an_reuse_find_call(&sc->f, &c);
}

/* Whether the run has an allocation site that ran twice or more: only then can a set repeat. */
static bool any_repeated_alloc(const struct an_reuse_in *in)
{
	for (size_t i = 0; i < in->n_sites; i++)
		if (in->sites[i].kind == FFM_EV_ALLOC && in->sites[i].count >= AN_REUSE_MIN_PAIRS)
			return true;
	return false;
}

/* Each set priced (rule (c)) into @save by its allocation site and thread. */
static int price_sets(const struct an_reuse_in *in, const struct an_reuse_find *f,
		      struct oatab *save, struct ffm_an_quality *q)
{
	const struct an_reuse_set *s;
	size_t it = 0;

	while ((s = an_reuse_find_next(f, &it))) {
		const struct ffm_an_site *x = site_of(in, s->alloc_stack);
		struct site_save *v;
		struct ffm_price p;

		if (an_reuse_price(s, x && strstr(x->api_name, "Managed"), &p)) {
			q->unpriced_calls += s->pairs;
			continue;
		}
		v = oatab_find(save, (uint64_t)s->alloc_stack, (uint64_t)s->tid + 1, true);
		if (!v)
			return -ENOMEM;
		v->saved_ns += p.saved_ns;
	}
	return 0;
}

/* The saving of @save to the allocations of the timeline's model events, shared evenly. */
static int mark_allocs(struct oatab *save, struct an_timeline *tl, struct ffm_an_quality *q)
{
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < tl->n_ev; i++) {
			struct ffm_event *e = &tl->ev[i];
			struct site_save *v;
			double d;

			if (e->kind != FFM_CALL_ALLOC || e->problem != FFM_PROBLEM_NONE)
				continue;
			v = oatab_find(save, e->stack_id, (uint64_t)e->tid + 1, false);
			if (!v || v->saved_ns <= 0)
				continue;
			if (!pass) {
				v->events++;
				continue;
			}
			d = v->saved_ns / (double)v->events;
			if (d >= UINT32_MAX - 1.0)
				d = UINT32_MAX - 1.0;
			if (d < 1)
				continue;
			if (oatab_put_u32(&tl->deleted, i, (uint32_t)d))
				return -ENOMEM;
			e->problem = FFM_PROBLEM_TEMP_BUFFER;
			q->priced_calls++;
			q->priced_deleted_ns += (uint64_t)d;
		}
	}
	return 0;
}

int an_reuse(const struct an_reuse_in *in, struct an_timeline *tl, struct ffm_an_quality *q)
{
	struct scan sc = { .in = in };
	struct oatab save = OATAB_INIT(struct site_save);
	int err;

	if (!any_repeated_alloc(in))
		return 0;
	an_reuse_find_init(&sc.f);
	err = ffm_store__for_each_event_of(in->s, in->run,
					   1u << FFM_EV_ALLOC | 1u << FFM_EV_FREE |
						   1u << FFM_EV_MEMSET,
					   on_store_event, &sc);
	if (!err)
		err = price_sets(in, &sc.f, &save, q);
	if (!err)
		err = mark_allocs(&save, tl, q);
	an_reuse_find_fini(&sc.f);
	oatab_free(&save);
	return err < 0 ? err : 0;
}
