/* SPDX-License-Identifier: MIT */
/*
 * ffmctl export <jobid> --format chrome-trace|hatchet [--run ID] [--node NAME] [-o FILE]
 *
 * chrome-trace  The Trace Event Format (JSON object form) that Perfetto and chrome://tracing
 *               open: one complete event ("ph":"X") per recorded driver call or CPU wait, on
 *               its run's process track (pid = the run id, named "run N (stage S, job J)")
 *               and thread (tid, named with its process's pid); ts/dur in microseconds from
 *               the start of the job's first exported run; names as metadata ("ph":"M")
 *               events. GPU tracks (one per process and stream, tid >= GPU_TID_BASE) hold the
 *               GPU work the timeline implies (analysis/gpu.c): spans "inferred" (an upper
 *               bound: from the call to the end of the wait that ordered it) or "measured" (a
 *               synchronous copy's time after its wait); flow events ("ph":"s"/"f") go from
 *               each call that queued work to that wait. Events the analysis calls problems
 *               (the report's verdicts, analysis/ffm_analysis.h: ffm_analysis__event_verdict)
 *               carry "cname":"terrible" (red), args.problem and args.call_site_benefit_us
 *               (the report's expected benefit of fixing their call site): in the runs the
 *               report used, each event as the report counts it; in other runs, the events of
 *               a call site whose every checked occurrence was the same problem, citing the
 *               run that checked. Default: every run of the job. docs/REPORT.md documents it.
 * hatchet       Hatchet's literal format (hatchet.GraphFrame.from_literal): a JSON list of root
 *               nodes {"frame": {"name", "type", ...}, "metrics": {...}, "children": [...]}.
 *               The tree is the call path from the outermost application frame down to the
 *               driver function called; metrics (seconds, calls) on every node: "time (inc)",
 *               "time", "wait time (inc)", "wait time", "count (inc)", "count" — exclusive
 *               values are non-zero only on driver-function leaves. Default run: the latest
 *               ended stage-2 run of the job, else stage 1 (the runs that time calls).
 *
 * The store is opened read-only; the output goes to FILE through a temporary file that is
 * renamed at the end, so a failed export leaves no half-written file. A job that ran on several
 * nodes (one store per node, cli/report.h) is exported one node at a time: --node NAME, with
 * the node names of ffmctl report.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/ffm_analysis.h"
#include "cli/ffmctl.h"
#include "cli/report.h"
#include "common/oatab.h"
#include "store/ffm_store.h"
#include "symbols/ffm_driver.h"
#include "common/ffm_json.h"
#include "common/util.h"

#define MAX_RUNS 256
#define MAX_GPU_TRACKS 1024	     /* per run; more streams share the last one */
#define GPU_TID_BASE 0x40000000u /* GPU tracks' tids: above any Linux tid (pid_max <= 2^22) */

/* What the application frame and the driver function of a stack are, computed once. */
struct stack_info {
	struct oa_key k; /* (stack id, 0) */
	char *site;      /* "func (file:line)" of the innermost application frame, or NULL */
	char *driver_fn; /* outermost named libcuda frame (the public entry point), or NULL */
};

struct api_name {
	struct oa_key k; /* (api id, 1) */
	char *name;
};

struct exp {
	struct ffm_store *s;
	const char *job_id;
	FILE *out;
	struct ffm_store_run runs[MAX_RUNS];
	int nruns;
	struct oatab apis;   /* struct api_name */
	struct oatab stacks; /* struct stack_info */
	struct ffm_analysis *an; /* the report's verdicts (chrome-trace) */
	int64_t cur_run;
	int cur_stage;
	uint64_t t0_ns;
	bool first;
	struct oatab seen; /* tracks named already ((tgid<<32|tid | run<<...): struct oa_key) */
	struct oatab site_of; /* stack id -> 1 + index in the analysis's sites (u32) */
	struct ffm_an_gpu *gpu; /* the run's GPU tracks and flows (analysis/gpu.c) */
	struct gpu_track { uint32_t tgid; uint64_t stream; } gtracks[MAX_GPU_TRACKS];
	int ngtracks;
	int err;
};

static const char *frame_name(const struct ffm_store_frame *f, char *buf, size_t len)
{
	const char *base;

	if (f->demangled && *f->demangled)
		return f->demangled;
	if (f->func && *f->func)
		return f->func;
	base = f->module ? strrchr(f->module, '/') : NULL;
	snprintf(buf, len, "%s+%#" PRIx64, base ? base + 1 : f->module ? f->module : "?", f->offset);
	return buf;
}

/* ---- lookups ------------------------------------------------------------------------------ */

