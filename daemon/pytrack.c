/* SPDX-License-Identifier: MIT */
/* The Python processes of a job run: see daemon/pytrack.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/oatab.h"
#include "common/util.h"
#include "daemon/collector.h"
#include "daemon/log.h"
#include "daemon/pytrack.h"
#include "daemon/worker.h"
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
	uint64_t joined_ns; /* its last exec or fork (BPF's clock, CLOCK_MONOTONIC); 0: exited */
	bool walking, rewalk; /* an early walk is out for it; asked again meanwhile */
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
	/* Early walks (ffm_pytrack__walk_early): their thread (set before the first walk, read
	 * there), and its stop flag (the walks left give up). */
	struct ffm_worker *early;
	bool early_failed;
	_Atomic bool early_stop;
	/* walks done and not yet taken: the loop looks at the worker only then (its take reads an
	 * eventfd, and take_early runs at every record) */
	_Atomic unsigned early_done;
};

/* An early walk: a process's build found (unless given) and checked, its decoder made and its
 * pyprocs entry put in, on the early walks' thread; installed by ffm_pytrack__take_early. */
struct early_walk {
	uint32_t tgid;
	bool have_build;
	int err;
	uint64_t ns;          /* the thread's time on it */
	uint64_t first_ns, next_ns; /* its first look; the earliest of its next */
	uint64_t cpu0_ns;           /* the process's CPU time at its first look */
	uint64_t walked_ns;         /* when its check passed: after the image's join, or stale */
	const char *proc_root;
	struct ffm_collector *col;
	struct ffm_py_decoder *dec;
	struct ffm_py_build b;
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
	p->joined_ns = 0;
	p->dec = ffm_py_decoder__free(p->dec);
	free(p->b);
	p->b = NULL;
	p->state = PY_UNKNOWN;
	p->tries = p->refusals = 0;
}

static void early_drop(void *res)
{
	struct early_walk *w = res;

	ffm_py_decoder__free(w->dec);
	free(w);
}

