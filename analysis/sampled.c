// SPDX-License-Identifier: MIT
/*
 * Sampled stage-1 runs (adaptive stage 1, stages/ffm_sampling.h): the profile run's per-site
 * wait counts and times, as stack_stats holds them (every wait recorded), are turned into
 * estimates of the whole run. For each span of a process that was traced by windows only, a
 * site's waits that began in the span are replaced by the ratio estimate from the span's
 * windows (ffm_sampling__estimate, at least what was recorded in the span), and the site gets
 * the estimate's standard error (spans add up in variance) and its `sampled` mark. Waits
 * outside every span were traced in full and stay as they are.
 * In: the store's sample rows of the run, the stack -> site map. Out: the sites' counts, waits,
 * standard errors and marks; res.sampled.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/analysis_int.h"
#include "stages/ffm_sampling.h"

struct srows {
	struct ffm_store_sample *r;
	size_t n, cap;
	int *span; /* per row: index of the span row it lies in (spans: their own), -1: none */
};

/* One (span, stack): its waits in each of the span's windows and in the whole span. */
struct sent {
	struct oa_key k; /* (span row + 1, stack) */
	double *x_n, *x_w; /* per window of the span, in the span's window order */
	double span_n, span_w;
};

struct sctx {
	struct srows rows;
	struct oatab ent; /* struct sent */
	int *win_idx;     /* per row: its index among its span's windows */
	int *nwin;        /* per span row: its windows */
};

static int on_row(const struct ffm_store_sample *x, void *ctx)
{
	struct srows *r = ctx;

	if (FFM_GROW(r->r, r->cap, r->n + 1))
		return -ENOMEM;
	r->r[r->n++] = *x;
	return 0;
}

static int span_of(const struct srows *r, size_t i)
{
	const struct ffm_store_sample *w = &r->r[i];

	if (w->kind == FFM_SAMPLE_SPAN)
		return (int)i;
	for (size_t k = 0; k < r->n; k++)
		if (r->r[k].kind == FFM_SAMPLE_SPAN && r->r[k].tgid == w->tgid &&
		    r->r[k].start_ns <= w->start_ns && w->start_ns < r->r[k].end_ns + 1)
			return (int)k;
	return -1;
}

static int index_rows(struct sctx *c)
{
	struct srows *r = &c->rows;

	r->span = calloc(r->n, sizeof(int));
	c->win_idx = calloc(r->n, sizeof(int));
	c->nwin = calloc(r->n, sizeof(int));
	if (!r->span || !c->win_idx || !c->nwin)
		return -ENOMEM;
	for (size_t i = 0; i < r->n; i++) {
		r->span[i] = span_of(r, i);
		if (r->r[i].kind == FFM_SAMPLE_WINDOW && r->span[i] >= 0)
			c->win_idx[i] = c->nwin[r->span[i]]++;
	}
	return 0;
}

/* The row (tgid, kind, start_ns) of @g: rows come sorted by those three. */
static size_t row_of(const struct srows *r, const struct ffm_store_sample_agg *g)
{
	size_t lo = 0, hi = r->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct ffm_store_sample *x = &r->r[mid];
		int c = x->tgid != g->tgid ? (x->tgid < g->tgid ? -1 : 1) :
			x->kind != g->kind ? (x->kind < g->kind ? -1 : 1) :
			x->start_ns != g->start_ns ? (x->start_ns < g->start_ns ? -1 : 1) : 0;

		if (!c)
			return mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return r->n;
}