static int on_api(uint32_t api, const char *name, void *ctx)
{
	struct api_name *a = oatab_find(&((struct exp *)ctx)->apis, api, 1, true);

	return a && (a->name = strdup(name ? name : "?")) ? 0 : -ENOMEM;
}

static const char *api_name(const struct exp *e, uint32_t api)
{
	const struct api_name *a = api ? oatab_get(&e->apis, api, 1) : NULL;

	return a ? a->name : NULL;
}

struct frame_walk {
	char site[512];
	char driver_fn[128];
	bool have_site;
	int rank;         /* the site frame's ffm_an_frame_rank */
	bool py, py_user; /* the site is a Python frame; ... outside the libraries */
};

static int on_site_frame(const struct ffm_store_frame *f, uint32_t depth, void *ctx)
{
	struct frame_walk *w = ctx;
	char buf[256];
	int rank;

	if (ffm_module_owner(f->module) == FFM_MODULE_DRIVER) {
		/* Innermost first: the last named libcuda frame is the outermost, the entry point. */
		if (f->func && *f->func)
			snprintf(w->driver_fn, sizeof(w->driver_fn), "%s", f->func);
		return 0;
	}
	if (ffm_an_py_frame(f)) {
		/* A Python program's site, as the report names it (analysis/sites.c). */
		bool lib = ffm_an_py_library(f->file, NULL);

		if (!w->py || (!w->py_user && !lib)) {
			snprintf(w->site, sizeof(w->site), "%s:%u in %s", f->file ? f->file : "?",
				 f->line, f->func ? f->func : "?");
			w->have_site = w->py = true;
			w->py_user = !lib;
		}
		return 0;
	}
	rank = w->py ? 0 : ffm_an_frame_rank(f, NULL);
	if (!w->py && (!w->have_site || rank > w->rank)) {
		/* The first native frame of the best rank, as the report names sites. */
		w->rank = rank;
		if (f->file && *f->file)
			snprintf(w->site, sizeof(w->site), "%s (%s:%u)", frame_name(f, buf, sizeof(buf)),
				 f->file, f->line);
		else
			snprintf(w->site, sizeof(w->site), "%s", frame_name(f, buf, sizeof(buf)));
		w->have_site = true;
	}
	return 0;
}

/* The entry of @stack, created (frames read) on first use; NULL for stack 0 or on ENOMEM. */
static struct stack_info *stack_get(struct exp *e, int64_t stack)
{
	struct frame_walk w = {};
	struct stack_info *si;

	if (!stack)
		return NULL;
	si = oatab_get(&e->stacks, (uint64_t)stack, 0);
	if (si)
		return si;
	si = oatab_find(&e->stacks, (uint64_t)stack, 0, true);
	if (!si) {
		e->err = -ENOMEM;
		return NULL;
	}
	ffm_store__for_each_frame(e->s, stack, on_site_frame, &w);
	si->site = w.have_site ? strdup(w.site) : NULL;
	si->driver_fn = w.driver_fn[0] ? strdup(w.driver_fn) : NULL;
	return si;
}

static void free_exp(struct exp *e)
{
	for (size_t i = 0; i < e->apis.cap; i++) {
		struct api_name *a = oatab_slot(&e->apis, i);

		if (a)
			free(a->name);
	}
	oatab_free(&e->apis);
	oatab_free(&e->seen);
	for (size_t i = 0; i < e->stacks.cap; i++) {
		struct stack_info *si = oatab_slot(&e->stacks, i);

		if (si) {
			free(si->site);
			free(si->driver_fn);
		}
	}
	oatab_free(&e->stacks);
	oatab_free(&e->site_of);
	ffm_an_gpu__free(e->gpu);
	ffm_analysis__free(e->an);
	ffm_store__free(e->s);
}

static int on_run(const struct ffm_store_run *r, void *ctx)
{
	struct exp *e = ctx;

	if (!r->job_id || strcmp(r->job_id, e->job_id))
		return 0;
	if (e->nruns == MAX_RUNS)
		return -E2BIG;
	e->runs[e->nruns] = *r;
	e->runs[e->nruns].job_id = NULL; /* valid only during the callback */
	e->nruns++;
	return 0;
}

/* ---- problems: the analysis's verdicts ----------------------------------------------------- */

static const char *problem_name(unsigned p)
{
	return p == FFM_PROBLEM_UNNECESSARY_SYNC ? "unnecessary synchronization" :
	       p == FFM_PROBLEM_MISPLACED_SYNC ? "misplaced synchronization" :
	       p == FFM_PROBLEM_HOST_READ ? "host read every iteration" :
	       p == FFM_PROBLEM_LAUNCH_BLOCKED ? "launch blocked" : "duplicate transfer";
}

