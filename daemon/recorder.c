/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bpf/ffm.h"
#include "common/oatab.h"
#include "common/util.h"
#include "daemon/apis.h"
#include "daemon/collector.h"
#include "daemon/memtrace.h"
#include "daemon/pytrack.h"
#include "daemon/recorder.h"
#include "daemon/records.h"
#include "daemon/unwinder.h"
#include "store/ffm_store.h"
#include "symbols/ffm_driver.h"
#include "symbols/ffm_stack.h"

#define MAX_FRAMES FFM_UNWIND_MAX_FRAMES
/* machine frames and the functions inlined into them */
#define MAX_STORE_FRAMES (2 * MAX_FRAMES)
_Static_assert(FFM_LIB_FRAMES + 1 <= FFM_UNWIND_MAX_FRAMES, "a stack's BPF frames fit a request");

/* (stack key, tgid) -> store stack id + attributed API. */
struct key_ent {
	struct oa_key k; /* a: stack key, b: tgid */
	uint32_t api;	 /* store api id of the public function that waits, 0 = none */
	int64_t stack;
	/* CPU samples of the key (a Python stack), per enum ffm_sample_state, until the run ends */
	uint64_t cpu_ns[FFM_SAMPLE__MAX];
	uint32_t cpu_n[FFM_SAMPLE__MAX];
};

struct proc_ent {
	struct oa_key k; /* a: tgid */
	struct ffm_addr_space *as;
};

/* A thread given to put_thread, and its waits counted for its schedule mode (store v12). */
struct tid_ent {
	struct oa_key k; /* a: tid */
	uint32_t tgid;
	uint64_t waits, slept; /* not yet added to the store */
};

struct kernel_ent {
	struct oa_key k; /* a: handle, b: tgid */
	char name[FFM_FUNC_NAME];
};

struct ffm_recorder {
	struct ffm_recorder_opts o;
	struct oatab keys;  /* struct key_ent */
	struct oatab procs; /* struct proc_ent */
	struct oatab tids;  /* struct tid_ent: threads already given to put_thread */
	uint32_t *api_ids; /* collector api id -> store api id, 0 = not yet named */
	struct ffm_recorder_stats st;
	struct ffm_store_frame sframes[MAX_STORE_FRAMES + FFM_PY_FRAMES];
	struct ffm_pytrack *py; /* the Python frames of its processes */
	struct oatab named;	/* struct oa_key (a: store api id): names given to the store */
	struct oatab kernels;	/* struct kernel_ent: kernel names given to the store */
	struct ffm_run_limits lim;
	uint64_t stored_stacks, codes;
	double tokens;   /* new stacks the rate allows now (limits.stacks_per_s) */
	uint64_t tok_ns; /* when tokens was last filled */
	bool full;       /* the store reached its bytes: records are counted, not stored */
	char *cut[(MAX_STORE_FRAMES + FFM_PY_FRAMES) * 5]; /* copies cut to string_bytes */
	int ncut;
	/* The stack on the unwinder's worker (busy), kept for the next one: one at a time. */
	bool busy;
	struct stack_req *req;
	size_t req_size;
	/* The records that came since, oldest first: at head .. tail of held, each a struct held
	 * and its bytes, 8-aligned. Grown, compacted, never shrunk while the run lasts. */
	uint8_t *held;
	size_t held_cap, held_head, held_tail;
	int err; /* the first store failure of a held record, returned by the next call */
	/* Called once the stack on the unwinder and the records held behind it are stored (a
	 * run's end that does not wait: ffm_recorder__on_idle). */
	void (*on_idle)(void *ctx);
	void *idle_ctx;
};

struct held {
	uint64_t size;
	uint64_t rec[]; /* the record's bytes (8-aligned, as in the ring buffer) */
};

/* A stack record's copy and its unwinding (daemon/unwinder.h). */
struct stack_req {
	struct ffm_unwind_req u;
	struct ffm_recorder *r;
	int npy; /* its Python frames (stack_pre) */
	struct ffm_store_frame py[FFM_PY_FRAMES];
	uint64_t rec[]; /* struct ffm_rec_stack */
};

/* ---- stack keys, processes, threads ------------------------------------------------------ */

static struct key_ent *key_find(struct ffm_recorder *r, uint32_t tgid, uint64_t key, bool insert)
{
	return key ? oatab_find(&r->keys, key, tgid, insert) : NULL; /* 0: no stack */
}

static struct proc_ent *proc_find(struct ffm_recorder *r, uint32_t tgid, bool insert)
{
	return oatab_find(&r->procs, tgid, 0, insert);
}

