/* SPDX-License-Identifier: MIT */
/*
 * Pass "price the fix's work" (analysis/analysis.c runs the passes; after the verdicts, before
 * the graph): per problem event, the work its fix deletes outright, whichever side bounds the
 * run, priced with the node model of the run's driver (stored with the driver: store v12) by
 * the rules of stages/ffm_price.h. The graph takes it (ffm_graph_opts.deleted_of), and the
 * model saves min(idle + deleted, wait + removed) for that event.
 *
 * Rules applied today:
 * (d) a misplaced sync moved to its first use: the shorter wait also returns sooner after the
 * GPU is done, by the exit latency of the thread's schedule mode at the two lengths (the
 * thread slept in most of its long waits: blocking, else spin; store v12 threads.waits_slept).
 * (b) an async copy that waited (its host memory is pageable; the fix is a
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

bool an_load_node_model(struct ffm_store *s, int64_t run, struct ffm_node_model *nm)
{
	char *txt = NULL;
	json_t *j;
	bool ok;

	if (ffm_store__run_node_model(s, run, &txt))
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

/* The threads of the timeline run that slept in most of their long waits (blocking-sync). */
static int note_blocking(uint32_t tgid, uint32_t tid, uint64_t waits, uint64_t slept, void *ctx)
{
	(void)tgid;
	if (slept * 2 < waits)
		return 0;
	return oatab_put_u32(ctx, tid, 1) ? -ENOMEM : 0;
}

/* The exit latency a misplaced wait of @e saves once moved to its first use (rule (d)). */
static int64_t exit_of(const struct ffm_node_model *nm, const struct oatab *blocking,
		       const struct ffm_event *e)
{
	struct ffm_price_wait w = {
		.calls = 1, .wait_ns = (double)e->wait_ns, .moved_ns = (double)e->first_use_ns,
		.mode = oatab_get_u32(blocking, e->tid) == 1 ? FFM_SCHED_BLOCKING : FFM_SCHED_SPIN,
	};
	struct ffm_price p;

	if (!nm)
		return -ENODATA;
	if (ffm_price__move_wait(nm, &w, &p))
		return -ENODATA;
	return p.exit_ns > 0 ? (int64_t)p.exit_ns : 0;
}

/* The work event @e's fix deletes (see the top), 0: none; -ENODATA: a rule lacked a figure. */
static int64_t price_event(const struct an_price_in *in, const struct ffm_node_model *nm,
			   const struct oatab *blocking, const struct ffm_event *e)
{
	uint32_t si;

	if (e->problem == FFM_PROBLEM_MISPLACED_SYNC)
		return exit_of(nm, blocking, e);
	if (e->problem != FFM_PROBLEM_UNNECESSARY_SYNC || e->kind != FFM_CALL_TRANSFER)
		return 0;
	si = oatab_get_u32(in->site_of, e->stack_id);
	if (si == UINT32_MAX || !in->si[si].async_copy)
		return 0;
	return staging_of(nm, &in->sites[si], e);
}

int an_price(const struct an_price_in *in, struct oatab *deleted, struct ffm_an_quality *q)
{
	struct ffm_node_model nm;
	bool have = an_load_node_model(in->s, in->run, &nm);
	struct oatab blocking = OATAB_U32_INIT;
	int err;

	q->node_model = have;
	err = ffm_store__for_each_thread_waits(in->s, in->run, note_blocking, &blocking);
	for (size_t i = 0; !err && i < in->tl->n_ev; i++) {
		int64_t d = price_event(in, have ? &nm : NULL, &blocking, &in->tl->ev[i]);

		if (d == -ENODATA) {
			q->unpriced_calls++;
			continue;
		}
		if (d <= 0)
			continue;
		if (d >= UINT32_MAX)
			d = UINT32_MAX - 1;
		if (oatab_put_u32(deleted, i, (uint32_t)d)) {
			err = -ENOMEM;
			break;
		}
		q->priced_calls++;
		q->priced_deleted_ns += (uint64_t)d;
	}
	oatab_free(&blocking);
	return err < 0 ? err : 0;
}
