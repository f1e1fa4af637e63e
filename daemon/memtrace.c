/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bpf/ffm_hash.h"
#include "common/oatab.h"
#include "common/util.h"
#include "daemon/collector.h"
#include "daemon/log.h"
#include "daemon/memtrace.h"
#include "stages/ffm_plan.h"
#include "store/ffm_store.h"

#define XFER_RING 256 /* recent transfer calls per thread, to find a hash's call */

struct range {
	uint64_t lo, hi;
	uint64_t issued_ns; /* last issue (DtoH copy or allocation) */
	uint64_t armed_ns;  /* when its watchpoint was last (re)armed; 0 = not watched */
	bool allowed;       /* may be watched (stage 4: issued from a used stack) */
	bool decided;       /* allowed is final (stage 4 waits for the issuing call's stack) */
	int slot;           /* watch slot, -1 = none */
};

struct xcall {
	uint64_t start;
	int64_t event, stack;
};

struct pend_sync {
	bool open;
	int64_t event, stack;
	uint64_t end_ns;
	uint32_t flags;
	uint64_t prot_lo, prot_hi;
	bool used;
	uint64_t use_addr, use_ns;
	int64_t use_stack;
};

struct thread {
	uint32_t tid;
	struct ffm_watch *w[FFM_MEMTRACE_WATCHES];
	struct pend_sync ps;
	struct xcall ring[XFER_RING];
	uint32_t ring_next;
};

struct proc {
	uint32_t tgid;
	struct range *r;
	size_t nr, capr;
	struct thread *t;
	size_t nt, capt;
	uint64_t slot_addr[FFM_MEMTRACE_WATCHES]; /* watched word per slot, 0 = unused */
	int slot_range[FFM_MEMTRACE_WATCHES];     /* index into r, -1 */
};

/* u64 key -> two values, open addressing, grows at 1/2 load; key 0 marks an empty slot.
 * content: hash -> (first event, first stack); dsts: (tgid, dst, bytes) -> (last content, -). */
struct kv_ent {
	struct oa_key k; /* a: 64-bit key */
	int64_t a, b;
};

struct frame_ent {
	int64_t stack, frame;
};

struct ffm_memtrace {
	struct ffm_memtrace_opts o;
	int64_t *use_stacks;
	struct proc *p;
	size_t np, capp;
	struct oatab content, dsts; /* struct kv_ent */
	struct frame_ent *frames;
	size_t nframes, capframes;
	struct ffm_memtrace_stats st;
	bool warned_watch;
};

uint32_t ffm_memtrace_job_flags(uint32_t probes)
{
	uint32_t f = 0;

	if (probes & (FFM_PROBE_MEMTRACE | FFM_PROBE_SYNC_USE))
		f |= FFM_JOB_MEMTRACE;
	if (probes & FFM_PROBE_HASH)
		f |= FFM_JOB_HASH;
	return f;
}

/* ---- processes, threads, ranges ------------------------------------------------------------- */

static struct proc *proc_get(struct ffm_memtrace *m, uint32_t tgid, bool create)
{
	struct proc *p;

	for (size_t i = 0; i < m->np; i++)
		if (m->p[i].tgid == tgid)
			return &m->p[i];
	if (!create || FFM_GROW(m->p, m->capp, m->np + 1) < 0)
		return NULL;
	p = &m->p[m->np++];
	memset(p, 0, sizeof(*p));
	p->tgid = tgid;
	for (int s = 0; s < FFM_MEMTRACE_WATCHES; s++)
		p->slot_range[s] = -1;
	return p;
}

static bool watching(const struct ffm_memtrace *m)
{
	return m->o.collector && ffm_collector__has_memtrace(m->o.collector);
}

/* Point slot s of thread t at the process's slot address (create, move or drop the watch). */
static void apply_slot(struct ffm_memtrace *m, struct proc *p, struct thread *t, int s)
{
	uint64_t a = p->slot_addr[s];
	int err = 0;

	if (!a) {
		t->w[s] = ffm_watch__free(t->w[s]);
		return;
	}
	if (t->w[s]) {
		err = ffm_watch__move(t->w[s], a);
		if (err == 0)
			return;
		/* Some kernels refuse to modify a breakpoint: open a new one. */
		t->w[s] = ffm_watch__free(t->w[s]);
	}
	err = ffm_collector__watch(m->o.collector, t->tid, a, &t->w[s]);
	if (err == -ESRCH)
		return; /* the thread is gone (records are read after the fact) */
	if (err < 0 && !m->warned_watch) {
		log_warn("cannot set a hardware watchpoint in thread %u: %s; first-use coverage is partial",
			 t->tid, strerror(-err));
		m->warned_watch = true;
	}
}