/* @tid's waits of @dur_ns in all, @n of them, @slept slept in: counted when they are long
 * enough for a blocking context to sleep (FFM_STORE_WAIT_MODE_NS). */
static int note_thread(struct ffm_recorder *r, uint32_t tgid, uint32_t tid, uint64_t dur_ns,
		       uint32_t n, uint32_t slept)
{
	struct tid_ent *t = oatab_find(&r->tids, tid, 0, false);

	if (!t) {
		int err = ffm_store__put_thread(r->o.store, r->o.run, tgid, tid);

		if (err < 0)
			return err;
		if (!(t = oatab_find(&r->tids, tid, 0, true)))
			return -ENOMEM;
		t->tgid = tgid;
	}
	if (n && dur_ns >= FFM_STORE_WAIT_MODE_NS * (uint64_t)n) {
		t->waits += n;
		t->slept += slept < n ? slept : n;
	}
	return 0;
}

/* The threads' wait counts into the store (at the run's end). */
static int flush_thread_waits(struct ffm_recorder *r)
{
	for (size_t i = 0; i < r->tids.cap; i++) {
		struct tid_ent *t = oatab_slot(&r->tids, i);
		int err;

		if (!t || !t->waits)
			continue;
		err = ffm_store__add_thread_waits(r->o.store, r->o.run, t->tgid, (uint32_t)t->k.a,
						  t->waits, t->slept);
		if (err < 0)
			return err;
		t->waits = t->slept = 0;
	}
	return 0;
}

static struct ffm_addr_space *addr_space(struct ffm_recorder *r, uint32_t tgid)
{
	struct proc_ent *p = proc_find(r, tgid, true);
	struct ffm_addr_space_opts ao = { .sz = sizeof(ao), .proc_root = r->o.proc_root };

	if (!p)
		return NULL;
	if (!p->as && ffm_addr_space__new(tgid, &ao, &p->as) < 0)
		p->as = NULL;
	return p->as;
}

static void read_exe(struct ffm_recorder *r, uint32_t tgid, char *buf, size_t len)
{
	char path[64];
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%u/exe", r->o.proc_root ? r->o.proc_root : "/proc", tgid);
	n = readlink(path, buf, len - 1);
	buf[n > 0 ? n : 0] = 0;
}

/* ---- stacks ------------------------------------------------------------------------------- */

static bool is_driver_frame(const struct ffm_recorder *r, const struct ffm_sym *s)
{
	if (r->o.driver_build_id && *r->o.driver_build_id && s->build_id && *s->build_id)
		return !strcmp(s->build_id, r->o.driver_build_id);
	return ffm_module_owner(s->module) == FFM_MODULE_DRIVER;
}

/* Give the store the name of api @id once per run: each put_api_name commits the open batch
 * (store/jobs.c), and a flood of new stacks must not cost a commit each. */
static void name_api(struct ffm_recorder *r, uint32_t id, const char *name)
{
	if (oatab_find(&r->named, id, 0, false))
		return;
	if (ffm_store__put_api_name(r->o.store, id, name) == 0)
		oatab_find(&r->named, id, 0, true);
}

/* Store api id of the public driver function a symbol names (interned in the store). */
static uint32_t api_of_symbol(struct ffm_recorder *r, const char *name)
{
	char base[256];
	uint32_t id;

	if (!name || strncmp(name, "cu", 2))
		return 0;
	ffm_api_base_name(name, base, sizeof(base));
	id = ffm_store_api_id(base);
	name_api(r, id, base);
	return id;
}

/*
 * A symbolized machine frame as store frames at frames[m]: the functions inlined there first
 * (innermost first), then the machine frame, whose line is then the outermost call's. Inlined
 * frames that do not fit are left out (the machine frame always gets its slot). Returns the
 * new count.
 */
static int put_sym_frames(struct ffm_store_frame *frames, int m, int max, const struct ffm_sym *sym)
{
	const char *bid = sym->build_id && *sym->build_id ? sym->build_id : NULL;

	for (int k = 0; k < sym->n_inlined && m < max - 1; k++) {
		const struct ffm_sym_inline *in = &sym->inlined[k];

		frames[m++] = (struct ffm_store_frame){
			.build_id = bid, .module = sym->module, .offset = sym->offset,
			.func = in->name, .demangled = in->function, .folded = in->folded,
			.file = in->file, .line = in->line > 0 ? in->line : 0,
			.inlined = (uint32_t)(sym->n_inlined - k),
		};
	}
	frames[m++] = (struct ffm_store_frame){
		.build_id = bid, .module = sym->module, .offset = sym->offset, .func = sym->name,
		.demangled = sym->function, .folded = sym->folded, .file = sym->file,
		.line = sym->line > 0 ? sym->line : 0,
	};
	return m;
}

