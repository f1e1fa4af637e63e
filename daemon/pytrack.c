/* SPDX-License-Identifier: MIT */
/* The Python processes of a job run: see daemon/pytrack.h. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/oatab.h"
#include "daemon/collector.h"
#include "daemon/log.h"
#include "daemon/pytrack.h"
#include "store/ffm_store.h"
#include "symbols/ffm_python.h"

/* Looks at a process's stack records before its state is given up as not settling. */
#define MAX_TRIES 16
/* Checks that refuse the layout before it is given up: a thread held in the middle of making
 * a frame or thread state looks the same to each of one check's rounds (ffm_py_verify). */
#define MAX_REFUSALS 3
/* Threads given a CPU sampler per run: each is a perf event fd. */
#define MAX_SAMPLED_THREADS 256

enum py_state {
	PY_UNKNOWN = 0, /* not looked at, or no CPython mapped yet */
	PY_FOUND,       /* a supported build, not yet checked against the live process */
	PY_WALKED,      /* checked: in the pyprocs map */
	PY_NONE,        /* settled: no Python frames (not CPython, unsupported, failed check) */
};

struct proc {
	struct oa_key k; /* a: tgid */
	enum py_state state;
	uint32_t tries, refusals;
	struct ffm_py_build *b;
	struct ffm_py_decoder *dec;
};

/* A thread's CPU sampler (ffm_pytrack__on_thread). */
struct sampler {
	struct oa_key k; /* a: tid */
	uint32_t tgid;	 /* the process it was opened in; a reused tid of another process opens anew */
	struct ffm_watch *w;
};

struct ffm_pytrack {
	struct ffm_collector *col;
	const char *proc_root;
	struct oatab procs; /* struct proc; entries of exited processes are reset, not removed */
	struct oatab samplers; /* struct sampler; closed at the process's exit, not removed */
	unsigned sample_hz, n_samplers;
	bool warned_sample;
	char unsupported[256];
	bool off;
};

int ffm_pytrack__new(struct ffm_collector *col, const char *proc_root, struct ffm_pytrack **ret)
{
	struct ffm_pytrack *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	t->col = col;
	t->proc_root = proc_root;
	/* FFM_PYTHON_FRAMES=0 in ffmd's (or ffmctl profile's) environment: no process is walked
	 * (what bench/bench_python.sh compares against). */
	t->off = getenv("FFM_PYTHON_FRAMES") && !strcmp(getenv("FFM_PYTHON_FRAMES"), "0");
	t->procs = OATAB_INIT(struct proc);
	t->samplers = OATAB_INIT(struct sampler);
	*ret = t;
	return 0;
}

static void proc_reset(struct proc *p)
{
	p->dec = ffm_py_decoder__free(p->dec);
	free(p->b);
	p->b = NULL;
	p->state = PY_UNKNOWN;
	p->tries = p->refusals = 0;
}

struct ffm_pytrack *ffm_pytrack__free(struct ffm_pytrack *t)
{
	if (!t)
		return NULL;
	for (size_t i = 0; i < t->procs.cap; i++) {
		struct proc *p = oatab_slot(&t->procs, i);

		if (p)
			proc_reset(p);
	}
	oatab_free(&t->procs);
	for (size_t i = 0; i < t->samplers.cap; i++) {
		struct sampler *s = oatab_slot(&t->samplers, i);

		if (s)
			ffm_watch__free(s->w);
	}
	oatab_free(&t->samplers);
	free(t);
	return NULL;
}

void ffm_pytrack__sample_threads(struct ffm_pytrack *t, unsigned hz)
{
	t->sample_hz = hz;
}

void ffm_pytrack__on_thread(struct ffm_pytrack *t, uint32_t tgid, uint32_t tid)
{
	struct proc *p;
	struct sampler *s;
	int err;

	if (!t->sample_hz || !t->col)
		return;
	s = oatab_get(&t->samplers, tid, 0);
	if (s && s->tgid == tgid)
		return; /* opened, or tried and failed: once per thread */
	p = oatab_get(&t->procs, tgid, 0);
	if (!p || p->state != PY_WALKED)
		return; /* not yet known to run Python code: asked again at its next call */
	if (!s && t->n_samplers >= MAX_SAMPLED_THREADS)
		return;
	s = oatab_find(&t->samplers, tid, 0, true);
	if (!s)
		return;
	if (!s->tgid)
		t->n_samplers++;
	s->w = ffm_watch__free(s->w);
	s->tgid = tgid;
	err = ffm_collector__sample(t->col, (pid_t)tid, t->sample_hz, &s->w);
	if (err < 0 && err != -ESRCH && !t->warned_sample) {
		log_warn("cannot sample the CPU time of thread %u: %s; host reads in Python are priced "
			 "without their library's own CPU time", tid, strerror(-err));
		t->warned_sample = true;
	}
}