static struct thread *thread_get(struct ffm_memtrace *m, struct proc *p, uint32_t tid)
{
	struct thread *t;

	for (size_t i = 0; i < p->nt; i++)
		if (p->t[i].tid == tid)
			return &p->t[i];
	if (FFM_GROW(p->t, p->capt, p->nt + 1) < 0)
		return NULL;
	t = &p->t[p->nt++];
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	/* A new thread that calls the driver gets the process's watches. */
	if (watching(m))
		for (int s = 0; s < FFM_MEMTRACE_WATCHES; s++)
			if (p->slot_addr[s])
				apply_slot(m, p, t, s);
	return t;
}

static bool stack_allowed(const struct ffm_memtrace *m, int64_t stack)
{
	if (m->o.stage != FFM_STAGE_SYNC_USE || !m->use_stacks)
		return true;
	for (size_t i = 0; i < m->o.nuse_stacks; i++)
		if (m->use_stacks[i] == stack)
			return true;
	return false;
}

/* Make range ri one of the watched ones, evicting the least recently issued watched range. */
static void watch_range(struct ffm_memtrace *m, struct proc *p, size_t ri)
{
	struct range *r = &p->r[ri];
	uint64_t word = r->lo & ~7ull;
	int s = -1;

	if (!watching(m))
		return;
	if (r->slot >= 0) {
		if (p->slot_addr[r->slot] == word)
			return; /* already armed, stays armed */
		s = r->slot;
	}
	for (int i = 0; s < 0 && i < FFM_MEMTRACE_WATCHES; i++)
		if (!p->slot_addr[i])
			s = i;
	if (s < 0) {
		uint64_t oldest = UINT64_MAX;

		for (int i = 0; i < FFM_MEMTRACE_WATCHES; i++) {
			struct range *o = &p->r[p->slot_range[i]];

			if (o->issued_ns < oldest) {
				oldest = o->issued_ns;
				s = i;
			}
		}
		p->r[p->slot_range[s]].slot = -1;
		p->r[p->slot_range[s]].armed_ns = 0;
	}
	p->slot_addr[s] = word;
	p->slot_range[s] = (int)ri;
	r->slot = s;
	for (size_t i = 0; i < p->nt; i++)
		apply_slot(m, p, &p->t[i], s);
	r->armed_ns = ffm_now_ns();
}

static void drop_range(struct ffm_memtrace *m, struct proc *p, size_t ri)
{
	struct range *r = &p->r[ri];

	if (r->slot >= 0) {
		int s = r->slot;

		p->slot_addr[s] = 0;
		p->slot_range[s] = -1;
		for (size_t i = 0; i < p->nt; i++)
			apply_slot(m, p, &p->t[i], s);
	}
	/* Move the last range into the hole; fix its slot's back reference. */
	p->r[ri] = p->r[--p->nr];
	if (ri < p->nr && p->r[ri].slot >= 0)
		p->slot_range[p->r[ri].slot] = (int)ri;
}

static size_t add_range(struct ffm_memtrace *m, struct proc *p, uint64_t lo, uint64_t bytes,
			uint64_t ts, int64_t origin)
{
	size_t i;

	for (i = 0; i < p->nr; i++)
		if (p->r[i].lo == lo && p->r[i].hi == lo + bytes)
			break;
	if (i == p->nr) {
		if (FFM_GROW(p->r, p->capr, p->nr + 1) < 0)
			return SIZE_MAX;
		p->r[i] = (struct range){ .lo = lo, .hi = lo + bytes, .slot = -1 };
		p->nr++;
		m->st.ranges++;
	}
	p->r[i].issued_ns = ts;
	if (!p->r[i].decided && (origin || m->o.stage != FFM_STAGE_SYNC_USE)) {
		p->r[i].allowed = stack_allowed(m, origin);
		p->r[i].decided = true;
	}
	if (p->r[i].allowed)
		watch_range(m, p, i);
	return i;
}

/* ---- sync windows ---------------------------------------------------------------------------- */

static int64_t frame_of(struct ffm_memtrace *m, int64_t stack);