/* Whether a new stack may be stored now (limits.stacks, stacks_per_s): a token bucket. */
static bool stack_admitted(struct ffm_recorder *r)
{
	const struct ffm_run_limits *l = &r->lim;

	if (l->stacks && r->stored_stacks >= l->stacks)
		return false;
	if (l->stacks_per_s) {
		uint64_t now = ffm_now_ns();
		double burst = (double)l->stacks_per_s * FFM_STACK_BURST_S;

		r->tokens += (double)(now - r->tok_ns) / 1e9 * l->stacks_per_s;
		r->tok_ns = now;
		if (r->tokens > burst)
			r->tokens = burst;
		if (r->tokens < 1)
			return false;
		r->tokens -= 1;
	}
	r->stored_stacks++;
	return true;
}

/* *@sp cut to limits.string_bytes (at a UTF-8 character's start, "..." appended), as a copy
 * kept until cuts_free. */
static void cut_string(struct ffm_recorder *r, const char **sp)
{
	size_t max = r->lim.string_bytes, n;
	char *c;

	if (!*sp || !max || strnlen(*sp, max + 1) <= max ||
	    r->ncut == (int)(sizeof(r->cut) / sizeof(r->cut[0])))
		return;
	n = max > 3 ? max - 3 : max;
	while (n > 0 && ((unsigned char)(*sp)[n] & 0xc0) == 0x80)
		n--;
	c = malloc(n + 4);
	if (!c)
		return;
	memcpy(c, *sp, n);
	memcpy(c + n, "...", 4);
	r->cut[r->ncut++] = c;
	*sp = c;
	r->st.strings_cut++;
}

static void cut_frames(struct ffm_recorder *r, struct ffm_store_frame *f, int n)
{
	for (int i = 0; i < n; i++) {
		cut_string(r, &f[i].module);
		cut_string(r, &f[i].func);
		cut_string(r, &f[i].demangled);
		cut_string(r, &f[i].folded);
		cut_string(r, &f[i].file);
	}
}

static void cuts_free(struct ffm_recorder *r)
{
	while (r->ncut)
		free(r->cut[--r->ncut]);
}

/* Learned slots: where the frames above the call site keep their return addresses, relative
 * to the call site's own slot (bpf/ffm.h). */
static void learn_slots(struct ffm_recorder *r, const struct ffm_rec_stack *s,
			const struct ffm_frame *frames, int n)
{
	int32_t off[FFM_LEARNED_SLOTS];
	uint32_t k = 0;
	int ci = -1;

	if (!r->o.collector || !s->callsite || !s->callsite_slot)
		return;
	for (int i = 0; i < n; i++)
		if (frames[i].pc == s->callsite) {
			ci = i;
			break;
		}
	for (int i = ci; ci >= 0 && i < n && k < FFM_LEARNED_SLOTS; i++) {
		int64_t d = (int64_t)(frames[i].ra_slot - s->callsite_slot);

		if (!frames[i].ra_slot || d <= 0 || d > INT32_MAX)
			break;
		off[k++] = (int32_t)d;
	}
	if (k)
		ffm_collector__learn_slots(r->o.collector, s->hdr.tgid, s->callsite, off, k);
}

/* The unwound stack of @q (ffm_unwind_run done) into the store, on the caller's thread. */
static int stack_finish(struct ffm_recorder *r, struct stack_req *q)
{
	const struct ffm_rec_stack *s = (const void *)q->rec;
	struct ffm_frame *frames = q->u.frames;
	struct key_ent *ke = key_find(r, s->hdr.tgid, s->stack_key, true);
	int n = q->u.n, nall = 0, outer_lib = -1, err;
	uint64_t t0 = ffm_now_ns(), t1;
	uint32_t api = 0;
	int64_t stack_id = 0;

	if (!ke)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		const struct ffm_sym *sym = q->u.syms[i];

		if (!sym) {
			r->sframes[nall++] = (struct ffm_store_frame){ .module = "[unknown]",
								       .offset = frames[i].pc };
			continue;
		}
		nall = put_sym_frames(r->sframes, nall, MAX_STORE_FRAMES, sym);
		if (is_driver_frame(r, sym))
			outer_lib = nall - 1;
	}
	if (outer_lib >= 0)
		api = api_of_symbol(r, r->sframes[outer_lib].func);
	/* The unwinding and symbols, wherever they ran (the unwinder's worker: q->u.ns). */
	t1 = ffm_now_ns();
	ffm_overhead_add(r->o.price, FFM_OVERHEAD_SYMBOLS, q->u.ns + (t1 - t0));
	nall = ffm_pytrack__insert(r->sframes, nall, MAX_STORE_FRAMES + FFM_PY_FRAMES, q->py, q->npy);
	ffm_overhead_add(r->o.price, FFM_OVERHEAD_PYCHECK, q->u.pre_ns + (ffm_now_ns() - t1));
	if (nall > 0) {
		cut_frames(r, r->sframes, nall);
		err = ffm_store__put_stack(r->o.store, ffm_store_stack_hash(r->sframes, nall),
					   r->sframes, nall, &stack_id);
		cuts_free(r);
		if (err < 0)
			return err;
	}
	ke->stack = stack_id;
	ke->api = api;
	learn_slots(r, s, frames, n);
	return 0;
}

