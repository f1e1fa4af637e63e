/* SPDX-License-Identifier: MIT */
/*
 * Pass "a managed memset's fix" (analysis/analysis.c runs it after price.c and reuse.c): a
 * memset of managed memory that waits (the driver's memsets of managed memory are synchronous),
 * whose pages the host touches after it, every time. Stage 4 counts, per call site, its device
 * operations on managed memory and the host's page faults in managed memory that followed them
 * (store v13, managed_faults; daemon/memtrace.c). The fix (a host memset, or device memory)
 * deletes the whole call: its wait, the migration of the pages to the GPU and the host's faults
 * that bring them back. It is priced by rule (a) of stages/ffm_price.h (ffm_price__delete): the
 * call's own time, the migration to the GPU of the pages the host brought back (its faults
 * times the pages the driver brings back per fault, as the node model counted them: about 20
 * on the H200, whose stage 4 counted 25 faults for the 512 pages of a 2 MiB buffer; at most
 * the buffer) from the node model, and those pages at the model's cost of a page moved to
 * the host.
 *
 * What the model (stages/model.c) gets, per occurrence, so that nothing is counted twice:
 *  - where its thread had other GPU work in flight (a kernel before it), its wait stays the
 *    model's: the CPU work after it overlaps that work once the call is gone, at most the
 *    wait; deleted (tl.deleted): its own time and the migration (modeled), gone whichever
 *    side bounds;
 *  - where nothing else of its thread was in flight, its wait was its own GPU work (the
 *    migration and the set): deleted is the whole call, as recorded;
 *  - the faults are CPU time in the stretch after the call, which the model already counts as
 *    work that overlaps: they join the event's removed_ns (CPU time the fix deletes with the
 *    wait), which raises the cap (wait + removed) by them; where they cannot lie in that
 *    stretch (the thread's next call comes sooner: a sync before the host reads), they are
 *    deleted work too (cpu_after).
 * An occurrence whose verdict said the wait was required or misplaced (the host uses what the
 * memset wrote) becomes an unnecessary sync: with the host writing the pages, nothing waits.
 * Without a node model the call is priced by its recorded own time only (data quality
 * `unpriced_calls`). Without a stage-4 count nothing changes: the wait is priced as before.
 */
#include <errno.h>
#include <jansson.h>

#include "analysis/analysis_int.h"
#include "stages/ffm_price.h"

bool an_managed_rule(const struct an_managed_site *x, const struct ffm_event *e, bool alone,
		     const struct ffm_node_model *nm, struct ffm_price_call *out)
{
	uint64_t page_size = nm ? nm->page_size : 0, bytes, pages;

	if (x->kind != FFM_EV_MEMSET || !x->calls || !x->bytes || !x->ops || !x->faults)
		return false;
	if (!(e->flags & FFM_EVENT_SYNC) || !e->wait_ns || (e->flags & FFM_EVENT_SPLIT))
		return false;
	if (e->problem != FFM_PROBLEM_NONE && e->problem != FFM_PROBLEM_UNNECESSARY_SYNC &&
	    e->problem != FFM_PROBLEM_MISPLACED_SYNC)
		return false;
	bytes = (x->bytes + x->calls / 2) / x->calls;
	pages = (x->faults + x->ops / 2) / x->ops; /* faults per call */
	if (page_size) {
		/* the pages those faults brought back (the driver's read-ahead), at most the
		 * buffer: what migrates to the GPU at the next call (a host that reads one page
		 * of it leaves the rest on the GPU) */
		uint64_t buf = (bytes + page_size - 1) / page_size;

		if (nm->host_pages_per_fault > 1)
			pages = (uint64_t)((double)pages * nm->host_pages_per_fault + 0.5);
		if (pages >= buf)
			pages = buf;
		else if (pages)
			bytes = pages * page_size;
	}
	*out = (struct ffm_price_call){
		.kind = FFM_PRICE_MEMSET, .mem = FFM_MEM_MANAGED, .calls = 1,
		.bytes = bytes ? bytes : 1,
		/* alone: the whole call, its wait included, is its own work; else its own time
		 * outside the wait, the wait being the model's (see the top) */
		.call_ns = (double)(alone ? e->dur_ns : an_own_ns(e->dur_ns, e->wait_ns)),
		.wait_ns = alone ? (double)e->wait_ns : 0,
		/* the faults followed this site's operations: the host touched the pages last
		 * when the site sets them again, and touches them after */
		.host_touched_before = pages > 0, .host_touches_after = true,
		.host_faults = (int64_t)pages,
	};
	return true;
}

/* What one occurrence's fix deletes (deleted, into the model) and the faults it removes. */
static int price_one(const struct ffm_node_model *nm, const struct ffm_price_call *c,
		     uint64_t *deleted, uint64_t *removed)
{
	struct ffm_price p;

	if (!nm || ffm_price__delete(nm, c, &p)) {
		*deleted = c->call_ns > 0 ? (uint64_t)c->call_ns : 0;
		*removed = 0;
		return -ENODATA;
	}
	*deleted = (uint64_t)(p.own_ns + p.migrate_ns);
	*removed = (uint64_t)p.fault_ns;
	return 0;
}