/* args.problem of an event with a verdict; "" for none. */
static void problem_text(const struct ffm_an_event_verdict *v, const struct ffm_store_event *ev,
			 char *buf, size_t len)
{
	size_t n;

	buf[0] = 0;
	if (v->problem == FFM_PROBLEM_NONE)
		return;
	if (v->site_wide) {
		snprintf(buf, len, "%s at this call site (all %" PRIu64 " checked in run %" PRId64 ")",
			 problem_name(v->problem), v->checked, v->from_run);
		return;
	}
	if (v->problem == FFM_PROBLEM_UNNECESSARY_SYNC)
		snprintf(buf, len, "unnecessary synchronization: no protected data was used before the "
			 "next one%s", v->partial ? " (coverage partial)" : "");
	else if (v->problem == FFM_PROBLEM_MISPLACED_SYNC)
		snprintf(buf, len, "misplaced synchronization: protected data first used %.3f us after it",
			 v->use_delay_ns / 1e3);
	else if (v->problem != FFM_PROBLEM_DUPLICATE_TRANSFER)
		snprintf(buf, len, "%s", problem_name(v->problem));
	else if (v->first_event)
		snprintf(buf, len, "duplicate transfer: the same %" PRIu64 " bytes to the same "
			 "destination as event %" PRId64, ev->bytes, v->first_event);
	else
		snprintf(buf, len, "duplicate transfer: the same %" PRIu64 " bytes to the same "
			 "destination again", ev->bytes);
	n = strlen(buf);
	if (v->duplicate && v->problem != FFM_PROBLEM_DUPLICATE_TRANSFER && n < len)
		n += snprintf(buf + n, len - n, "; also a duplicate transfer");
	if (ev->run != v->from_run && n < len)
		snprintf(buf + n, len - n, " (verdict of run %" PRId64 ")", v->from_run);
}

/* ---- chrome trace ------------------------------------------------------------------------- */

static const char *kind_name(uint32_t k)
{
	static const char *const n[] = { "?", "wait", "api", "transfer", "alloc", "free", "memset",
					 "launch" };

	return k < sizeof(n) / sizeof(n[0]) ? n[k] : "?";
}

static const char *dir_name(uint32_t d)
{
	static const char *const n[] = { "none", "HtoD", "DtoH", "DtoD", "HtoH", "peer" };

	return d < sizeof(n) / sizeof(n[0]) ? n[d] : "?";
}

/* Whether thread or process @k was named already (it is from now on). */
static bool seen_thread(struct exp *e, uint64_t k)
{
	size_t n = e->seen.n;

	if (!oatab_find(&e->seen, k, 1, true))
		e->err = -ENOMEM;
	return e->seen.n == n;
}

/* One string value; a failure (out of memory, output) ends the export through e->err. */
static void put_str(struct exp *e, const char *s)
{
	int err = ffm_json_write_str(e->out, s);

	if (err && !e->err)
		e->err = err;
}

static void sep(struct exp *e)
{
	fputs(e->first ? "\n" : ",\n", e->out);
	e->first = false;
}

/* A metadata event: {"name":@what,"ph":"M","pid":run,"tid":@tid,"args":{"name":@name}}. */
static void meta_name(struct exp *e, const char *what, uint32_t tid, const char *name)
{
	sep(e);
	fprintf(e->out, "{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%" PRId64 ",\"tid\":%u,\"args\":{\"name\":",
		what, e->cur_run, tid);
	put_str(e, name);
	fputs("}}", e->out);
}

static void meta_sort(struct exp *e, const char *what, uint32_t tid, int64_t index)
{
	sep(e);
	fprintf(e->out, "{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%" PRId64 ",\"tid\":%u,"
		"\"args\":{\"sort_index\":%" PRId64 "}}", what, e->cur_run, tid, index);
}

/* The run's process track (pid = run id), named once per run. */
static void name_run(struct exp *e)
{
	char name[256];

	snprintf(name, sizeof(name), "run %" PRId64 " (stage %d, job %s)", e->cur_run, e->cur_stage,
		 e->job_id);
	meta_name(e, "process_name", 0, name);
	meta_sort(e, "process_sort_index", 0, e->cur_run);
}

/* A CPU thread's track in the run: tid as the kernel has it, named with its process. */
static void name_thread(struct exp *e, uint32_t tgid, uint32_t tid)
{
	char name[128];

	if (seen_thread(e, (uint64_t)tgid << 32 | tid))
		return;
	snprintf(name, sizeof(name), tid == tgid ? "pid %u main thread" : "pid %u thread %u", tgid, tid);
	meta_name(e, "thread_name", tid, name);
}

