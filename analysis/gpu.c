/* SPDX-License-Identifier: MIT */
/*
 * The GPU work of a run as far as the timeline shows it (ffm_an_gpu, analysis/ffm_analysis.h):
 * the model's view (stages/ffm_model.h) that work a call hands to the GPU is done, at the
 * latest, when a later wait of its process returns, turned into spans on one track per
 * (process, stream), for the chrome trace's GPU tracks and its flow arrows.
 *
 * Queued work: launches, and asynchronous copies and memsets (an API name with "Async"), are
 * pending on their (process, stream) from the call's start. A call that waited (wait_ns > 0, or
 * a stage-1 wait event) ends the pending work of its stream, or of every stream of its process
 * when it names none (context syncs, the default stream, stage-1 waits): at the end of its wait
 * (the call's end; for a copy or memset, its start + wait_ns: its own copy follows the wait).
 * One inferred span per batch, from its first call (or the previous span's end on the track,
 * whichever is later: one stream runs one thing at a time) to that end: an upper bound of where
 * the batch ran. Work no wait ended is bounded by its process's exit, or dropped when that is
 * unknown. Synchronous copies and memsets are measured: their span is the call's time after its
 * wait.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/ffm_analysis.h"
#include "common/oatab.h"
#include "common/util.h"
#include "symbols/ffm_stack.h"

struct pending {
	int64_t event;
	uint64_t start_ns;
	uint64_t kernel; /* a launch's kernel handle */
	uint32_t tid;
};

struct track {
	uint32_t tgid;
	uint64_t stream;
	uint64_t last_end; /* end of the last span on this track */
	struct pending *p;
	size_t n, cap;
};

struct ffm_an_gpu {
	ffm_an_gpu_span_cb on_span;
	ffm_an_gpu_flow_cb on_flow;
	void *ctx;
	struct track *t;
	size_t n, cap;
};

int ffm_an_gpu__new(ffm_an_gpu_span_cb on_span, ffm_an_gpu_flow_cb on_flow, void *ctx,
		    struct ffm_an_gpu **ret)
{
	struct ffm_an_gpu *g = calloc(1, sizeof(*g));

	if (!g)
		return -ENOMEM;
	*g = (struct ffm_an_gpu){ .on_span = on_span, .on_flow = on_flow, .ctx = ctx };
	*ret = g;
	return 0;
}

struct ffm_an_gpu *ffm_an_gpu__free(struct ffm_an_gpu *g)
{
	if (!g)
		return NULL;
	for (size_t i = 0; i < g->n; i++)
		free(g->t[i].p);
	free(g->t);
	free(g);
	return NULL;
}

/* The track of (tgid, stream), made on first use; its index, or -ENOMEM. */
static long track_of(struct ffm_an_gpu *g, uint32_t tgid, uint64_t stream)
{
	for (size_t i = 0; i < g->n; i++)
		if (g->t[i].tgid == tgid && g->t[i].stream == stream)
			return (long)i;
	if (FFM_GROW(g->t, g->cap, g->n + 1) < 0)
		return -ENOMEM;
	g->t[g->n] = (struct track){ .tgid = tgid, .stream = stream };
	return (long)g->n++;
}

static int emit(struct ffm_an_gpu *g, struct track *t, const struct ffm_an_gpu_span *sp)
{
	struct ffm_an_gpu_span s = *sp;

	s.tgid = t->tgid;
	s.stream = t->stream;
	s.start_ns = s.start_ns > t->last_end ? s.start_ns : t->last_end;
	if (s.end_ns < s.start_ns)
		s.end_ns = s.start_ns;
	t->last_end = s.end_ns;
	return g->on_span ? g->on_span(&s, g->ctx) : 0;
}

/* The pending batch of @t, ended at @end_ns by event @by (0: the process's exit). */
static int close_track(struct ffm_an_gpu *g, struct track *t, uint64_t end_ns,
		       const struct ffm_store_event *by)
{
	struct ffm_an_gpu_span s = {
		.start_ns = t->p[0].start_ns, .launched_ns = t->p[0].start_ns, .end_ns = end_ns,
		.calls = (uint32_t)t->n, .first_event = t->p[0].event, .ended_by = by ? by->id : 0,
		.inferred = true,
	};
	int err = 0;

	if (!t->n)
		return 0;
	for (size_t i = 0; i < t->n; i++) {
		if (!s.kernel)
			s.kernel = t->p[i].kernel;
		else if (t->p[i].kernel && t->p[i].kernel != s.kernel)
			s.other_kernels = true;
	}
	for (size_t i = 0; by && g->on_flow && !err && i < t->n; i++) {
		struct ffm_an_gpu_flow f = {
			.from_event = t->p[i].event, .from_ns = t->p[i].start_ns,
			.from_tid = t->p[i].tid, .tgid = t->tgid, .to_event = by->id,
			.to_ns = by->start_ns, .to_tid = by->tid,
		};

		err = g->on_flow(&f, g->ctx);
	}
	if (!err)
		err = emit(g, t, &s);
	t->n = 0;
	return err;
}

