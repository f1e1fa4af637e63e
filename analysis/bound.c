/* SPDX-License-Identifier: MIT */
/*
 * Pass "bound" (analysis/analysis.c runs the passes): no benefit exceeds what the busiest
 * stream leaves of the wall time (docs/ACCURACY.md), and no process saves more than it lasted.
 * Reads the timeline's stream waits (freed here) and events; caps the result's benefits.
 */
#include "analysis/analysis_int.h"

static int cmp_busy(const void *x, const void *y)
{
	const struct busy *a = x, *b = y;

	if (a->stream != b->stream)
		return a->stream < b->stream ? -1 : 1;
	return a->start < b->start ? -1 : a->start > b->start;
}

/* What the fix of the event that waited through @b deletes of that wait (analysis/price.c: a
 * pageable copy's staging runs inside its wait, and a pinned buffer takes it off the stream). */
static uint64_t deleted_in(const struct an_timeline *tl, const struct busy *b)
{
	uint32_t v = oatab_get_u32(&tl->deleted, b->ev); /* a stream's first work: none */

	return v == UINT32_MAX ? 0 : v;
}

/* The union of tl->busy's intervals per stream, less the work fixes delete from them; the
 * largest one, with in *first the start of that stream's first interval and in *last its
 * latest-ending one. */
static uint64_t busiest_stream(struct an_timeline *tl, uint64_t *first, struct busy *last)
{
	uint64_t best = 0, sum = 0, cov_end = 0, start = 0;
	struct busy end = { 0 };

	*first = 0;
	*last = end;
	if (!tl->n_busy)
		return 0;
	qsort(tl->busy, tl->n_busy, sizeof(*tl->busy), cmp_busy);
	for (size_t i = 0; i <= tl->n_busy; i++) {
		const struct busy *b = i < tl->n_busy ? &tl->busy[i] : NULL;

		if (i && (!b || b->stream != tl->busy[i - 1].stream)) {
			if (sum > best) {
				best = sum;
				*first = start;
				*last = end;
			}
			sum = cov_end = 0;
		}
		if (!b)
			break;
		if (!i || b->stream != tl->busy[i - 1].stream)
			start = b->start; /* its first work (analysis/events.c), or first wait */
		if (b->end > cov_end) {
			uint64_t add = b->end - (b->start > cov_end ? b->start : cov_end);
			uint64_t del = deleted_in(tl, b);

			sum += add > del ? add - del : 0;
			cov_end = b->end;
			end = *b;
		}
	}
	return best;
}

/*
 * The part of the run before the busiest stream's first work that no fix can take away: the
 * time from the run's start to @first, less every wait that ended by then (a removed one could
 * bring that work forward; threads' waits are added up, which only makes this smaller) and
 * the calls a temporary buffer's reuse deletes by then (analysis/reuse.c: CPU time outside
 * any wait, which brings that work forward the same way).
 */
static uint64_t head_before(const struct an_timeline *tl, uint64_t first)
{
	uint64_t head, waits = 0;

	if (!first || first <= tl->run_start_ns || !tl->run_start_ns)
		return 0;
	head = first - tl->run_start_ns;
	for (size_t i = 0; i < tl->n_ev; i++) {
		const struct ffm_event *e = &tl->ev[i];

		if (e->start_ns + e->dur_ns > first)
			continue;
		waits += e->wait_ns;
		if (e->problem == FFM_PROBLEM_TEMP_BUFFER) {
			uint32_t d = oatab_get_u32(&tl->deleted, i);

			waits += d == UINT32_MAX ? 0 : d;
		}
	}
	return head > waits ? head - waits : 0;
}

/*
 * The part of the run after the busiest stream's last work that no fix can take away. When
 * that work ended with a wait that every fix keeps (@last: the thread goes on with the
 * stream's results), its thread's time from there to the run's end comes after the stream's
 * work in the fixed program too, less what a fix removes in it (its waits, the CPU time of
 * deleted calls). That holds while the thread's process is the run's last to end and no other
 * thread calls the driver after the wait. Mostly the process's exit: after threads sharing
 * the legacy stream read their results, the driver's teardown took 12.6 ms of a 1.07 s run on
 * the H100, most of what was left "recoverable" for a fix that saves nothing. Not seen: a
 * thread that computes without calling the driver after the wait and is joined at the exit,
 * whose work a fix of its earlier syncs could bring forward.
 */