/* The trace tid of the GPU track of (tgid, stream) in the current run, named on first use. */
static uint32_t gpu_tid(struct exp *e, uint32_t tgid, uint64_t stream)
{
	char name[128];
	int i;

	for (i = 0; i < e->ngtracks; i++)
		if (e->gtracks[i].tgid == tgid && e->gtracks[i].stream == stream)
			return GPU_TID_BASE + (uint32_t)i;
	if (e->ngtracks == MAX_GPU_TRACKS)
		return GPU_TID_BASE + MAX_GPU_TRACKS - 1;
	e->gtracks[i] = (struct gpu_track){ tgid, stream };
	e->ngtracks++;
	if (stream)
		snprintf(name, sizeof(name), "GPU stream %#" PRIx64 " (pid %u)", stream, tgid);
	else
		snprintf(name, sizeof(name), "GPU default stream (pid %u)", tgid);
	meta_name(e, "thread_name", GPU_TID_BASE + (uint32_t)i, name);
	meta_sort(e, "thread_sort_index", GPU_TID_BASE + (uint32_t)i, 1000000 + i);
	return GPU_TID_BASE + (uint32_t)i;
}

static double us_of(const struct exp *e, uint64_t ns)
{
	return ns >= e->t0_ns ? (double)(ns - e->t0_ns) / 1e3 : 0.0;
}

static int on_gpu_span(const struct ffm_an_gpu_span *sp, void *ctx)
{
	struct exp *e = ctx;
	uint32_t tid = gpu_tid(e, sp->tgid, sp->stream);

	sep(e);
	if (sp->inferred)
		fprintf(e->out, "{\"name\":\"GPU work of %u call%s\",\"cat\":\"gpu,inferred\"", sp->calls,
			sp->calls == 1 ? "" : "s");
	else
		fputs("{\"name\":\"copy\",\"cat\":\"gpu,measured\"", e->out);
	fprintf(e->out, ",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%" PRId64 ",\"tid\":%u,"
		"\"args\":{\"run\":%" PRId64 ",\"timing\":\"%s\",\"calls\":%u,\"first_event\":%" PRId64
		",\"launched_us\":%.3f,\"ended_by\":", us_of(e, sp->start_ns),
		(double)(sp->end_ns - sp->start_ns) / 1e3, e->cur_run, tid, e->cur_run,
		sp->inferred ? "inferred: ran within this span at most (from the call to the end of "
			       "the wait that ordered it)" : "measured: the call's time after its wait",
		sp->calls, sp->first_event, us_of(e, sp->launched_ns));
	if (sp->ended_by)
		fprintf(e->out, "%" PRId64, sp->ended_by);
	else
		fputs("\"process exit\"", e->out);
	if (sp->bytes)
		fprintf(e->out, ",\"bytes\":%" PRIu64, sp->bytes);
	fputs("}}", e->out);
	return ferror(e->out) ? -EIO : 0;
}

/* An arrow from a call that queued GPU work to the wait that ended it. */
static int on_gpu_flow(const struct ffm_an_gpu_flow *f, void *ctx)
{
	struct exp *e = ctx;

	sep(e);
	fprintf(e->out, "{\"name\":\"waits for\",\"cat\":\"gpu\",\"ph\":\"s\",\"id\":%" PRId64
		",\"ts\":%.3f,\"pid\":%" PRId64 ",\"tid\":%u}", f->from_event, us_of(e, f->from_ns),
		e->cur_run, f->from_tid);
	sep(e);
	fprintf(e->out, "{\"name\":\"waits for\",\"cat\":\"gpu\",\"ph\":\"f\",\"bp\":\"e\",\"id\":%"
		PRId64 ",\"ts\":%.3f,\"pid\":%" PRId64 ",\"tid\":%u}", f->from_event,
		us_of(e, f->to_ns), e->cur_run, f->to_tid);
	return ferror(e->out) ? -EIO : 0;
}

/* The report's expected benefit of fixing @stack's call site, -1 when it is no site of it. */
static double site_benefit_us(const struct exp *e, int64_t stack)
{
	const struct ffm_analysis_result *r = ffm_analysis__result(e->an);
	uint32_t i = oatab_get_u32(&e->site_of, (uint64_t)stack);

	return i && i <= r->n_sites ? r->sites[i - 1].benefit_ns / 1e3 : -1;
}