static int dispatch(struct ffm_recorder *r, const void *rec, size_t size);

/*
 * Where the stack is unwound (the unwinder's worker, else in place): its Python frames, the
 * process's build looked for and checked first if it is not settled (its files opened, its
 * memory read: daemon/pytrack.h). The run's later records wait meanwhile (replay), so nothing
 * else touches r->py.
 */
static void stack_pre(struct ffm_unwind_req *u)
{
	struct stack_req *q = (struct stack_req *)u;

	q->npy = ffm_pytrack__frames(q->r->py, (const void *)q->rec, q->py, FFM_PY_FRAMES);
}

/* What the early Python walks found (daemon/pytrack.h), installed before each record is
 * dispatched: the unwinder's worker is not using r->py then (no stack of the run is there). */
static void take_early(struct ffm_recorder *r)
{
	uint64_t ns = ffm_pytrack__take_early(r->py);

	if (ns)
		ffm_overhead_add(r->o.price, FFM_OVERHEAD_PYCHECK, ns);
}

/* The records held behind a stack, in order, until none is left or another stack goes out. */
static void replay(struct ffm_recorder *r)
{
	while (!r->busy && r->held_head < r->held_tail) {
		struct held *h = (struct held *)(r->held + r->held_head);
		int err;

		r->held_head += sizeof(*h) + ((h->size + 7) & ~(uint64_t)7);
		err = dispatch(r, h->rec, h->size);
		if (err < 0 && !r->err)
			r->err = err;
	}
	if (r->held_head == r->held_tail)
		r->held_head = r->held_tail = 0;
}

/* After a request's callback: the records behind it, then, if the run waits for them to end,
 * its end (which may free @r: the caller touches it no more). */
static void resume(struct ffm_recorder *r)
{
	void (*fn)(void *ctx) = r->on_idle;

	r->busy = false;
	replay(r);
	if (!r->busy && fn) {
		r->on_idle = NULL;
		fn(r->idle_ctx);
	}
}

/* On the loop: a stack the unwinder's worker is done with. */
static void stack_done(struct ffm_unwind_req *u)
{
	struct stack_req *q = (struct stack_req *)u;
	struct ffm_recorder *r = q->r;
	int err = stack_finish(r, q);

	if (err < 0 && !r->err)
		r->err = err;
	resume(r);
}

/* Room for @need more bytes at held's tail: 0, or -ENOSPC past FFM_HELD_MAX_BYTES. */
static int held_room(struct ffm_recorder *r, size_t need)
{
	size_t live = r->held_tail - r->held_head, cap = r->held_cap ? r->held_cap : 1 << 16;
	uint8_t *b;

	if (r->held_tail + need <= r->held_cap)
		return 0;
	if (live + need > FFM_HELD_MAX_BYTES)
		return -ENOSPC;
	if (live) /* held is NULL before the first record: memmove(NULL, ...) is undefined */
		memmove(r->held, r->held + r->held_head, live);
	r->held_head = 0;
	r->held_tail = live;
	if (live + need <= r->held_cap)
		return 0;
	while (cap < live + need)
		cap *= 2;
	b = realloc(r->held, cap);
	if (!b)
		return -ENOMEM;
	r->held = b;
	r->held_cap = cap;
	return 0;
}

static int hold(struct ffm_recorder *r, const void *rec, size_t size)
{
	size_t need = sizeof(struct held) + ((size + 7) & ~(size_t)7);
	struct held *h;

	if (held_room(r, need) < 0) {
		r->st.not_stored++; /* counted: the run says it lost records */
		return 0;
	}
	h = (struct held *)(r->held + r->held_tail);
	h->size = size;
	memcpy(h->rec, rec, size);
	r->held_tail += need;
	return 0;
}