struct faults_ctx {
	struct oatab *of; /* stack -> index in rows */
	struct an_managed_site *rows;
	size_t n, cap;
};

static int note_faults(int64_t stack, uint64_t ops, uint64_t faults, void *arg)
{
	struct faults_ctx *c = arg;

	if (!ops || !faults)
		return 0;
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 16;
		struct an_managed_site *r = realloc(c->rows, cap * sizeof(*r));

		if (!r)
			return -ENOMEM;
		c->rows = r;
		c->cap = cap;
	}
	c->rows[c->n] = (struct an_managed_site){ .ops = ops, .faults = faults };
	return oatab_put_u32(c->of, (uint64_t)stack, (uint32_t)c->n++) ? -ENOMEM : 0;
}

/*
 * The CPU time from event @i's end to its thread's next call: where the host's faults lie when
 * they fit there. When they do not (a sync between the set and the host's reads, as before a
 * stream's results are read), they lie after a later call, out of the stretch the model lets
 * the removed wait overlap, and go into the deleted work instead, which the model counts
 * wherever it lies (at most the wait and the removed time, as before): the simulated
 * managed_host with a sync before its read was priced at 43% of its saving without this.
 */
static uint64_t cpu_after(const struct an_timeline *tl, size_t i)
{
	const struct ffm_event *e = &tl->ev[i];
	uint64_t end = e->start_ns + e->dur_ns;

	for (size_t j = i + 1; j < tl->n_ev; j++)
		if (tl->ev[j].tid == e->tid)
			return tl->ev[j].start_ns > end ? tl->ev[j].start_ns - end : 0;
	return UINT64_MAX; /* its last call: what follows is its own */
}

/* Apply the rule to event @i of the timeline (its site's stage-4 row @r); @alone: nothing else
 * of its thread was in flight on the GPU when it was called. */
static int apply_one(const struct an_managed_in *in, const struct ffm_node_model *nm,
		     struct an_managed_site *r, size_t i, bool alone, struct ffm_an_quality *q)
{
	struct ffm_event *e = &in->tl->ev[i];
	uint32_t si = oatab_get_u32(in->site_of, e->stack_id);
	struct ffm_price_call c;
	uint64_t del, rem;
	int err;

	if (si == UINT32_MAX)
		return 0;
	r->kind = in->sites[si].kind;
	r->calls = in->sites[si].count;
	r->bytes = in->sites[si].bytes;
	if (!an_managed_rule(r, e, alone, nm, &c))
		return 0;
	in->sites[si].managed_fix = true;
	err = price_one(nm, &c, &del, &rem);
	if (err)
		q->unpriced_calls++;
	else
		q->priced_calls++;
	q->priced_deleted_ns += del + rem;
	if (e->problem != FFM_PROBLEM_UNNECESSARY_SYNC) {
		/* first_use_ns shares its word with gpu_idle_ns: not known for this one */
		e->problem = FFM_PROBLEM_UNNECESSARY_SYNC;
		e->first_use_ns = 0;
		e->flags &= (uint8_t)~FFM_EVENT_GPU_IDLE;
	}
	e->removed_ns += rem;
	if (rem > cpu_after(in->tl, i))
		del += rem;
	if (del >= UINT32_MAX)
		del = UINT32_MAX - 1;
	return oatab_put_u32(in->deleted, i, (uint32_t)del) ? -ENOMEM : 0;
}

/* Whether event @e finds its thread's GPU work done (@busy: tid -> 1 while the thread has
 * submitted since its last sync), and the thread's state after @e. */
static int note_alone(struct oatab *busy, const struct ffm_event *e, bool *alone)
{
	bool submits = e->kind == FFM_CALL_LAUNCH || e->kind == FFM_CALL_TRANSFER ||
		       e->kind == FFM_CALL_MEMSET;

	*alone = oatab_get_u32(busy, e->tid) != 1;
	if (e->flags & FFM_EVENT_SYNC)
		return oatab_put_u32(busy, e->tid, 0) ? -ENOMEM : 0;
	if (submits)
		return oatab_put_u32(busy, e->tid, 1) ? -ENOMEM : 0;
	return 0;
}

int an_managed(const struct an_managed_in *in, struct ffm_an_quality *q)
{
	struct oatab of = OATAB_U32_INIT, busy = OATAB_U32_INIT;
	struct faults_ctx c = { .of = &of };
	struct ffm_node_model nm;
	bool have = false;
	int err = 0;

	if (in->run_faults)
		err = ffm_store__for_each_managed_faults(in->s, in->run_faults, note_faults, &c);
	if (!err && c.n)
		have = an_load_node_model(in->s, in->run, &nm);
	for (size_t i = 0; !err && c.n && i < in->tl->n_ev; i++) {
		uint32_t k = oatab_get_u32(&of, in->tl->ev[i].stack_id);
		bool alone;

		err = note_alone(&busy, &in->tl->ev[i], &alone);
		if (!err && k != UINT32_MAX)
			err = apply_one(in, have ? &nm : NULL, &c.rows[k], i, alone, q);
	}
	oatab_free(&busy);
	oatab_free(&of);
	free(c.rows);
	return err < 0 ? err : 0;
}