static int on_trace_event(const struct ffm_store_event *ev, void *ctx)
{
	struct exp *e = ctx;
	struct stack_info *si = stack_get(e, ev->stack);
	const char *name = api_name(e, ev->api);
	struct ffm_an_event_verdict v;
	char problem[256];
	double benefit;
	int err;

	if (e->err)
		return e->err;
	if (!name)
		name = ev->kind == 1 && si && si->driver_fn ? si->driver_fn : kind_name(ev->kind);
	if (ffm_analysis__event_verdict(e->an, ev, &v) < 0)
		return -EINVAL;
	problem_text(&v, ev, problem, sizeof(problem));
	if ((err = ffm_an_gpu__event(e->gpu, ev, api_name(e, ev->api))) < 0)
		return err;
	name_thread(e, ev->tgid, ev->tid);
	sep(e);
	fputs("{\"name\":", e->out);
	put_str(e, name);
	fprintf(e->out, ",\"cat\":\"%s%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%" PRId64
		",\"tid\":%u", kind_name(ev->kind), problem[0] ? ",problem" : "",
		us_of(e, ev->start_ns), ev->dur_ns / 1e3, e->cur_run, ev->tid);
	if (problem[0])
		fputs(",\"cname\":\"terrible\"", e->out);
	fprintf(e->out, ",\"args\":{\"run\":%" PRId64 ",\"stage\":%d,\"event\":%" PRId64
		",\"pid\":%u,\"wait_us\":%.3f", e->cur_run, e->cur_stage, ev->id, ev->tgid,
		ev->wait_ns / 1e3);
	if (ev->bytes)
		fprintf(e->out, ",\"bytes\":%" PRIu64, ev->bytes);
	if (ev->dir)
		fprintf(e->out, ",\"direction\":\"%s\"", dir_name(ev->dir));
	if (ev->stream)
		fprintf(e->out, ",\"stream\":\"%#" PRIx64 "\"", ev->stream);
	if (si && si->site) {
		fputs(",\"call_site\":", e->out);
		put_str(e, si->site);
	}
	if (problem[0]) {
		fputs(",\"problem\":", e->out);
		put_str(e, problem);
		if ((benefit = site_benefit_us(e, ev->stack)) >= 0)
			fprintf(e->out, ",\"call_site_benefit_us\":%.3f", benefit);
	}
	fputs("}}", e->out);
	return e->err ? e->err : ferror(e->out) ? -EIO : 0;
}

static int on_trace_process(const struct ffm_store_process *p, void *ctx)
{
	struct exp *e = ctx;

	return ffm_an_gpu__process_end(e->gpu, p->tgid, p->end_ns);
}

/* One run: its process track, its threads' calls, its GPU tracks and flows. */
static int trace_run(struct exp *e, const struct ffm_store_run *r)
{
	int err;

	e->cur_run = r->id;
	e->cur_stage = r->stage;
	e->ngtracks = 0;
	oatab_free(&e->seen);
	e->seen = OATAB_INIT(struct oa_key);
	ffm_an_gpu__reset(e->gpu);
	name_run(e);
	if ((err = ffm_store__for_each_event(e->s, r->id, on_trace_event, e)) < 0)
		return err;
	return ffm_store__for_each_process(e->s, r->id, on_trace_process, e);
}

/* stack id -> 1 + its site's index in the analysis's result. */
static int map_sites(struct exp *e)
{
	const struct ffm_analysis_result *r = ffm_analysis__result(e->an);

	for (size_t i = 0; i < r->n_sites; i++)
		if (oatab_put_u32(&e->site_of, (uint64_t)r->sites[i].stack, (uint32_t)i + 1) < 0)
			return -ENOMEM;
	return 0;
}

static int export_trace(struct exp *e, int64_t only_run)
{
	/* The verdicts as the job's report has them (every run of the key up to the job's last). */
	struct ffm_analysis_opts ao = { .sz = sizeof(ao), .job_id = e->job_id,
					.event_verdicts = true };
	int err;

	if ((err = ffm_analysis__run(e->s, &ao, &e->an)) < 0 || (err = map_sites(e)) < 0 ||
	    (err = ffm_an_gpu__new(on_gpu_span, on_gpu_flow, e, &e->gpu)) < 0)
		return err;
	e->t0_ns = UINT64_MAX;
	for (int i = 0; i < e->nruns; i++)
		if ((!only_run || e->runs[i].id == only_run) && e->runs[i].start_ns < e->t0_ns)
			e->t0_ns = e->runs[i].start_ns;
	fprintf(e->out, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"tool\":\"ffm\",\"job\":");
	put_str(e, e->job_id);
	fprintf(e->out, ",\"clock\":\"CLOCK_MONOTONIC\",\"t0_ns\":%" PRIu64 "},\"traceEvents\":[", e->t0_ns);
	e->first = true;
	for (int i = 0; i < e->nruns; i++) {
		if (only_run && e->runs[i].id != only_run)
			continue;
		if ((err = trace_run(e, &e->runs[i])) < 0)
			return err;
	}
	fputs("\n]}\n", e->out);
	return e->err;
}