static int close_window(struct ffm_memtrace *m, struct thread *t)
{
	struct pend_sync *ps = &t->ps;
	struct ffm_store_sync_use u = {
		.run = m->o.run, .event = ps->event, .stack = ps->stack,
		.prot_lo = ps->prot_lo, .prot_hi = ps->prot_hi, .flags = ps->flags,
		.use_delay_ns = -1,
	};

	if (!ps->open)
		return 0;
	ps->open = false;
	if (ps->used) {
		u.use_addr = ps->use_addr;
		u.use_stack = ps->use_stack;
		u.use_frame = frame_of(m, ps->use_stack);
		u.use_delay_ns = (int64_t)(ps->use_ns - ps->end_ns);
		m->st.syncs_used++;
	} else {
		u.flags |= FFM_SYNC_USE_NONE;
		m->st.syncs_none++;
	}
	if (u.flags & FFM_SYNC_USE_PARTIAL)
		m->st.syncs_partial++;
	return ffm_store__put_sync_use(m->o.store, &u, NULL);
}

static int on_sync(struct ffm_memtrace *m, uint32_t tgid, uint32_t tid, int64_t event,
		   int64_t stack, uint64_t end_ns)
{
	struct proc *p = proc_get(m, tgid, true);
	struct thread *t = p ? thread_get(m, p, tid) : NULL;
	struct pend_sync *ps;
	uint64_t newest = 0;
	size_t live = 0, watched = 0;
	int err;

	if (!t)
		return -ENOMEM;
	err = close_window(m, t);
	if (err < 0)
		return err;
	ps = &t->ps;
	*ps = (struct pend_sync){ .open = true, .event = event, .stack = stack, .end_ns = end_ns };
	for (size_t i = 0; i < p->nr; i++) {
		struct range *r = &p->r[i];

		if (!r->allowed)
			continue;
		live++;
		/* armed after the sync returned: its early accesses were unseen */
		if (r->slot >= 0 && r->armed_ns && r->armed_ns <= end_ns)
			watched++;
		if (r->issued_ns >= newest) {
			newest = r->issued_ns;
			ps->prot_lo = r->lo;
			ps->prot_hi = r->hi;
		}
	}
	if (watched < live)
		ps->flags |= FFM_SYNC_USE_PARTIAL;
	m->st.syncs++;
	return 0;
}

int ffm_memtrace__on_call(struct ffm_memtrace *m, const struct ffm_rec_call *c,
			  const struct ffm_memtrace_call *info)
{
	struct proc *p = proc_get(m, c->hdr.tgid, true);
	struct thread *t = p ? thread_get(m, p, c->hdr.tid) : NULL;
	const char *name = info->name ? info->name : "";
	int err;

	if (!t)
		return -ENOMEM;
	if (info->kind == FFM_KIND_MEMCPY) {
		struct xcall *x = &t->ring[t->ring_next++ % XFER_RING];

		*x = (struct xcall){ .start = c->start_ns, .event = info->event, .stack = info->stack };
		/* Stage 4: the first copy from a stack decides whether its range is watched. */
		for (size_t i = 0; i < p->nr && c->dst; i++) {
			struct range *r = &p->r[i];

			if (r->lo == c->dst && !r->decided && info->stack) {
				r->allowed = stack_allowed(m, info->stack);
				r->decided = true;
				if (r->allowed)
					watch_range(m, p, i);
			}
		}
	} else if (c->ret == 0 && !strcmp(name, "cuMemAllocManaged") && c->dst && c->bytes) {
		add_range(m, p, c->dst, c->bytes, c->hdr.ts_ns, info->stack);
	} else if (c->ret == 0 && info->kind == FFM_KIND_FREE && c->dst) {
		/* Only a range that starts at the freed pointer: allocation sizes are not tracked,
		 * so a destination inside a freed block stays protected (conservative). */
		for (size_t i = 0; i < p->nr;) {
			if (p->r[i].lo == c->dst)
				drop_range(m, p, i);
			else
				i++;
		}
	}
	if (c->nwaits || info->kind == FFM_KIND_SYNC) {
		err = on_sync(m, c->hdr.tgid, c->hdr.tid, info->event, info->stack, c->hdr.ts_ns);
		if (err < 0)
			return err;
	}
	return 0;
}

int ffm_memtrace__on_wait(struct ffm_memtrace *m, const struct ffm_rec_wait *w, int64_t event,
			  int64_t stack)
{
	return on_sync(m, w->hdr.tgid, w->hdr.tid, event, stack, w->hdr.ts_ns);
}