static void give_up(struct ffm_pytrack *t, struct proc *p, uint32_t tgid, const char *why)
{
	if (why && *why) {
		if (!t->unsupported[0])
			snprintf(t->unsupported, sizeof(t->unsupported), "%s", why);
		log_info("process %u: no Python frames: %s", tgid, why);
	}
	if (p->state == PY_WALKED && t->col)
		ffm_collector__set_python(t->col, tgid, NULL);
	p->dec = ffm_py_decoder__free(p->dec);
	p->state = PY_NONE;
}

/* Check a found build against the live process; into the pyprocs map when it fits. */
static void check(struct ffm_pytrack *t, struct proc *p, uint32_t tgid)
{
	char why[512];
	int err = ffm_py_verify((pid_t)tgid, t->proc_root, p->b, why, sizeof(why));

	if (err == -EAGAIN || (err == -EPROTO && ++p->refusals < MAX_REFUSALS))
		return; /* checked again at its next stack record */
	if (err < 0) {
		give_up(t, p, tgid, err == -EPROTO ? why : NULL);
		return;
	}
	if (ffm_py_decoder__new((pid_t)tgid, t->proc_root, p->b, &p->dec) < 0 ||
	    (t->col && ffm_collector__set_python(t->col, tgid, &p->b->bpf) < 0)) {
		give_up(t, p, tgid, NULL);
		return;
	}
	p->state = PY_WALKED;
}

/* Look for the process's build. @final (at a stack): no CPython now means none ever (its
 * driver is in use, so a libpython would be mapped); at its join, a libpython may be mapped
 * later (a shared build, at exec) or not be readable yet. */
static void detect(struct ffm_pytrack *t, struct proc *p, uint32_t tgid, bool final)
{
	char why[512];
	int err;

	if (!p->b && !(p->b = calloc(1, sizeof(*p->b))))
		return;
	err = ffm_py_detect((pid_t)tgid, t->proc_root, p->b, why, sizeof(why));
	if (err == 1)
		p->state = PY_FOUND;
	else if (err == -ENOTSUP)
		give_up(t, p, tgid, why);
	else if (final || (err < 0 && err != -EACCES))
		give_up(t, p, tgid, NULL);
}

void ffm_pytrack__on_proc(struct ffm_pytrack *t, uint32_t tgid, uint32_t ptgid)
{
	struct proc *p = oatab_find(&t->procs, tgid, 0, true);
	struct proc *pp = ptgid ? oatab_find(&t->procs, ptgid, 0, false) : NULL;

	if (!p)
		return;
	proc_reset(p);
	if (t->off) {
		p->state = PY_NONE;
		return;
	}
	/* An exec's new image is looked at by ffm_pytrack__settle (which opens its files: off
	 * the loop), not here. A fork: the parent's image, and BPF copied its pyprocs entry; its
	 * decoder reads its memory through /proc, no file of its user's. A parent whose build was
	 * found but not yet checked (it forked before calling the driver): the child's is the
	 * same build, checked by ffm_pytrack__settle. */
	if (pp && (pp->state == PY_WALKED || pp->state == PY_FOUND) &&
	    (p->b = malloc(sizeof(*p->b)))) {
		*p->b = *pp->b;
		if (pp->state == PY_FOUND) {
			p->state = PY_FOUND;
			return;
		}
		if (ffm_py_decoder__new((pid_t)tgid, t->proc_root, p->b, &p->dec) == 0) {
			p->state = PY_WALKED;
			return;
		}
		give_up(t, p, tgid, NULL);
	}
}