/* Wait for the run's stack on the unwinder (and the records held behind it) to be stored. */
static void drain(struct ffm_recorder *r)
{
	r->on_idle = NULL; /* the caller goes on once this returns */
	while (r->busy && ffm_unwinder__wait(r->o.unwinder) == 0)
		;
	if (r->busy) { /* never: the worker lost the request */
		r->busy = false;
		r->req = NULL;
		replay(r);
	}
}

/* The recorder's one stack request, with room for a record of @size bytes. */
static struct stack_req *stack_req(struct ffm_recorder *r, size_t size)
{
	if (!r->req || r->req_size < size) {
		free(r->req);
		r->req_size = size > sizeof(struct ffm_rec_stack) ? size
							       : sizeof(struct ffm_rec_stack);
		r->req = malloc(sizeof(*r->req) + r->req_size);
		if (!r->req)
			return NULL;
	}
	return r->req;
}

static int on_stack(struct ffm_recorder *r, const struct ffm_rec_stack *s, size_t size)
{
	struct key_ent *ke = key_find(r, s->hdr.tgid, s->stack_key, true);
	struct stack_req *q;

	r->st.stacks++;
	if (!ke)
		return -ENOMEM;
	/* Past a bound nothing of the stack is looked at: its calls are stored without it. */
	if (r->full || !stack_admitted(r)) {
		ke->stack = 0;
		ke->api = 0;
		if (r->full)
			r->st.not_stored++;
		else
			r->st.stacks_capped++;
		return 0;
	}
	if (size < sizeof(*s) || !(q = stack_req(r, size)))
		return -ENOMEM;
	memcpy(q->rec, s, size);
	s = (const void *)q->rec;
	q->r = r;
	q->u = (struct ffm_unwind_req){
		.done = stack_done, .pre = stack_pre, .owner = r, .as = addr_space(r, s->hdr.tgid),
		.snap = { .tgid = s->hdr.tgid, .ip = s->ip, .sp = s->sp, .bp = s->bp,
			  .stack = s->stack,
			  .stack_len = s->stack_len < FFM_STACK_BYTES ? s->stack_len
								      : FFM_STACK_BYTES },
	};
	/* Process gone or no CFI: what BPF saw is kept (libcuda frames + call site). */
	for (uint32_t i = 0; i < s->nlib && i < FFM_LIB_FRAMES; i++)
		q->u.pcs[q->u.npcs++] = s->lib[i];
	if (s->callsite)
		q->u.pcs[q->u.npcs++] = s->callsite;
	if (!r->o.unwinder) {
		ffm_unwind_run(r->o.sym, &q->u);
		return stack_finish(r, q);
	}
	ke->stack = 0;
	ke->api = 0;
	if (ffm_unwinder__submit(r->o.unwinder, &q->u) < 0) {
		r->req = NULL; /* freed by the worker */
		r->st.not_stored++; /* never: the queue holds one request per run */
		return 0;
	}
	r->busy = true;
	return 0;
}

/* ---- events ------------------------------------------------------------------------------- */

static uint32_t store_api(struct ffm_recorder *r, uint32_t api)
{
	const struct ffm_api_desc *d = ffm_apis__get(r->o.apis, api);

	if (!d)
		return 0;
	if (!r->api_ids[api]) {
		r->api_ids[api] = ffm_store_api_id(d->name);
		name_api(r, r->api_ids[api], d->name);
	}
	return r->api_ids[api];
}

/* The store's event kind (FFM_EV_API for syncs and others) and direction of an API's. */
static uint32_t event_kind(unsigned kind)
{
	static const uint8_t ev[FFM_KIND_OTHER + 1] = {
		[FFM_KIND_WAIT] = FFM_EV_WAIT,	   [FFM_KIND_MEMCPY] = FFM_EV_TRANSFER,
		[FFM_KIND_ALLOC] = FFM_EV_ALLOC,   [FFM_KIND_FREE] = FFM_EV_FREE,
		[FFM_KIND_MEMSET] = FFM_EV_MEMSET, [FFM_KIND_LAUNCH] = FFM_EV_LAUNCH,
	};

	return kind <= FFM_KIND_OTHER && ev[kind] ? ev[kind] : FFM_EV_API;
}

static uint32_t store_dir(unsigned d)
{
	static const uint8_t dir[FFM_REC_DIR_ANY + 1] = {
		[FFM_REC_DIR_HTOD] = FFM_DIR_HTOD, [FFM_REC_DIR_DTOH] = FFM_DIR_DTOH,
		[FFM_REC_DIR_DTOD] = FFM_DIR_DTOD, [FFM_REC_DIR_HTOH] = FFM_DIR_HTOH,
	};

	return d <= FFM_REC_DIR_ANY ? dir[d] : FFM_DIR_NONE; /* ANY: not known here */
}