static bool queued_call(const struct ffm_store_event *ev, const char *api)
{
	if (ev->kind == FFM_EV_LAUNCH)
		return true;
	return (ev->kind == FFM_EV_TRANSFER || ev->kind == FFM_EV_MEMSET) && api &&
	       strstr(api, "Async");
}

static bool copy_call(const struct ffm_store_event *ev)
{
	return ev->kind == FFM_EV_TRANSFER || ev->kind == FFM_EV_MEMSET;
}

/* A call that waited: the pending work it ordered ends. */
static int on_wait(struct ffm_an_gpu *g, const struct ffm_store_event *ev)
{
	uint64_t end = copy_call(ev) ? ev->start_ns + ev->wait_ns : ev->start_ns + ev->dur_ns;
	int err = 0;

	for (size_t i = 0; i < g->n && !err; i++) {
		struct track *t = &g->t[i];

		if (t->tgid == ev->tgid && t->n && (!ev->stream || t->stream == ev->stream))
			err = close_track(g, t, end, ev);
	}
	return err;
}

int ffm_an_gpu__event(struct ffm_an_gpu *g, const struct ffm_store_event *ev, const char *api)
{
	struct track *t;
	long i;
	int err = 0;

	if (ev->kind == FFM_EV_WAIT || ev->wait_ns > 0)
		err = on_wait(g, ev);
	if (err || !(queued_call(ev, api) || copy_call(ev)))
		return err;
	i = track_of(g, ev->tgid, ev->stream);
	if (i < 0)
		return (int)i;
	t = &g->t[i];
	if (queued_call(ev, api)) {
		if (FFM_GROW(t->p, t->cap, t->n + 1) < 0)
			return -ENOMEM;
		t->p[t->n++] = (struct pending){ .event = ev->id, .start_ns = ev->start_ns,
						 .tid = ev->tid,
						 .kernel = ev->kind == FFM_EV_LAUNCH ? ev->src : 0 };
		return 0;
	}
	/* A synchronous copy or memset: measured, the call's time after its wait. */
	return emit(g, t, &(struct ffm_an_gpu_span){
		.start_ns = ev->start_ns + ev->wait_ns, .launched_ns = ev->start_ns,
		.end_ns = ev->start_ns + ev->dur_ns, .calls = 1, .first_event = ev->id,
		.ended_by = ev->id, .bytes = ev->bytes });
}

int ffm_an_gpu__process_end(struct ffm_an_gpu *g, uint32_t tgid, uint64_t end_ns)
{
	int err = 0;

	for (size_t i = 0; i < g->n && !err; i++)
		if (g->t[i].tgid == tgid && g->t[i].n && end_ns)
			err = close_track(g, &g->t[i], end_ns, NULL);
	return err;
}

void ffm_an_gpu__reset(struct ffm_an_gpu *g)
{
	for (size_t i = 0; i < g->n; i++)
		free(g->t[i].p);
	g->n = 0;
}

/* ---- kernel names ------------------------------------------------------------------------ */

struct kname {
	struct oa_key k; /* a: handle, b: tgid */
	char *name;
};

struct ffm_an_kernels {
	struct oatab t;
};

static int on_kernel(uint32_t tgid, uint64_t handle, const char *name, void *ctx)
{
	struct ffm_an_kernels *k = ctx;
	struct kname *e;
	char *dm;

	if (!name || !(e = oatab_find(&k->t, handle, tgid, true)))
		return name ? -ENOMEM : 0;
	free(e->name);
	dm = ffm_demangle(name); /* NULL: not a C++ name, or no demangler */
	e->name = dm ? dm : strdup(name);
	return e->name ? 0 : -ENOMEM;
}

int ffm_an_kernels__load(struct ffm_store *s, int64_t run, struct ffm_an_kernels **ret)
{
	struct ffm_an_kernels *k = calloc(1, sizeof(*k));
	int err;

	*ret = NULL;
	if (!k)
		return -ENOMEM;
	k->t = OATAB_INIT(struct kname);
	err = ffm_store__for_each_kernel(s, run, on_kernel, k);
	if (err) {
		ffm_an_kernels__free(k);
		return err < 0 ? err : -EIO;
	}
	*ret = k;
	return 0;
}

const char *ffm_an_kernels__name(const struct ffm_an_kernels *k, uint32_t tgid, uint64_t handle)
{
	const struct kname *e = k && handle ? oatab_get(&k->t, handle, tgid) : NULL;

	return e ? e->name : NULL;
}

struct ffm_an_kernels *ffm_an_kernels__free(struct ffm_an_kernels *k)
{
	if (!k)
		return NULL;
	for (size_t i = 0; i < k->t.cap; i++) {
		struct kname *e = oatab_slot(&k->t, i);

		if (e)
			free(e->name);
	}
	oatab_free(&k->t);
	free(k);
	return NULL;
}