static uint64_t tail_after(const struct an_timeline *tl, struct ffm_analysis_result *res,
			   const struct busy *last)
{
	const struct ffm_an_proc *p = an_proc_of(res, last->tgid);
	uint64_t tail, less = 0;

	if (!last->required || !p || p->end_ns < tl->run_end_ns || p->end_ns <= last->end)
		return 0;
	/* another thread's latest call, the launches the model leaves out included */
	if (tl->late.end[tl->late.tid[0] == last->tid] > last->end)
		return 0;
	tail = p->end_ns - last->end;
	for (size_t i = 0; i < tl->n_ev; i++) {
		const struct ffm_event *e = &tl->ev[i];

		if (e->start_ns + e->dur_ns > last->end)
			less += e->wait_ns + e->removed_ns;
	}
	return tail > less ? tail - less : 0;
}

static void cap_at(uint64_t *v, uint64_t cap, bool *capped)
{
	if (*v > cap) {
		*v = cap;
		*capped = true;
	}
}

/*
 * No fix on the CPU side makes a stream's work finish sooner: the run lasts at least as long as
 * its busiest stream was busy, plus the CPU work before that stream's first work and after its
 * last (head_before, tail_after), so no benefit exceeds wall - all three. The waits on a
 * stream bound its busy time from below (the stream's work ran while the CPU waited for it);
 * threads sharing the legacy stream whose kernels run one after the other leave that bound
 * near the wall time, and removing their syncs saves nothing (measured on the H100: 0.001 s
 * of 0.8 s). The head counts: there, 0.3 s of a 1.08 s profiled run set up CUDA and the
 * buffers before the first kernel, and the cap without it left 0.27 s "recoverable" (0.019 s
 * with it; 0.004 s with the tail).
 */
static void stream_cap(struct an_timeline *tl, struct ffm_analysis_result *res)
{
	struct ffm_an_quality *q = &res->q;
	uint64_t cap, first, floor;
	struct busy last;
	bool sums = false;

	q->stream_busy_ns = busiest_stream(tl, &first, &last);
	free(tl->busy);
	tl->busy = NULL;
	tl->n_busy = tl->cap_busy = 0;
	if (!q->stream_busy_ns)
		return;
	q->stream_head_ns = head_before(tl, first);
	q->stream_tail_ns = tail_after(tl, res, &last);
	floor = q->stream_busy_ns + q->stream_head_ns + q->stream_tail_ns;
	cap = res->wall_ns > floor ? res->wall_ns - floor : 0;
	/* "GPU-bound" (stream_capped) when the headline or a problem's own benefit was capped:
	 * a sum over threads or sites (a function's, a process's) may reach the cap alone. */
	cap_at(&res->totals.total_ns, cap, &q->stream_capped);
	for (size_t i = 0; i < res->n_sites; i++)
		cap_at(&res->sites[i].benefit_ns, cap, &q->stream_capped);
	for (size_t i = 0; i < res->n_groups; i++)
		cap_at(&res->groups[i].benefit_ns, cap, &sums);
	for (size_t i = 0; i < res->n_apis; i++)
		cap_at(&res->apis[i].benefit_ns, cap, &sums);
	for (size_t i = 0; i < res->n_procs; i++)
		cap_at(&res->procs[i].benefit_ns, cap, &sums);
}

void an_stream_bound(struct an_timeline *tl, struct ffm_analysis_result *res)
{
	stream_cap(tl, res);
	/* A process cannot save more than it lasted. */
	for (size_t i = 0; i < res->n_procs; i++) {
		struct ffm_an_proc *p = &res->procs[i];
		uint64_t span = p->end_ns > p->start_ns ? p->end_ns - p->start_ns : res->wall_ns;

		if (p->benefit_ns > span)
			p->benefit_ns = span;
	}
}