static int64_t resolve_key(struct ffm_recorder *r, uint32_t tgid, uint64_t key, uint32_t *api)
{
	struct key_ent *ke = key_find(r, tgid, key, false);

	if (!key)
		return 0;
	if (!ke) {
		/* Its stack record was lost (ring buffer full): counted, never guessed. */
		r->st.unknown_keys++;
		return 0;
	}
	if (api)
		*api = ke->api;
	return ke->stack;
}

static int on_wait(struct ffm_recorder *r, const struct ffm_rec_wait *w)
{
	struct ffm_store_event ev = {
		.run = r->o.run, .kind = FFM_EV_WAIT, .tgid = w->hdr.tgid, .tid = w->hdr.tid,
		.start_ns = w->start_ns, .dur_ns = w->dur_ns, .wait_ns = w->dur_ns,
	};
	int err;

	if (r->full) {
		r->st.not_stored++;
		return 0;
	}
	err = note_thread(r, w->hdr.tgid, w->hdr.tid, w->dur_ns, 1,
			  (w->flags & FFM_WAIT_SLEPT) != 0);
	if (err < 0)
		return err;
	r->st.waits++;
	ev.stack = resolve_key(r, w->hdr.tgid, w->stack_key, &ev.api);
	if (!r->o.memtrace)
		return ffm_store__put_event(r->o.store, &ev, NULL);
	err = ffm_store__put_event(r->o.store, &ev, &ev.id);
	if (err < 0)
		return err;
	return ffm_memtrace__on_wait(r->o.memtrace, w, ev.id, ev.stack);
}

static int on_call(struct ffm_recorder *r, const struct ffm_rec_call *c)
{
	const struct ffm_api_desc *d = ffm_apis__get(r->o.apis, c->api_id);
	struct ffm_store_event ev = {
		.run = r->o.run, .tgid = c->hdr.tgid, .tid = c->hdr.tid,
		.start_ns = c->start_ns, .dur_ns = c->dur_ns, .wait_ns = c->wait_ns,
		.bytes = c->bytes, .stream = c->stream, .src = c->src, .dst = c->dst,
		.flags = (uint32_t)c->ret, /* CUresult: nonzero = the call failed */
		.probe_ns = c->probe_ns,
	};
	int err;

	if (r->full) {
		r->st.not_stored++;
		return 0;
	}
	err = note_thread(r, c->hdr.tgid, c->hdr.tid, c->wait_ns, c->nwaits, c->nslept);
	if (err < 0)
		return err;
	r->st.calls++;
	ffm_pytrack__on_thread(r->py, c->hdr.tgid, c->hdr.tid);
	if (!d)
		return 0;
	ev.kind = event_kind(d->kind);
	ev.dir = store_dir(d->dir);
	ev.api = store_api(r, c->api_id);
	ev.stack = resolve_key(r, c->hdr.tgid, c->stack_key, NULL);
	if (!r->o.memtrace)
		return ffm_store__put_event(r->o.store, &ev, NULL);
	err = ffm_store__put_event(r->o.store, &ev, &ev.id);
	if (err < 0)
		return err;
	return ffm_memtrace__on_call(r->o.memtrace, c, &(struct ffm_memtrace_call){
		.event = ev.id, .stack = ev.stack, .kind = d->kind, .name = d->name,
	});
}

/* A CPU sample: summed per key until the run ends (ffm_recorder__end). */
static int on_sample(struct ffm_recorder *r, const struct ffm_rec_sample *x)
{
	struct key_ent *ke = key_find(r, x->hdr.tgid, x->stack_key, false);

	if (!ke || !ke->stack || x->state >= FFM_SAMPLE__MAX)
		return 0; /* its stack record was lost: nothing to name it by */
	ke->cpu_ns[x->state] += x->period_ns;
	ke->cpu_n[x->state]++;
	return 0;
}

bool ffm_recorder__idle(const struct ffm_recorder *r)
{
	return !r->busy;
}

void ffm_recorder__on_idle(struct ffm_recorder *r, void (*fn)(void *ctx), void *ctx)
{
	r->on_idle = fn;
	r->idle_ctx = ctx;
}