/* ---- hatchet ------------------------------------------------------------------------------ */

struct hnode {
	char *name, *type, *file, *module;
	uint32_t line;
	int first_child, next; /* indices, -1 = none */
	double time, wait, time_inc, wait_inc;
	uint64_t count, count_inc;
};

struct htree {
	struct hnode *n;
	size_t len, cap;
	int first_root;
	struct exp *e;
	int err;
	/* frames of the stack being added, innermost first */
	struct ffm_store_frame fr[256];
	char *strs[256][4];
	uint32_t nfr;
};

static int hnode_child(struct htree *t, int parent, const char *name, const char *type,
		       const char *file, uint32_t line, const char *module)
{
	int *link = parent < 0 ? &t->first_root : &t->n[parent].first_child;
	int i;

	for (i = *link; i >= 0; i = t->n[i].next)
		if (!strcmp(t->n[i].name, name) && !strcmp(t->n[i].type, type) &&
		    !strcmp(t->n[i].module, module ? module : "") &&
		    /* Driver leaves are per call site; functions per name and module. */
		    (strcmp(type, "driver") || (!strcmp(t->n[i].file, file ? file : "") &&
						 t->n[i].line == line)))
			return i;
	if (FFM_GROW(t->n, t->cap, t->len + 1) < 0)
		return -ENOMEM;
	i = (int)t->len;
	t->n[i] = (struct hnode){ .name = strdup(name), .type = strdup(type),
				  .file = strdup(file ? file : ""), .module = strdup(module ? module : ""),
				  .line = line, .first_child = -1, .next = -1 };
	if (!t->n[i].name || !t->n[i].type || !t->n[i].file || !t->n[i].module)
		return -ENOMEM;
	t->len++;
	/* Append, so children keep the order they were first seen in. */
	link = parent < 0 ? &t->first_root : &t->n[parent].first_child;
	while (*link >= 0)
		link = &t->n[*link].next;
	*link = i;
	return i;
}

static int on_tree_frame(const struct ffm_store_frame *f, uint32_t depth, void *ctx)
{
	struct htree *t = ctx;
	uint32_t i = t->nfr;

	if (i == sizeof(t->fr) / sizeof(t->fr[0]))
		return 0; /* deeper than any stack the collector keeps */
	t->fr[i] = *f;
	t->strs[i][0] = f->module ? strdup(f->module) : NULL;
	t->strs[i][1] = f->func ? strdup(f->func) : NULL;
	t->strs[i][2] = f->demangled ? strdup(f->demangled) : NULL;
	t->strs[i][3] = f->file ? strdup(f->file) : NULL;
	t->fr[i].module = t->strs[i][0];
	t->fr[i].func = t->strs[i][1];
	t->fr[i].demangled = t->strs[i][2];
	t->fr[i].file = t->strs[i][3];
	t->fr[i].folded = NULL;
	t->fr[i].build_id = NULL;
	t->nfr++;
	return 0;
}

static int on_agg(const struct ffm_store_stack_agg *a, void *ctx)
{
	struct htree *t = ctx;
	const char *leaf = api_name(t->e, a->api), *site_file = NULL;
	uint32_t app = 0, site_line = 0;
	int node = -1, path[257], np = 0;
	double time = a->dur_ns / 1e9, wait = (a->kind == 1 ? a->dur_ns : a->wait_ns) / 1e9;
	char buf[256];

	t->nfr = 0;
	ffm_store__for_each_frame(t->e->s, a->stack, on_tree_frame, t);
	/* Skip the driver's own frames (innermost); without an api id, the outermost named one
	 * is the entry point that was called. */
	while (app < t->nfr && ffm_module_owner(t->fr[app].module) == FFM_MODULE_DRIVER)
		app++;
	for (uint32_t i = app; !leaf && i-- > 0;)
		if (t->fr[i].func && *t->fr[i].func)
			leaf = t->fr[i].func;
	if (!leaf)
		leaf = a->kind == 1 ? "(wait in libcuda)" : kind_name(a->kind);
	if (app < t->nfr) {
		site_file = t->fr[app].file;
		site_line = t->fr[app].line;
	}
	/* Outermost application frame first. */
	for (uint32_t i = t->nfr; i-- > app;) {
		const struct ffm_store_frame *f = &t->fr[i];

		node = hnode_child(t, node, frame_name(f, buf, sizeof(buf)), "function", f->file,
				   f->line, f->module);
		if (node < 0)
			goto out;
		path[np++] = node;
	}
	node = hnode_child(t, node, leaf, "driver", site_file, site_line, "libcuda");
	if (node < 0)
		goto out;
	path[np++] = node;
	t->n[node].time += time;
	t->n[node].wait += wait;
	t->n[node].count += a->count;
	for (int i = 0; i < np; i++) {
		t->n[path[i]].time_inc += time;
		t->n[path[i]].wait_inc += wait;
		t->n[path[i]].count_inc += a->count;
	}
out:
	for (uint32_t i = 0; i < t->nfr; i++)
		for (int k = 0; k < 4; k++)
			free(t->strs[i][k]);
	return node < 0 ? -ENOMEM : 0;
}

