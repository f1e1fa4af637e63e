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

enum py_state {
	PY_UNKNOWN = 0, /* not looked at, or no CPython mapped yet */
	PY_FOUND,       /* a supported build, not yet checked against the live process */
	PY_WALKED,      /* checked: in the pyprocs map */
	PY_NONE,        /* settled: no Python frames (not CPython, unsupported, failed check) */
};

struct proc {
	struct oa_key k; /* a: tgid */
	enum py_state state;
	uint32_t tries;
	struct ffm_py_build *b;
	struct ffm_py_decoder *dec;
};

struct ffm_pytrack {
	struct ffm_collector *col;
	const char *proc_root;
	struct oatab procs; /* struct proc; entries of exited processes are reset, not removed */
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
	*ret = t;
	return 0;
}

static void proc_reset(struct proc *p)
{
	p->dec = ffm_py_decoder__free(p->dec);
	free(p->b);
	p->b = NULL;
	p->state = PY_UNKNOWN;
	p->tries = 0;
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
	free(t);
	return NULL;
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

	if (err == -EAGAIN)
		return;
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

/* Look for the process's build; @final: no CPython now means none ever (its driver is in use,
 * so a libpython would be mapped). */
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
	if (pp && pp->state == PY_WALKED && (p->b = malloc(sizeof(*p->b)))) {
		/* A fork: the parent's image, and BPF copied its pyprocs entry. */
		*p->b = *pp->b;
		if (ffm_py_decoder__new((pid_t)tgid, t->proc_root, p->b, &p->dec) == 0) {
			p->state = PY_WALKED;
			return;
		}
		give_up(t, p, tgid, NULL);
		return;
	}
	detect(t, p, tgid, false);
	if (p->state == PY_FOUND)
		check(t, p, tgid);
}

void ffm_pytrack__on_exit(struct ffm_pytrack *t, uint32_t tgid)
{
	struct proc *p = oatab_find(&t->procs, tgid, 0, false);

	if (p)
		proc_reset(p);
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
			struct ffm_store_frame *frames, int n, int max)
{
	struct ffm_py_decoder *dec = on_stack(t, s->hdr.tgid);
	struct ffm_store_frame py[FFM_PY_FRAMES];
	int at = n, np = 0;

	if (!dec || !s->npy)
		return n;
	for (uint32_t i = 0; i < s->npy && i < FFM_PY_FRAMES; i++) {
		struct ffm_py_loc loc;

		if (ffm_py_decoder__frame(dec, s->py[i].code, s->py[i].instr, &loc) < 0)
			continue; /* freed since, or not a code object: no guess */
		py[np++] = (struct ffm_store_frame){
			.build_id = FFM_PY_BUILD_ID, .module = loc.file, .offset = loc.key,
			.func = loc.qualname, .demangled = loc.qualname, .folded = loc.folded,
			.file = loc.file, .line = loc.line,
		};
	}
	for (int i = 0; i < n; i++)
		if (eval_frame(&frames[i])) {
			at = i;
			break;
		}
	if (np > max - n)
		np = max - n;
	memmove(frames + at + np, frames + at, (size_t)(n - at) * sizeof(*frames));
	memcpy(frames + at, py, (size_t)np * sizeof(*frames));
	return n + np;
}

const char *ffm_pytrack__unsupported(const struct ffm_pytrack *t)
{
	return t->unsupported[0] ? t->unsupported : NULL;
}