int ffm_recorder__end(struct ffm_recorder *r)
{
	int err;

	drain(r);
	if (r->err) {
		err = r->err;
		r->err = 0;
		return err;
	}
	err = flush_thread_waits(r);
	if (err < 0)
		return err;
	for (size_t i = 0; i < r->keys.cap; i++) {
		struct key_ent *ke = oatab_slot(&r->keys, i);

		for (uint32_t st = 0; ke && st < FFM_SAMPLE__MAX; st++) {
			if (!ke->cpu_n[st])
				continue;
			err = ffm_store__add_cpu_samples(r->o.store, r->o.run,
							 &(struct ffm_store_cpu_samples){
				.stack = ke->stack, .state = st, .n = ke->cpu_n[st], .ns = ke->cpu_ns[st] });
			if (err < 0)
				return err;
			ke->cpu_n[st] = 0;
			ke->cpu_ns[st] = 0;
		}
	}
	return 0;
}

/* Stages 3-4 (@st, daemon/records.h): a DtoH copy's destination, a transfer's hash, a
 * watchpoint hit. */
static int on_memtrace(struct ffm_recorder *r, enum ffm_rec_store st, const void *rec)
{
	const struct ffm_rec_hdr *h = rec;
	struct key_ent *ke;

	if (!r->o.memtrace)
		return 0;
	if (r->full) {
		r->st.not_stored++;
		return 0;
	}
	if (st == FFM_STORE_XFER)
		return ffm_memtrace__on_xfer(r->o.memtrace, rec);
	if (st == FFM_STORE_RANGE) {
		const struct ffm_rec_range *rr = rec;

		/* Sent at the copy's entry: the first time, its stack is not known yet. */
		ke = key_find(r, h->tgid, rr->stack_key, false);
		return ffm_memtrace__on_range(r->o.memtrace, rr, ke ? ke->stack : 0);
	}
	if (st == FFM_STORE_FAULT)
		return ffm_memtrace__on_fault(r->o.memtrace, rec);
	const struct ffm_rec_hit *hit = rec;

	return ffm_memtrace__on_hit(r->o.memtrace, hit, resolve_key(r, h->tgid, hit->stack_key, NULL));
}

static int on_proc(struct ffm_recorder *r, const struct ffm_rec_proc *p)
{
	struct proc_ent *pe;
	char exe[PATH_MAX];
	uint64_t t0, t1;

	if (p->hdr.type == FFM_REC_EXIT) {
		ffm_pytrack__on_exit(r->py, p->hdr.tgid);
		if (r->o.collector)
			ffm_collector__forget_process(r->o.collector, p->hdr.tgid);
		if (r->o.memtrace) {
			int err = ffm_memtrace__on_exit(r->o.memtrace, p->hdr.tgid);

			if (err < 0)
				return err;
		}
		/* -ENOENT: a tracked process that never exec'd anything (its exec failed) */
		int err = ffm_store__process_exit(r->o.store, r->o.run, p->hdr.tgid, p->hdr.ts_ns,
						  (int32_t)p->exit_code);

		return err == -ENOENT ? 0 : err;
	}
	pe = proc_find(r, p->hdr.tgid, true);
	if (!pe)
		return -ENOMEM;
	/* A new image (exec) has a new address space. */
	pe->as = ffm_addr_space__free(pe->as);
	t0 = ffm_now_ns();
	ffm_pytrack__on_proc(r->py, p->hdr.tgid, p->hdr.type == FFM_REC_FORK ? p->ppid : 0);
	ffm_pytrack__walk_early(r->py, p->hdr.tgid, p->hdr.type == FFM_REC_FORK ? p->ppid : 0,
				p->hdr.ts_ns);
	t1 = ffm_now_ns();
	ffm_overhead_add(r->o.price, FFM_OVERHEAD_PYCHECK, t1 - t0);
	read_exe(r, p->hdr.tgid, exe, sizeof(exe));
	ffm_overhead_add(r->o.price, FFM_OVERHEAD_PROCFS, ffm_now_ns() - t1);
	return ffm_store__put_process(r->o.store, &(struct ffm_store_process){
		.run = r->o.run, .tgid = p->hdr.tgid, .ptgid = p->ppid,
		.exe = *exe ? exe : p->comm, .start_ns = p->hdr.ts_ns, .exit_code = 0,
	});
}

/* A kernel's handle and name as the program got it (FFM_REC_FUNC): kept per process, so that
 * another form of the handle (cuKernelGetFunction's) gets its name; stored once. */