struct ffm_pytrack *ffm_pytrack__free(struct ffm_pytrack *t)
{
	if (!t)
		return NULL;
	t->early_stop = true;
	ffm_worker__free(t->early, early_drop);
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

/* Look for the process's build, at a stack: no CPython now means none ever (its driver is in
 * use, so a libpython would be mapped). */
static void detect(struct ffm_pytrack *t, struct proc *p, uint32_t tgid)
{
	char why[512];
	int err;

	if (!p->b && !(p->b = calloc(1, sizeof(*p->b))))
		return;
	err = ffm_py_detect((pid_t)tgid, t->proc_root, p->b, why, sizeof(why));
	if (err == 1)
		p->state = PY_FOUND;
	else
		give_up(t, p, tgid, err == -ENOTSUP ? why : NULL);
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
	/* An exec's new image is looked at by an early walk or its first stack (which open its
	 * files: off the loop), not here. A fork: the parent's image, and BPF copied its pyprocs
	 * entry; its decoder reads its memory through /proc, no file of its user's. A parent
	 * whose build was found but not yet checked (it forked before calling the driver): the
	 * child's is the same build, checked by its early walk or its first stack. */
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

/*
 * How long an early walk looks again, by the process's own progress (its CPU time), so that a
 * loaded machine does not cut it short: ld.so maps a libpython within the first milliseconds of
 * a process's CPU time, and the interpreter runs Python code once initialized (tens of ms;
 * PyTorch's imports come after that). No CPython while the process has run less than
 * EARLY_NONE_CPU_NS (for at most EARLY_NONE_WALL_NS: most processes are not Python, and the
 * walks take turns on one thread), or a build found and not yet checkable while it has run less
 * than EARLY_CPU_NS (for at most EARLY_WALL_NS): look again after EARLY_GAP_NS. Then the stacks
 * look, as without early walks.
 */
#define EARLY_GAP_NS (2 * 1000 * 1000ull)
#define EARLY_NONE_CPU_NS (10 * 1000 * 1000ull)
#define EARLY_CPU_NS (500 * 1000 * 1000ull)
#define EARLY_WALL_NS (2000 * 1000 * 1000ull)
#define EARLY_NONE_WALL_NS (100 * 1000 * 1000ull)
#define EARLY_MAX 256 /* walks queued at once; beyond, the stacks look */

/* The CPU time process @pid has run, ns (/proc/PID/schedstat); UINT64_MAX when unknown. */
static uint64_t cpu_ns(const char *proc_root, uint32_t pid)
{
	char path[64], buf[96];
	unsigned long long ns;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%u/schedstat", proc_root ? proc_root : "/proc", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return UINT64_MAX;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return UINT64_MAX;
	buf[n] = 0;
	return sscanf(buf, "%llu", &ns) == 1 ? ns : UINT64_MAX;
}

/* One look: 0 walked; -EAGAIN look again (if the process is young enough); other -errno: give
 * up (the stacks look). @none: no CPython in it (yet). */
static int early_try(struct early_walk *w, bool *none)
{
	char why[256];
	int err, n;

	*none = !w->have_build;
	if (!w->have_build) {
		n = ffm_py_detect((pid_t)w->tgid, w->proc_root, &w->b, why, sizeof(why));
		if (n == 0)
			return -EAGAIN;
		if (n < 0)
			return n == -EAGAIN ? -EIO : n;
		w->have_build = true;
		*none = false;
	}
	err = ffm_py_verify((pid_t)w->tgid, w->proc_root, &w->b, why, sizeof(why));
	if (err == -EAGAIN || err == -EPROTO)
		return -EAGAIN; /* not yet, or one moment's refusal: the stacks decide on refusals */
	w->walked_ns = ffm_now_ns();
	if (!err)
		err = ffm_py_decoder__new((pid_t)w->tgid, w->proc_root, &w->b, &w->dec);
	if (!err)
		err = ffm_collector__set_python(w->col, w->tgid, &w->b.bpf);
	return err == -EAGAIN ? -EIO : err;
}

/* On the early walks' thread: touches nothing of the pytrack's but its stop flag (the loop
 * and the unwinder's worker use it meanwhile); the pyprocs entry is a map update, safe from
 * any thread. */
/*
 * One look at a walk; one that must look again goes to the back of the queue, so that the
 * walks take turns (most processes are not Python: none may hold up the next one's).
 */
static void *early_run(void *req, void *ctx)
{
	struct ffm_pytrack *t = ctx; /* only its thread, stop flag and done count */
	struct early_walk *w = req;
	uint64_t t0 = ffm_now_ns(), cpu;
	bool none;

	if (t0 < w->next_ns) {
		nanosleep(&(struct timespec){ .tv_nsec = (long)(w->next_ns - t0) }, NULL);
		t0 = ffm_now_ns();
	}
	if (!w->first_ns) {
		w->first_ns = t0;
		w->cpu0_ns = cpu_ns(w->proc_root, w->tgid);
	}
	w->err = t->early_stop ? -ECANCELED : early_try(w, &none);
	w->ns += ffm_now_ns() - t0; /* the looks, not the gaps */
	if (w->err != -EAGAIN ||
	    t0 - w->first_ns > (none ? EARLY_NONE_WALL_NS : EARLY_WALL_NS) ||
	    (cpu = cpu_ns(w->proc_root, w->tgid)) == UINT64_MAX || w->cpu0_ns == UINT64_MAX ||
	    cpu - w->cpu0_ns > (none ? EARLY_NONE_CPU_NS : EARLY_CPU_NS)) {
		t->early_done++; /* before the worker lists it: a take may find it a moment later */
		return w;
	}
	w->next_ns = t0 + EARLY_GAP_NS;
	ffm_worker__submit(t->early, w); /* full: freed there (the stacks look) */
	return NULL;
}

void ffm_pytrack__walk_early(struct ffm_pytrack *t, uint32_t tgid, uint32_t ptgid,
			     uint64_t joined_ns)
{
	struct proc *p = oatab_find(&t->procs, tgid, 0, false);
	struct proc *pp = ptgid ? oatab_find(&t->procs, ptgid, 0, false) : NULL;
	struct early_walk *w;

	if (t->off || !t->col || t->early_failed || !p)
		return;
	p->joined_ns = joined_ns ? joined_ns : 1;
	if (p->state != PY_UNKNOWN && p->state != PY_FOUND)
		return;
	if (p->walking) { /* the walk out looks at its current image; asked again if it fails */
		p->rewalk = true;
		return;
	}
	if (!t->early && ffm_worker__new(EARLY_MAX, early_run, t, &t->early) < 0) {
		t->early_failed = true; /* the stacks look, as without early walks */
		return;
	}
	if (!(w = calloc(1, sizeof(*w))))
		return;
	*w = (struct early_walk){ .tgid = tgid, .proc_root = t->proc_root, .col = t->col };
	/* A build already found for it (at its exec) or for the parent it forked from. */
	if (p->b && p->state == PY_FOUND)
		w->b = *p->b, w->have_build = true;
	else if (pp && pp->b && (pp->state == PY_FOUND || pp->state == PY_WALKED))
		w->b = *pp->b, w->have_build = true;
	/* full (-ENOSPC): freed there; the stacks look */
	p->walking = ffm_worker__submit(t->early, w) == 0;
}

/* Install what an early walk found, if it walked the process's current image. */
static void take_one(struct ffm_pytrack *t, struct proc *p, struct early_walk *w)
{
	bool current = p && p->joined_ns && w->walked_ns >= p->joined_ns;

	if (p)
		p->walking = false;
	if (!w->err && current && (p->state == PY_UNKNOWN || p->state == PY_FOUND) &&
	    (p->b || (p->b = malloc(sizeof(*p->b))))) {
		*p->b = w->b;
		p->dec = w->dec;
		w->dec = NULL;
		p->state = PY_WALKED;
		/* again: the result of a walk of an older image may have taken it out */
		ffm_collector__set_python(t->col, w->tgid, &p->b->bpf);
	} else if (!w->err && !current && (!p || p->state != PY_WALKED)) {
		/* it exec'd or exited after the check: its entry, if BPF did not drop it, is not
		 * this image's (a later walk puts the right one back) */
		ffm_collector__set_python(t->col, w->tgid, NULL);
	}
}

uint64_t ffm_pytrack__take_early(struct ffm_pytrack *t)
{
	struct early_walk *w;
	uint64_t ns = 0;

	while (t->early && t->early_done && (w = ffm_worker__take(t->early))) {
		uint32_t tgid = w->tgid;
		struct proc *p = oatab_find(&t->procs, tgid, 0, false);

		t->early_done--;
		take_one(t, p, w);
		ns += w->ns;
		early_drop(w);
		if (p && p->rewalk && p->joined_ns) {
			p->rewalk = false;
			ffm_pytrack__walk_early(t, tgid, 0, p->joined_ns);
		}
	}
	return ns;
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
			detect(t, p, tgid);
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