static json_t *hnode_json(const struct htree *t, int i)
{
	const struct hnode *n = &t->n[i];
	json_t *frame, *v;

	/* o*: no file (and line) or module when unknown */
	frame = json_pack("{s:o,s:s,s:o*,s:o*,s:o*}", "name", ffm_json_string(n->name), "type", n->type,
			  "file", n->file[0] ? ffm_json_string(n->file) : NULL,
			  "line", n->file[0] ? json_integer(n->line) : NULL,
			  "module", n->module[0] ? ffm_json_string(n->module) : NULL);
	v = json_pack("{s:o,s:{s:o,s:o,s:o,s:o,s:o,s:o}}", "frame", frame, "metrics",
		      "time (inc)", ffm_json_fixed(n->time_inc, 9),
		      "time", ffm_json_fixed(n->time, 9),
		      "wait time (inc)", ffm_json_fixed(n->wait_inc, 9),
		      "wait time", ffm_json_fixed(n->wait, 9),
		      "count (inc)", ffm_json_u64(n->count_inc),
		      "count", ffm_json_u64(n->count));
	if (n->first_child >= 0) {
		json_t *children = json_array();

		for (int c = n->first_child; c >= 0; c = t->n[c].next)
			children = ffm_json_append(children, hnode_json(t, c));
		v = ffm_json_set(v, "children", children);
	}
	return v;
}

static int export_hatchet(struct exp *e, int64_t run)
{
	struct htree t = { .first_root = -1, .e = e };
	int err;

	err = ffm_store__for_each_stack_agg(e->s, run, on_agg, &t);
	if (err >= 0) {
		json_t *roots = json_array();

		for (int r = t.first_root; r >= 0; r = t.n[r].next)
			roots = ffm_json_append(roots, hnode_json(&t, r));
		err = ffm_json_print(e->out, roots);
	}
	for (size_t i = 0; i < t.len; i++) {
		free(t.n[i].name);
		free(t.n[i].type);
		free(t.n[i].file);
		free(t.n[i].module);
	}
	free(t.n);
	return err;
}

/* ---- verb --------------------------------------------------------------------------------- */

static int64_t default_tree_run(const struct exp *e)
{
	int64_t best = 0;
	int best_stage = 0;

	/* Runs are in id order: a later run of the same stage replaces an earlier one. */
	for (int i = 0; i < e->nruns; i++) {
		const struct ffm_store_run *r = &e->runs[i];

		if (!r->end_ns || r->stage > 2 || r->stage < best_stage)
			continue;
		best = r->id;
		best_stage = r->stage;
	}
	return best;
}

/*
 * Open the job's store into e->s: that of its only node, or of node @node. Returns an exit
 * code, having said why on failure.
 */
static int open_store(struct exp *e, const char *node)
{
	struct ffmctl_job_stores js;
	char names[512] = "";
	size_t pick = 0, off = 0;
	int err;

	err = ffmctl_job_stores__open(ffmctl_g.state_dir, e->job_id, &js);
	if (err < 0) {
		ffmctl_no_job_err("export", ffmctl_g.state_dir, e->job_id, err);
		return EXIT_FAIL;
	}
	while (node && pick < js.n && strcmp(js.v[pick].name, node))
		pick++;
	if (pick < js.n && (node || js.n == 1)) {
		e->s = ffm_store__ref(js.v[pick].store);
		ffmctl_job_stores__close(&js);
		return EXIT_OK;
	}
	for (size_t i = 0; i < js.n && off < sizeof(names); i++)
		off += (size_t)snprintf(names + off, sizeof(names) - off, "%s%s", i ? ", " : "",
					js.v[i].name);
	if (node)
		ffmctl_err("export", "job %s did not run on a node '%s' (its nodes: %s)", e->job_id,
			   node, names);
	else
		ffmctl_err("export", "job %s ran on %zu nodes (%s): export one with --node NAME",
			   e->job_id, js.n, names);
	ffmctl_job_stores__close(&js);
	return EXIT_USAGE;
}