static int on_agg(const struct ffm_store_sample_agg *g, void *ctx)
{
	struct sctx *c = ctx;
	size_t i = row_of(&c->rows, g);
	struct sent *e;
	int sp;

	if (i == c->rows.n || (sp = c->rows.span[i]) < 0 || !c->nwin[sp])
		return 0;
	e = oatab_find(&c->ent, (uint64_t)sp + 1, (uint64_t)g->stack, true);
	if (!e)
		return -ENOMEM;
	if (!e->x_n) {
		e->x_n = calloc((size_t)c->nwin[sp], sizeof(double));
		e->x_w = calloc((size_t)c->nwin[sp], sizeof(double));
		if (!e->x_n || !e->x_w)
			return -ENOMEM;
	}
	if (g->kind == FFM_SAMPLE_SPAN) {
		e->span_n += (double)g->count;
		e->span_w += (double)g->wait_ns;
	} else {
		e->x_n[c->win_idx[i]] += (double)g->count;
		e->x_w[c->win_idx[i]] += (double)g->wait_ns;
	}
	return 0;
}

/* Replace one (span, stack)'s recorded waits in its site by the span's estimate. */
static int apply_one(const struct oatab *site_of, struct ffm_an_site *sites, struct sctx *c,
		     const struct sent *e, double *len)
{
	size_t sp = (size_t)e->k.a - 1, nw = 0;
	const struct ffm_store_sample *s = &c->rows.r[sp];
	uint32_t si = oatab_get_u32(site_of, e->k.b);
	double xn = 0, en, sen, ew, sew;
	struct ffm_an_site *x;

	if (si == UINT32_MAX)
		return 0; /* no wait of the site in stack_stats: nothing to scale */
	for (size_t i = 0; i < c->rows.n; i++)
		if (c->rows.span[i] == (int)sp && c->rows.r[i].kind == FFM_SAMPLE_WINDOW)
			len[nw++] = (double)(c->rows.r[i].end_ns - c->rows.r[i].start_ns);
	for (size_t i = 0; i < nw; i++)
		xn += e->x_n[i];
	if (ffm_sampling__estimate(e->x_n, len, nw, (double)(s->end_ns - s->start_ns), xn, &en, &sen) ||
	    ffm_sampling__estimate(e->x_w, len, nw, (double)(s->end_ns - s->start_ns), xn, &ew, &sew))
		return 0; /* no window time: the recorded waits stand */
	x = &sites[si];
	/* Never less than what was recorded in the span. */
	en = en < e->span_n ? e->span_n : en;
	ew = ew < e->span_w ? e->span_w : ew;
	x->count = (uint64_t)llround((double)x->count - e->span_n + en);
	x->wait_ns = (uint64_t)llround((double)x->wait_ns - e->span_w + ew);
	/* a wait's duration is its wait */
	x->dur_ns = (uint64_t)llround((double)x->dur_ns - e->span_w + ew);
	x->count_se = sqrt(x->count_se * x->count_se + sen * sen);
	x->wait_se_ns = sqrt(x->wait_se_ns * x->wait_se_ns + sew * sew);
	x->sampled = true;
	return 0;
}

int an_apply_samples(struct ffm_store *s, int64_t run, const struct oatab *site_of,
		     struct ffm_an_site *sites, bool *sampled)
{
	struct sctx c = { .ent = OATAB_INIT(struct sent) };
	double *len = NULL;
	int err;

	err = ffm_store__for_each_sample(s, run, on_row, &c.rows);
	if (err || !c.rows.n)
		goto out;
	err = index_rows(&c);
	if (!err)
		err = ffm_store__for_each_sample_agg(s, run, on_agg, &c);
	if (!err && !(len = calloc(c.rows.n, sizeof(double))))
		err = -ENOMEM;
	for (size_t i = 0; !err && i < c.ent.cap; i++) {
		const struct sent *e = oatab_slot(&c.ent, i);

		if (e)
			err = apply_one(site_of, sites, &c, e, len);
	}
	if (!err)
		*sampled = true;
out:
	for (size_t i = 0; i < c.ent.cap; i++) {
		struct sent *e = oatab_slot(&c.ent, i);

		if (e) {
			free(e->x_n);
			free(e->x_w);
		}
	}
	oatab_free(&c.ent);
	free(len);
	free(c.rows.r);
	free(c.rows.span);
	free(c.win_idx);
	free(c.nwin);
	return err;
}