bool ffm_pytrack__unsettled(struct ffm_pytrack *t, uint32_t tgid)
{
	const struct proc *p = oatab_find(&t->procs, tgid, 0, false);

	return !t->off && p && (p->state == PY_UNKNOWN || p->state == PY_FOUND);
}

void ffm_pytrack__settle(struct ffm_pytrack *t, uint32_t tgid)
{
	struct proc *p = oatab_find(&t->procs, tgid, 0, false);

	if (!p || t->off)
		return;
	if (p->state == PY_UNKNOWN)
		detect(t, p, tgid, false);
	if (p->state == PY_FOUND)
		check(t, p, tgid);
}

void ffm_pytrack__on_exit(struct ffm_pytrack *t, uint32_t tgid)
{
	struct proc *p = oatab_find(&t->procs, tgid, 0, false);

	if (p)
		proc_reset(p);
	for (size_t i = 0; t->n_samplers && i < t->samplers.cap; i++) {
		struct sampler *s = oatab_slot(&t->samplers, i);

		if (s && s->tgid == tgid)
			s->w = ffm_watch__free(s->w);
	}
}

void ffm_pytrack__code(struct ffm_pytrack *t, const struct ffm_rec_pycode *rec)
{
	struct proc *p = oatab_find(&t->procs, rec->hdr.tgid, 0, false);

	/* BPF walks only processes in pyprocs, which have a decoder; a copy that cannot stand
	 * alone (a name cut short) is ignored: the frames are read from the process then. */
	if (p && p->state == PY_WALKED && p->dec)
		ffm_py_decoder__code(p->dec, rec);
}

static struct ffm_py_decoder *on_stack(struct ffm_pytrack *t, uint32_t tgid)
{
	struct proc *p = oatab_find(&t->procs, tgid, 0, true);

	if (!p)
		return NULL;
	if (t->off)
		p->state = PY_NONE;
	if (p->state == PY_UNKNOWN || p->state == PY_FOUND) {
		if (++p->tries > MAX_TRIES) {
			give_up(t, p, tgid, "the interpreter never had a thread running Python code");
			return NULL;
		}
		if (p->state == PY_UNKNOWN)
			detect(t, p, tgid, true);
		if (p->state == PY_FOUND)
			check(t, p, tgid);
	}
	return p->state == PY_WALKED ? p->dec : NULL;
}

/* Where the interpreter's eval loop runs Python code: its frames stand for the Python ones. */
static bool eval_frame(const struct ffm_store_frame *f)
{
	return f->func && (!strcmp(f->func, "_PyEval_EvalFrameDefault") ||
			   !strcmp(f->func, "PyEval_EvalFrameEx"));
}

int ffm_pytrack__frames(struct ffm_pytrack *t, const struct ffm_rec_stack *s,
			struct ffm_store_frame *py, int max)
{
	struct ffm_py_decoder *dec = on_stack(t, s->hdr.tgid);
	int np = 0;

	if (!dec || !s->npy)
		return 0;
	for (uint32_t i = 0; i < s->npy && i < FFM_PY_FRAMES && np < max; i++) {
		struct ffm_py_loc loc;

		if (ffm_py_decoder__frame(dec, s->py[i].code, s->py[i].instr, &loc) < 0)
			continue; /* freed since, or not a code object: no guess */
		py[np++] = (struct ffm_store_frame){
			.build_id = FFM_PY_BUILD_ID, .module = loc.file, .offset = loc.key,
			.func = loc.qualname, .demangled = loc.qualname, .folded = loc.folded,
			.file = loc.file, .line = loc.line,
		};
	}
	return np;
}

int ffm_pytrack__insert(struct ffm_store_frame *frames, int n, int max,
			const struct ffm_store_frame *py, int np)
{
	int at = n;

	for (int i = 0; i < n; i++)
		if (eval_frame(&frames[i])) {
			at = i;
			break;
		}
	if (np > max - n)
		np = max - n;
	if (np <= 0)
		return n;
	memmove(frames + at + np, frames + at, (size_t)(n - at) * sizeof(*frames));
	memcpy(frames + at, py, (size_t)np * sizeof(*frames));
	return n + np;
}

const char *ffm_pytrack__unsupported(const struct ffm_pytrack *t)
{
	return t->unsupported[0] ? t->unsupported : NULL;
}