int ffmctl_export(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "format", required_argument, NULL, 'f' },
		{ "run", required_argument, NULL, 'r' },
		{ "output", required_argument, NULL, 'o' },
		{ "node", required_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	const char *format = NULL, *output = NULL, *node = NULL;
	char tmp[PATH_MAX];
	struct exp *e;
	int64_t run = 0;
	char *end;
	int c, err, r = EXIT_FAIL;

	while ((c = getopt_long(argc, argv, ":f:r:o:n:h", opts, NULL)) != -1) {
		switch (c) {
		case 'f':
			if (strcmp(optarg, "chrome-trace") && strcmp(optarg, "hatchet")) {
				ffmctl_err("export", "--format must be chrome-trace or hatchet, not '%s'",
					   optarg);
				return EXIT_USAGE;
			}
			format = optarg;
			break;
		case 'r':
			errno = 0;
			run = strtoll(optarg, &end, 10);
			if (errno || end == optarg || *end || run <= 0) {
				ffmctl_err("export", "--run wants a run id (see ffmctl report --json), not '%s'",
					   optarg);
				return EXIT_USAGE;
			}
			break;
		case 'o':
			output = optarg;
			break;
		case 'n':
			node = optarg;
			break;
		case 'h':
			printf("Usage: ffmctl export <jobid> --format chrome-trace|hatchet "
			       "[--run ID] [--node NAME] [-o FILE]\n");
			return EXIT_OK;
		default:
			return ffmctl_opt_err("export", c, argv);
		}
	}
	if (ffmctl_one_jobid("export", argc, argv))
		return EXIT_USAGE;
	if (!format) {
		ffmctl_err("export", "--format chrome-trace or --format hatchet is required");
		return EXIT_USAGE;
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		ffmctl_err("export", "out of memory");
		return EXIT_FAIL;
	}
	e->job_id = argv[optind];
	e->stacks = OATAB_INIT(struct stack_info);
	e->apis = OATAB_INIT(struct api_name);
	e->seen = OATAB_INIT(struct oa_key);
	e->site_of = OATAB_U32_INIT;
	r = open_store(e, node);
	if (r != EXIT_OK)
		goto out;
	r = EXIT_FAIL;
	if ((err = ffm_store__for_each_run(e->s, on_run, e)) < 0 ||
	    (err = ffm_store__for_each_api_name(e->s, on_api, e)) < 0) {
		ffmctl_err("export", "reading %s: %s", ffm_store__path(e->s), ffm_store__strerror(err));
		goto out;
	}
	if (run) {
		bool found = false;

		for (int i = 0; i < e->nruns; i++)
			found |= e->runs[i].id == run;
		if (!found) {
			ffmctl_err("export", "job %s has no run %" PRId64, e->job_id, run);
			r = EXIT_USAGE;
			goto out;
		}
	} else if (!strcmp(format, "hatchet") && !(run = default_tree_run(e))) {
		ffmctl_err("export", "job %s has no ended stage-1 or stage-2 run to build a call tree "
			   "from (pick one with --run)", e->job_id);
		goto out;
	}
	if (!e->nruns) {
		ffmctl_err("export", "job %s has no runs yet", e->job_id);
		goto out;
	}
	if (output) {
		snprintf(tmp, sizeof(tmp), "%s.tmp.%d", output, (int)getpid());
		e->out = fopen(tmp, "we");
		if (!e->out) {
			ffmctl_err("export", "cannot create %s: %s", tmp, strerror(errno));
			goto out;
		}
	} else {
		e->out = stdout;
	}
	err = !strcmp(format, "hatchet") ? export_hatchet(e, run) : export_trace(e, run);
	if (!err && e->err)
		err = e->err;
	if (fflush(e->out) || ferror(e->out))
		err = err ? err : -EIO;
	if (output) {
		if (fclose(e->out) && !err)
			err = -EIO;
		if (!err && rename(tmp, output) < 0)
			err = -errno;
		if (err)
			unlink(tmp);
	}
	if (err < 0) {
		ffmctl_err("export", "writing the %s export of job %s failed: %s", format, e->job_id,
			   ffm_store__strerror(err));
		goto out;
	}
	r = EXIT_OK;
out:
	free_exp(e);
	free(e);
	return r;
}
