/* SPDX-License-Identifier: MIT */
/*
 * Pass "price the fix's work" (analysis/analysis.c runs the passes; after the verdicts, before
 * the graph): per problem event, the work its fix deletes outright, whichever side bounds the
 * run, priced with the node model of the run's driver (stored with the driver: store v12) by
 * the rules of stages/ffm_price.h. The graph takes it (ffm_graph_opts.deleted_of), and the
 * model saves min(idle + deleted, wait + removed) for that event.
 *
 * Rule applied today: (b) an async copy that waited (its host memory is pageable; the fix is a
 * pinned buffer): the call's time holds the driver's staged copy; the fix leaves a copy at the
 * pinned speed to the GPU and deletes the staging (the model's pageable less pinned time at the
 * site's mean size, at most the call's time). Where the run's driver
 * has no node model, the copy is priced as before (its wait and its CPU time) and the report
 * counts it (data quality `unpriced_calls`).
 */
#include <errno.h>
#include <jansson.h>

#include "analysis/analysis_int.h"
#include "stages/ffm_price.h"

/* The node model stored with the timeline run's driver; false when there is none. */
static bool load_model(struct ffm_analysis *a, struct ffm_node_model *nm)
{
	char *txt = NULL;
	json_t *j;
	bool ok;

	if (ffm_store__run_node_model(a->s, a->res.run_timeline, &txt))
		return false;
	j = json_loads(txt, 0, NULL);
	free(txt);
	ok = j && !ffm_node_model__from_json(j, nm);
	json_decref(j);
	return ok;
}

/* The host side's direction of a copy site's driver function; -1: not a host copy. */
static int copy_dir(const char *api)
{
	if (strstr(api, "DtoH"))
		return FFM_COPY_D2H;
	if (strstr(api, "HtoD"))
		return FFM_COPY_H2D;
	return -1;
}

/* The staging one call of @e deletes (rule (b)), 0 when none; -ENODATA without a figure. */
static int64_t staging_of(const struct ffm_node_model *nm, const struct ffm_an_site *x,
			  const struct ffm_event *e)
{
	struct ffm_price_call c = {
		.kind = FFM_PRICE_COPY, .mem = FFM_MEM_PAGEABLE, .calls = 1,
		.bytes = x->count ? x->bytes / x->count : 0,
		.call_ns = (double)an_own_ns(e->dur_ns, e->wait_ns),
	};
	struct ffm_price p;
	int dir = copy_dir(x->api_name);

	if (dir < 0 || !c.bytes)
		return 0;
	c.dir = (enum ffm_copy_dir)dir;
	if (!nm)
		return -ENODATA;
	if (ffm_price__pin(nm, &c, &p))
		return -ENODATA;
	/* At most the call's whole time: where the driver waits for each staged chunk, the
	 * staging is inside the wait function too (the simulated driver's copy engine runs it
	 * there), so the wait/own split says nothing of it. */
	if (p.saved_ns > (double)e->dur_ns)
		p.saved_ns = (double)e->dur_ns;
	return p.saved_ns > 0 ? (int64_t)p.saved_ns : 0;
}

int an_price(struct ffm_analysis *a)
{
	struct ffm_node_model nm;
	bool have = load_model(a, &nm);
	struct ffm_an_quality *q = &a->res.q;

	q->node_model = have;
	for (size_t i = 0; i < a->tl.n_ev; i++) {
		const struct ffm_event *e = &a->tl.ev[i];
		uint32_t si;
		int64_t d;

		if (e->problem != FFM_PROBLEM_UNNECESSARY_SYNC || e->kind != FFM_CALL_TRANSFER)
			continue;
		si = oatab_get_u32(&a->site_of, e->stack_id);
		if (si == UINT32_MAX || !a->si[si].async_copy)
			continue;
		d = staging_of(have ? &nm : NULL, &a->res.sites[si], e);
		if (d == -ENODATA) {
			q->unpriced_calls++;
			continue;
		}
		if (d <= 0)
			continue;
		if (d >= UINT32_MAX)
			d = UINT32_MAX - 1;
		if (oatab_put_u32(&a->tl.deleted, i, (uint32_t)d))
			return -ENOMEM;
		q->priced_calls++;
		q->priced_deleted_ns += (uint64_t)d;
	}
	return 0;
}