int ffm_memtrace__on_range(struct ffm_memtrace *m, const struct ffm_rec_range *r, int64_t stack)
{
	struct proc *p = proc_get(m, r->hdr.tgid, true);

	if (!p || !thread_get(m, p, r->hdr.tid))
		return -ENOMEM;
	if (!r->lo || !r->bytes)
		return 0;
	return add_range(m, p, r->lo, r->bytes, r->call_start_ns, stack) == SIZE_MAX ?
		       -ENOMEM :
		       0;
}

int ffm_memtrace__on_hit(struct ffm_memtrace *m, const struct ffm_rec_hit *h, int64_t stack)
{
	struct proc *p = proc_get(m, h->hdr.tgid, false);
	struct thread *t = NULL;
	struct pend_sync *ps;

	for (size_t i = 0; p && i < p->nt; i++)
		if (p->t[i].tid == h->hdr.tid)
			t = &p->t[i];
	if (!t || !t->ps.open || t->ps.used || h->hdr.ts_ns < t->ps.end_ns)
		return 0; /* outside any sync window */
	ps = &t->ps;
	ps->used = true;
	ps->use_addr = h->addr;
	ps->use_ns = h->hdr.ts_ns;
	ps->use_stack = stack;
	/* The range the access protects: the watched one whose first word was hit. */
	for (size_t i = 0; i < p->nr; i++) {
		const struct range *r = &p->r[i];

		if (h->addr >= (r->lo & ~7ull) && h->addr < (r->hi > r->lo + 8 ? r->hi : r->lo + 8)) {
			ps->prot_lo = r->lo;
			ps->prot_hi = r->hi;
			break;
		}
	}
	return 0;
}

static void proc_release(struct proc *p)
{
	for (size_t i = 0; i < p->nt; i++)
		for (int s = 0; s < FFM_MEMTRACE_WATCHES; s++)
			p->t[i].w[s] = ffm_watch__free(p->t[i].w[s]);
	free(p->t);
	free(p->r);
	p->t = NULL;
	p->r = NULL;
	p->nt = p->nr = p->capt = p->capr = 0;
}

/* A process's open windows closed (that of its last sync runs to its exit or the run's end),
 * its watchpoints released. */
static int close_proc(struct ffm_memtrace *m, struct proc *p)
{
	int err = 0;

	for (size_t i = 0; i < p->nt; i++) {
		int e = close_window(m, &p->t[i]);

		if (e < 0 && !err)
			err = e;
	}
	proc_release(p);
	return err;
}

int ffm_memtrace__on_exit(struct ffm_memtrace *m, uint32_t tgid)
{
	struct proc *p = proc_get(m, tgid, false);
	int err;

	if (!p)
		return 0;
	err = close_proc(m, p);
	*p = m->p[--m->np];
	return err;
}


/* ---- transfers ------------------------------------------------------------------------------- */

static struct kv_ent *kv_find(struct oatab *t, uint64_t key, bool insert)
{
	return oatab_find(t, key ? key : 1, 0, insert);
}

int ffm_memtrace__on_xfer(struct ffm_memtrace *m, const struct ffm_rec_xfer *x)
{
	struct proc *p = proc_get(m, x->hdr.tgid, true);
	struct thread *t = p ? thread_get(m, p, x->hdr.tid) : NULL;
	struct ffm_store_xfer_hash row = { .run = m->o.run, .dst = x->dst, .bytes = x->bytes };
	uint64_t h = x->hash ? x->hash : 1; /* 0 marks an empty table slot */
	/* A destination is (process, address, size); 64 bits of it as the table key. */
	uint64_t dkey = ffm_mix64(x->dst ^ ffm_mix64(x->bytes ^ ffm_mix64(x->hdr.tgid)));
	struct kv_ent *ce, *de;

	if (!t)
		return -ENOMEM;
	if (x->flags & FFM_XFER_FAILED) {
		m->st.xfers_failed++;
		return 0; /* no content: neither a duplicate nor a first copy of anything */
	}
	m->st.xfers++;
	for (uint32_t i = 0; i < XFER_RING; i++) {
		const struct xcall *c = &t->ring[(t->ring_next - 1 - i) % XFER_RING];

		if (c->start == x->call_start_ns && c->start) {
			row.event = c->event;
			row.stack = c->stack;
			break;
		}
	}
	row.hash = x->hash;
	ce = kv_find(&m->content, h, false);
	de = kv_find(&m->dsts, dkey, true);
	if (!de)
		return -ENOMEM;
	if (ce) {
		row.first_event = ce->a;
		row.first_stack = ce->b;
		if ((uint64_t)de->a == h) {
			row.dup = FFM_DUP_SAME_DST;
			m->st.dup_same++;
		} else {
			row.dup = FFM_DUP_OTHER_DST;
			m->st.dup_other++;
		}
	} else {
		ce = kv_find(&m->content, h, true);
		if (!ce)
			return -ENOMEM;
		ce->a = row.event;
		ce->b = row.stack;
		row.dup = FFM_DUP_NONE;
	}
	de->a = (int64_t)h;
	return ffm_store__put_xfer_hash(m->o.store, &row, NULL);
}

