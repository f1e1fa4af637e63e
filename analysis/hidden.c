/* SPDX-License-Identifier: MIT */
/*
 * Waits that stage 2's probes hid. Every probed call of stage 2 costs the CPU a few
 * microseconds (docs/OVERHEAD.md: 2-4 us a call on the H100). Where the GPU is the bottleneck,
 * the CPU reaches its next sync that much later and waits that much less: a PyTorch step of 40
 * launches shortens its .item() wait by about 100 us, which is time the fix recovers and the
 * timeline no longer shows. Stage 1 probes only the wait function: its waits are the
 * program's own. A site whose mean wait per occurrence in the baseline run (stage 1) is longer
 * than in the timeline run (stage 2), with about as many occurrences in both (the same work),
 * has the difference per occurrence as hidden wait; removing one of its syncs takes it along
 * (analysis/events.c removed_cpu). It is never negative: a site where stage 2 waited longer
 * keeps its measured waits.
 *
 * Sites are matched by their key (the frames outside the driver, and the public function a
 * stage-1 wait is attributed to), which both runs share.
 */
#include <errno.h>

#include "analysis/analysis_int.h"

/* Occurrence counts of the two runs may differ by this much (sampling, a slower start). */
#define COUNT_TOLERANCE 0.10

struct per_key {
	uint64_t n1, wait1, n2, wait2;
};

struct hidden_scan {
	struct ffm_analysis *a;
	struct oatab of; /* site key -> index in k[] */
	struct per_key *k;
	size_t n, cap;
};

static struct per_key *key_slot(struct hidden_scan *h, uint64_t key, bool insert)
{
	uint32_t i = oatab_get_u32(&h->of, key);

	if (i != UINT32_MAX || !insert)
		return i == UINT32_MAX ? NULL : &h->k[i];
	if (ffm_grow((void **)&h->k, &h->cap, h->n + 1, sizeof(*h->k)) ||
	    oatab_put_u32(&h->of, key, (uint32_t)h->n))
		return NULL;
	h->k[h->n] = (struct per_key){ 0 };
	return &h->k[h->n++];
}

static int on_base(const struct ffm_store_stack_agg *g, void *ctx)
{
	struct hidden_scan *h = ctx;
	struct per_key *p;
	uint64_t key;
	int err;

	if (g->kind != FFM_EV_WAIT || !g->count)
		return 0;
	err = an_site_key(h->a, g->stack, g->api, &key);
	if (err)
		return err;
	p = key_slot(h, key, false); /* only keys the timeline has */
	if (p) {
		p->n1 += g->count;
		p->wait1 += g->wait_ns;
	}
	return 0;
}

static uint64_t hidden_of(const struct per_key *p)
{
	double m1, m2;

	if (!p || !p->n1 || !p->n2 || p->n1 < (1 - COUNT_TOLERANCE) * (double)p->n2 ||
	    p->n1 > (1 + COUNT_TOLERANCE) * (double)p->n2)
		return 0;
	m1 = (double)p->wait1 / (double)p->n1;
	m2 = (double)p->wait2 / (double)p->n2;
	return m1 > m2 ? (uint64_t)(m1 - m2) : 0;
}

int an_hidden_waits(struct ffm_analysis *a)
{
	struct ffm_analysis_result *res = &a->res;
	struct hidden_scan h = { .a = a, .of = OATAB_U32_INIT };
	int err = 0;

	if (!res->run_baseline || !res->run_timeline)
		return 0;
	for (size_t i = 0; i < res->n_sites && !err; i++) {
		const struct ffm_an_site *x = &res->sites[i];
		struct per_key *p;

		if (!x->in_timeline || !x->wait_ns)
			continue;
		p = key_slot(&h, x->key, true);
		if (!p) {
			err = -ENOMEM;
			break;
		}
		p->n2 += x->count;
		p->wait2 += x->wait_ns;
	}
	if (!err && h.n)
		err = ffm_store__for_each_stack_agg(a->s, res->run_baseline, on_base, &h);
	for (size_t i = 0; i < res->n_sites && !err; i++) {
		uint64_t d = hidden_of(key_slot(&h, res->sites[i].key, false));

		a->si[i].hidden_ns = d;
		res->q.hidden_wait_ns += d * res->sites[i].count;
	}
	free(h.k);
	oatab_free(&h.of);
	return err > 0 ? -EIO : err;
}