static int on_func(struct ffm_recorder *r, const struct ffm_rec_func *f)
{
	char name[FFM_FUNC_NAME];
	struct kernel_ent *e;

	if (!f->handle || r->full)
		return 0;
	if (f->alias) {
		const struct kernel_ent *from = oatab_get(&r->kernels, f->alias, f->hdr.tgid);

		if (!from)
			return 0; /* the handle it is another form of was not named */
		memcpy(name, from->name, sizeof(name));
	} else {
		size_t n = f->name_len < sizeof(name) ? f->name_len : sizeof(name) - 1;

		if (!n)
			return 0;
		memcpy(name, f->name, n);
		name[n] = 0;
	}
	e = oatab_get(&r->kernels, f->handle, f->hdr.tgid);
	if (e && !strcmp(e->name, name))
		return 0;
	if (!e && r->kernels.n >= FFM_MAX_KERNEL_NAMES) {
		r->st.kernels_capped++;
		return 0;
	}
	if (!(e = oatab_find(&r->kernels, f->handle, f->hdr.tgid, true)))
		return -ENOMEM;
	memcpy(e->name, name, sizeof(name));
	return ffm_store__put_kernel(r->o.store, r->o.run, f->hdr.tgid, f->handle, name);
}

/* Each record to its handler: which one, daemon/records.c says. */
static int dispatch(struct ffm_recorder *r, const void *rec, size_t size)
{
	const struct ffm_rec_hdr *h = rec;
	const struct ffm_rec_kind *k = ffm_rec_kind(h->type);

	take_early(r); /* called only while no request of the run is on the worker */
	switch (k ? k->store : FFM_STORE_NONE) {
	case FFM_STORE_WAIT: return on_wait(r, rec);
	case FFM_STORE_CALL: return on_call(r, rec);
	case FFM_STORE_STACK: return on_stack(r, rec, size);
	case FFM_STORE_PROC: return on_proc(r, rec);
	case FFM_STORE_XFER:
	case FFM_STORE_RANGE:
	case FFM_STORE_HIT:
	case FFM_STORE_FAULT: return on_memtrace(r, k->store, rec);
	case FFM_STORE_SAMPLE: return on_sample(r, rec);
	case FFM_STORE_FUNC: return on_func(r, rec);
	case FFM_STORE_PYCODE:
		/* Past the bound a code object's frames are read from the process each time. */
		if (!r->lim.code_objects || r->codes < r->lim.code_objects) {
			r->codes++;
			ffm_pytrack__code(r->py, rec);
		}
		return 0;
	case FFM_STORE_NONE: return 0;
	}
	return 0;
}

int ffm_recorder__record(struct ffm_recorder *r, const void *rec, size_t size)
{
	int err = r->busy ? hold(r, rec, size) : dispatch(r, rec, size);

	if (r->err && err >= 0) {
		err = r->err;
		r->err = 0;
	}
	return err;
}

int ffm_recorder__new(const struct ffm_recorder_opts *opts, struct ffm_recorder **ret)
{
	struct ffm_recorder *r;

	*ret = NULL;
	if (!opts || !opts->store || !opts->sym || !opts->apis)
		return -EINVAL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->o = *opts;
	r->lim = opts->limits ? *opts->limits : FFM_RUN_LIMITS_DEFAULT;
	r->o.limits = NULL;
	r->tokens = (double)r->lim.stacks_per_s * FFM_STACK_BURST_S;
	r->tok_ns = ffm_now_ns();
	r->named = OATAB_INIT(struct oa_key);
	r->kernels = OATAB_INIT(struct kernel_ent);
	r->keys = OATAB_INIT(struct key_ent);
	r->procs = OATAB_INIT(struct proc_ent);
	r->tids = OATAB_INIT(struct tid_ent);
	r->api_ids = calloc(FFM_API_MAX, sizeof(*r->api_ids));
	if (!r->api_ids || ffm_pytrack__new(opts->collector, opts->proc_root, &r->py) < 0) {
		free(r->api_ids);
		free(r);
		return -ENOMEM;
	}
	ffm_pytrack__sample_threads(r->py, opts->cpu_sample_hz);
	*ret = r;
	return 0;
}

struct ffm_recorder *ffm_recorder__free(struct ffm_recorder *r)
{
	if (!r)
		return NULL;
	drain(r);
	for (size_t i = 0; i < r->procs.cap; i++) {
		struct proc_ent *p = oatab_slot(&r->procs, i);

		if (p)
			ffm_addr_space__free(p->as);
	}
	oatab_free(&r->procs);
	free(r->req);
	free(r->held);
	oatab_free(&r->keys);
	oatab_free(&r->tids);
	oatab_free(&r->named);
	oatab_free(&r->kernels);
	ffm_pytrack__free(r->py);
	free(r->api_ids);
	free(r);
	return NULL;
}

void ffm_recorder__stats(const struct ffm_recorder *r, struct ffm_recorder_stats *out)
{
	*out = r->st;
}

void ffm_recorder__full(struct ffm_recorder *r)
{
	r->full = true;
}