/* ---- frames ---------------------------------------------------------------------------------- */

static int first_frame_cb(const struct ffm_store_frame *f, uint32_t depth, void *ctx)
{
	if (depth == 0) {
		*(int64_t *)ctx = f->id;
		return 1;
	}
	return 0;
}

/* The innermost frame of a stack (the accessing instruction's), cached. */
static int64_t frame_of(struct ffm_memtrace *m, int64_t stack)
{
	int64_t f = 0;

	if (!stack)
		return 0;
	for (size_t i = 0; i < m->nframes; i++)
		if (m->frames[i].stack == stack)
			return m->frames[i].frame;
	ffm_store__for_each_frame(m->o.store, stack, first_frame_cb, &f);
	if (FFM_GROW(m->frames, m->capframes, m->nframes + 1) == 0)
		m->frames[m->nframes++] = (struct frame_ent){ .stack = stack, .frame = f };
	return f;
}

/* ---- lifecycle ------------------------------------------------------------------------------- */

int ffm_memtrace__new(const struct ffm_memtrace_opts *opts, struct ffm_memtrace **ret)
{
	struct ffm_memtrace *m;

	*ret = NULL;
	if (!opts || !opts->store || (opts->stage != FFM_STAGE_MEMORY && opts->stage != FFM_STAGE_SYNC_USE))
		return -EINVAL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->o = *opts;
	m->content = OATAB_INIT(struct kv_ent);
	m->dsts = OATAB_INIT(struct kv_ent);
	if (opts->use_stacks) {
		m->use_stacks = calloc(opts->nuse_stacks + 1, sizeof(*m->use_stacks));
		if (!m->use_stacks) {
			free(m);
			return -ENOMEM;
		}
		memcpy(m->use_stacks, opts->use_stacks, opts->nuse_stacks * sizeof(*m->use_stacks));
	}
	m->o.use_stacks = NULL;
	*ret = m;
	return 0;
}

struct ffm_memtrace *ffm_memtrace__free(struct ffm_memtrace *m)
{
	if (!m)
		return NULL;
	for (size_t i = 0; i < m->np; i++)
		proc_release(&m->p[i]);
	free(m->p);
	oatab_free(&m->content);
	oatab_free(&m->dsts);
	free(m->frames);
	free(m->use_stacks);
	free(m);
	return NULL;
}

void ffm_memtrace__stats(const struct ffm_memtrace *m, struct ffm_memtrace_stats *out)
{
	*out = m->st;
}

/* ---- the run ---------------------------------------------------------------------------------- */

static int divergent(struct ffm_store *s, int64_t run, int64_t ref)
{
	/* The calls both stages probe: syncs (and other API calls), transfers, allocs, frees. */
	uint32_t kinds = 1u << FFM_EV_API | 1u << FFM_EV_TRANSFER | 1u << FFM_EV_ALLOC |
			 1u << FFM_EV_FREE;
	int err;

	if (!ref)
		return 0;
	err = ffm_store__flush(s); /* per-stack totals of this run are still in the open batch */
	return err < 0 ? err : ffm_store__counts_differ(s, run, ref, kinds, 3, FFM_MEMTRACE_DIVERGENCE);
}

int ffm_memtrace__end(struct ffm_memtrace *m, int64_t ref_run, uint32_t *flags)
{
	int err = 0, div;

	for (size_t i = 0; i < m->np; i++) {
		int e = close_proc(m, &m->p[i]);

		if (e < 0 && !err)
			err = e;
	}
	m->np = 0;
	if (err < 0)
		return err;
	if (m->st.syncs && (double)m->st.syncs_partial > FFM_MEMTRACE_PARTIAL_SHARE * (double)m->st.syncs)
		*flags |= FFM_RUN_PARTIAL;
	div = divergent(m->o.store, m->o.run, ref_run);
	if (div < 0)
		return div;
	if (div)
		*flags |= FFM_RUN_DIVERGENT;
	return 0;
}
