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
/* Ranges of up to this many 8-byte words (128 MiB) keep a bitmap of the words ever watched;
 * larger ones count only their sweep's words (distinct in its first pass): a lower bound. */
#define COVER_MAX_WORDS (1ull << 24)
#define COARSE_POINTS 16 /* the coarse window's grid: the end, 1/2, 1/4, 3/4, 1/8, ... */

/* What a watch slot looks at in its range (docs/STAGES.md, "Coverage"). */
enum role { ROLE_FIRST, ROLE_SWEEP, ROLE_COARSE, ROLE_INDEX };

struct range {
	uint64_t lo, hi;
	uint64_t issued_ns; /* last issue (DtoH copy or allocation) */
	uint64_t occ;       /* issues watched so far: the next one's occurrence index */
	uint64_t sweep;     /* the sweep's step counter */
	uint64_t step;      /* the sweep's stride in words (0: not yet chosen) */
	uint64_t *seen;     /* words watched at least once (COVER_MAX_WORDS), NULL until then */
	uint64_t covered;   /* bytes of [lo, hi) watched at least once */
	bool allowed;       /* may be watched (stage 4: issued from a used stack) */
	bool decided;       /* allowed is final (stage 4 waits for the issuing call's stack) */
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
	bool used, late; /* late: seen by a window set after end_ns (FFM_SYNC_USE_LATE) */
	uint64_t use_addr;
	uint64_t use_delay; /* sync to use, less the timing's own cost (ffm_memtrace_stats) */
	int64_t use_stack;
	uint64_t watched, covered; /* of [prot_lo, prot_hi), at the sync (struct ffm_store_sync_use) */
};

struct thread {
	uint32_t tid;
	bool gone; /* the kernel said the thread no longer exists: no watch is tried again */
	struct ffm_watch *w[FFM_MEMTRACE_WATCHES];
	/* When w[s] was last put on its process's slot address, read after the kernel took it;
	 * 0: that address is not watched in this thread (not yet, or the kernel refused) */
	uint64_t armed[FFM_MEMTRACE_WATCHES];
	struct pend_sync ps;
	struct xcall ring[XFER_RING];
	uint32_t ring_next;
	/* stage 4: its page faults sampled (its process allocated managed memory), the stack
	 * of its last probed call, and its last operation on managed memory with the bytes it
	 * wrote: its next faults in managed memory follow that operation when they are in its
	 * bytes, else the last call */
	struct ffm_watch *fw;
	int64_t last_stack, op_stack;
	uint64_t op_lo, op_hi;
};

/* A managed allocation of a process (stage 4: the faults in it are counted). */
struct mrange {
	uint64_t lo, hi;
};

/* Per call site (stage 4): its device operations on managed memory, the faults after them. */
struct mfault {
	int64_t stack;
	uint64_t ops, faults;
};

struct proc {
	uint32_t tgid;
	struct range *r;
	size_t nr, capr;
	struct thread *t;
	size_t nt, capt;
	uint64_t slot_addr[FFM_MEMTRACE_WATCHES];  /* watched word per slot, 0 = unused */
	int slot_range[FFM_MEMTRACE_WATCHES];      /* index into r, -1 */
	uint8_t slot_role[FFM_MEMTRACE_WATCHES];   /* enum role */
	struct mrange *mr;
	size_t nmr, capmr;
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
	bool warned_watch, warned_faults;
	struct mfault *mf;
	size_t nmf, capmf;
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

/*
 * Point slot s of thread t at the process's slot address (create, move or drop the watch).
 * t->armed[s] says from when the address is watched: the time read once the kernel has taken
 * the watchpoint, never before (opening one can block for milliseconds, e.g. in an RCU grace
 * period, while the thread runs on), and 0 when it could not be set (the thread exited, its
 * debug registers are taken): a window that was not in place cannot say that nothing was read.
 */
static void apply_slot(struct ffm_memtrace *m, struct proc *p, struct thread *t, int s)
{
	uint64_t a = p->slot_addr[s];
	int err = 0;

	if (!a || t->gone) {
		t->w[s] = ffm_watch__free(t->w[s]);
		t->armed[s] = 0;
		return;
	}
	if (t->w[s] && t->armed[s] && ffm_watch__addr(t->w[s]) == (a & ~7ull))
		return; /* in place */
	if (t->w[s]) {
		err = ffm_watch__move(t->w[s], a);
		if (err == 0) {
			t->armed[s] = ffm_now_ns();
			return;
		}
		/* Some kernels refuse to modify a breakpoint: open a new one. */
		t->w[s] = ffm_watch__free(t->w[s]);
	}
	t->armed[s] = 0;
	err = ffm_collector__watch(m->o.collector, t->tid, a, &t->w[s]);
	if (err == 0) {
		t->armed[s] = ffm_now_ns();
		return;
	}
	if (err == -ESRCH) {
		t->gone = true; /* the thread is gone (records are read after the fact) */
		return;
	}
	if (!m->warned_watch) {
		log_warn("cannot set a hardware watchpoint in thread %u: %s; first-use coverage is partial",
			 t->tid, strerror(-err));
		m->warned_watch = true;
	}
}

/* ---- stage 4: the host's page faults in managed memory ---------------------------------------
 *
 * In a process that allocated managed memory, each thread that calls the driver has its page
 * faults sampled (ffm_collector__faults). A fault in a managed range follows the thread's last
 * operation on managed memory (a memset or a copy into it) when it falls in the bytes that
 * operation wrote: the host is bringing back pages the device operation took, whatever the
 * thread called in between (the sync before it reads them: on the H200 the variant that reads
 * after a cudaStreamSynchronize had its faults on the sync, and its memset went unpriced). Any
 * other fault follows the thread's last probed call. Per call site, the operations on managed
 * memory and the faults that followed its calls go to the store (managed_faults) at the end.
 * Launches are not probed in stage 4: a kernel that uses the pages between the call and the
 * faults leaves them to the call (docs/STAGES.md).
 */

static bool counting_faults(const struct ffm_memtrace *m)
{
	return m->o.stage == FFM_STAGE_SYNC_USE && watching(m);
}

static void sample_faults(struct ffm_memtrace *m, struct proc *p, struct thread *t)
{
	int err;

	if (!p->nmr || t->fw || t->gone || !counting_faults(m))
		return;
	err = ffm_collector__faults(m->o.collector, t->tid, &t->fw);
	if (err == -ESRCH)
		t->gone = true;
	else if (err && !m->warned_faults) {
		log_warn("cannot sample the page faults of thread %u: %s; "
			 "managed memory's faults are not counted", t->tid, strerror(-err));
		m->warned_faults = true;
	}
}

/* The managed allocation of @p that holds address @a, NULL: none. */
static const struct mrange *managed_at(const struct proc *p, uint64_t a)
{
	for (size_t i = 0; i < p->nmr; i++)
		if (a >= p->mr[i].lo && a < p->mr[i].hi)
			return &p->mr[i];
	return NULL;
}

static bool in_managed(const struct proc *p, uint64_t a)
{
	return managed_at(p, a) != NULL;
}

/* The process's managed ranges, the newest FFM_MANAGED_RANGES, to the fault program (none:
 * the process forgotten there). */
static void managed_push(struct ffm_memtrace *m, struct proc *p)
{
	uint64_t lo[FFM_MANAGED_RANGES], hi[FFM_MANAGED_RANGES];
	size_t from = p->nmr > FFM_MANAGED_RANGES ? p->nmr - FFM_MANAGED_RANGES : 0, n = 0;
	int err;

	for (size_t i = from; i < p->nmr; i++, n++) {
		lo[n] = p->mr[i].lo;
		hi[n] = p->mr[i].hi;
	}
	err = ffm_collector__set_managed(m->o.collector, p->tgid, lo, hi, n);
	if (err && !m->warned_faults) {
		log_warn("cannot give process %u's managed ranges to the fault program: %s; "
			 "managed memory's faults are not counted", p->tgid, strerror(-err));
		m->warned_faults = true;
	}
}

static int managed_add(struct ffm_memtrace *m, struct proc *p, uint64_t lo, uint64_t bytes)
{
	if (!counting_faults(m) || lo + bytes < lo)
		return 0;
	if (FFM_GROW(p->mr, p->capmr, p->nmr + 1) < 0)
		return -ENOMEM;
	p->mr[p->nmr++] = (struct mrange){ lo, lo + bytes };
	managed_push(m, p);
	for (size_t i = 0; i < p->nt; i++)
		sample_faults(m, p, &p->t[i]);
	return 0;
}

/* A freed managed range forgotten (the others kept in order: the newest go to BPF). */
static void managed_drop(struct ffm_memtrace *m, struct proc *p, uint64_t lo)
{
	size_t n = p->nmr;

	for (size_t i = 0; i < p->nmr;) {
		if (p->mr[i].lo == lo)
			memmove(&p->mr[i], &p->mr[i + 1], (--p->nmr - i) * sizeof(p->mr[0]));
		else
			i++;
	}
	if (p->nmr != n)
		managed_push(m, p);
}

static struct mfault *mfault_of(struct ffm_memtrace *m, int64_t stack)
{
	for (size_t i = 0; i < m->nmf; i++)
		if (m->mf[i].stack == stack)
			return &m->mf[i];
	if (FFM_GROW(m->mf, m->capmf, m->nmf + 1) < 0)
		return NULL;
	m->mf[m->nmf] = (struct mfault){ .stack = stack };
	return &m->mf[m->nmf++];
}

/* A probed call of thread t: the stack its next faults follow; an operation on managed memory. */
static int managed_call(struct ffm_memtrace *m, struct proc *p, struct thread *t,
			const struct ffm_rec_call *c, const struct ffm_memtrace_call *info)
{
	struct mfault *f;

	if (!p->nmr)
		return 0;
	t->last_stack = info->stack;
	if ((info->kind != FFM_KIND_MEMSET && info->kind != FFM_KIND_MEMCPY) || c->ret ||
	    !info->stack || !in_managed(p, c->dst))
		return 0;
	f = mfault_of(m, info->stack);
	if (!f)
		return -ENOMEM;
	f->ops++;
	t->op_stack = info->stack;
	t->op_lo = c->dst;
	/* a call that says no size: the whole allocation it writes into */
	t->op_hi = c->bytes && c->dst + c->bytes > c->dst ? c->dst + c->bytes
							  : managed_at(p, c->dst)->hi;
	return 0;
}

int ffm_memtrace__on_fault(struct ffm_memtrace *m, const struct ffm_rec_fault *f)
{
	struct proc *p = proc_get(m, f->hdr.tgid, false);
	struct mfault *mf;

	if (!p || !in_managed(p, f->addr))
		return 0;
	for (size_t i = 0; i < p->nt; i++) {
		const struct thread *t = &p->t[i];
		/* The pages a device operation took come back: its fault, whatever calls the
		 * thread made since (a launch, the sync before the host reads them). */
		int64_t st = t->op_stack && f->addr >= t->op_lo && f->addr < t->op_hi ? t->op_stack
										      : t->last_stack;

		if (t->tid != f->hdr.tid || !st)
			continue;
		mf = mfault_of(m, st);
		if (!mf)
			return -ENOMEM;
		mf->faults++;
		m->st.managed_faults++;
		break;
	}
	return 0;
}

/* The counts into the store: once, at the run's end. */
static int managed_store(struct ffm_memtrace *m)
{
	for (size_t i = 0; i < m->nmf; i++) {
		int err = ffm_store__add_managed_faults(m->o.store, m->o.run, m->mf[i].stack,
							m->mf[i].ops, m->mf[i].faults);

		if (err < 0)
			return err;
	}
	m->nmf = 0;
	return 0;
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
	sample_faults(m, p, t);
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

/* ---- windows: which 8-byte words of its range each watch slot looks at ------------------------
 *
 * A range shares the process's FFM_MEMTRACE_WATCHES slots with the other recently issued ones
 * (an equal share, at least one) and moves its windows at each issue, so that over the issues
 * of a range its windows cover all of it. Its slots' roles, in the order a share gets them:
 *   FIRST   the first word, always (a consumer that reads from the start; stage 4's first-use
 *           time of such a consumer is what it was with one window)
 *   SWEEP   the next word of a permutation of the range's words, from the last one: steps of
 *           g words modulo their count n, g near n/φ and prime to n (a Weyl sequence: the
 *           words seen so far are spread evenly over the range at any time, and a power-of-two
 *           stride of the program's reads does not alias with it as a bit-reversed order does)
 *   COARSE  a grid of COARSE_POINTS points revisited every COARSE_POINTS issues: the last word,
 *           the middle, the quarters, the eighths... (a field at a fixed place of a result)
 *   INDEX   the element the loop's counter indexes: at issue k, byte 4k (k even) or 8k (k odd)
 *           modulo the size (h[i % n] of 4- and 8-byte elements, when the program's loop
 *           counts from the range's first issue)
 */

static uint64_t range_words(const struct range *r)
{
	return ((r->hi - 1) >> 3) - (r->lo >> 3) + 1;
}

/* Bytes of the range in the word at @w. */
static uint64_t word_bytes(const struct range *r, uint64_t w)
{
	uint64_t a = w > r->lo ? w : r->lo, b = w + 8 < r->hi ? w + 8 : r->hi;

	return b > a ? b - a : 0;
}

static uint64_t gcd(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;

		a = b;
		b = t;
	}
	return a;
}

static uint64_t bitrev(uint64_t x, unsigned bits)
{
	uint64_t y = 0;

	for (unsigned i = 0; i < bits; i++, x >>= 1)
		y = y << 1 | (x & 1);
	return y;
}

/* The sweep's next word: word n-1-(t·g mod n) at step t, every word once in n steps. */
static uint64_t sweep_next(struct range *r)
{
	uint64_t n = range_words(r), v;

	if (!r->step) {
		r->step = (uint64_t)((double)n * 0.6180339887498949);
		while (r->step > 1 && gcd(r->step, n) != 1)
			r->step++;
		r->step = r->step ? r->step : 1;
	}
	v = (uint64_t)((unsigned __int128)(r->sweep++ % n) * r->step % n);
	return (r->lo & ~7ull) + 8 * (n - 1 - v);
}

static uint64_t role_word(struct range *r, enum role role, uint64_t k)
{
	uint64_t size = r->hi - r->lo, off;

	switch (role) {
	case ROLE_FIRST: return r->lo & ~7ull;
	case ROLE_SWEEP: return sweep_next(r);
	case ROLE_COARSE:
		if (k % COARSE_POINTS == 0)
			return (r->hi - 1) & ~7ull;
		off = (uint64_t)((unsigned __int128)size * bitrev(k % COARSE_POINTS, 4) / COARSE_POINTS);
		return (r->lo + off) & ~7ull;
	default:
		off = (k & 1) ? 8 * (k % (size / 8 ? size / 8 : 1)) : 4 * (k % (size / 4 ? size / 4 : 1));
		return (r->lo + off % size) & ~7ull;
	}
}

/* The @n windows (distinct words) of occurrence @k: out[i] watched with role[i]; how many. */
static unsigned range_windows(struct range *r, uint64_t k, unsigned n, uint64_t *out,
			      uint8_t *role)
{
	uint64_t words = range_words(r);
	unsigned got = 0;

	for (unsigned i = 0; i < n + 2 * FFM_MEMTRACE_WATCHES && got < n && got < words; i++) {
		/* Roles in order; a duplicate (small range) is replaced by further sweep words. */
		enum role ro = i < n ? (enum role)i : ROLE_SWEEP;
		uint64_t w = role_word(r, ro, k);
		bool dup = false;

		for (unsigned j = 0; j < got; j++)
			dup |= out[j] == w;
		if (!dup) {
			role[got] = (uint8_t)ro;
			out[got++] = w;
		}
	}
	return got;
}

/* Slot s's address (0: none) for range ri, applied to every thread. */
static void set_slot(struct ffm_memtrace *m, struct proc *p, int s, int ri, uint64_t addr,
		     uint8_t role)
{
	p->slot_role[s] = role;
	p->slot_range[s] = addr ? ri : -1;
	if (p->slot_addr[s] == addr)
		return;
	p->slot_addr[s] = addr;
	for (size_t i = 0; i < p->nt; i++)
		apply_slot(m, p, &p->t[i], s);
}

/* Slots of range ri that some thread lacks (a watch refused earlier) tried again. */
static void rearm_range(struct ffm_memtrace *m, struct proc *p, int ri)
{
	for (int s = 0; s < FFM_MEMTRACE_WATCHES; s++)
		for (size_t i = 0; p->slot_range[s] == ri && p->slot_addr[s] && i < p->nt; i++)
			if (!p->t[i].gone && !p->t[i].armed[s])
				apply_slot(m, p, &p->t[i], s);
}

static unsigned slots_of(const struct proc *p, int ri)
{
	unsigned n = 0;

	for (int s = 0; s < FFM_MEMTRACE_WATCHES; s++)
		n += p->slot_range[s] == ri;
	return n;
}

/*
 * A slot for range ri: a free one, else one of the range holding the most slots (the least
 * recently issued of those) while it holds more than ri would after taking it (never its FIRST
 * window then); a range holding a single slot loses it only to a range that holds none, as the
 * least recently issued. -1: none to take.
 */
static int take_slot(struct ffm_memtrace *m, struct proc *p, int ri)
{
	unsigned mine = slots_of(p, ri), most = 0;
	int victim = -1, s = -1;

	for (int i = 0; i < FFM_MEMTRACE_WATCHES; i++)
		if (!p->slot_addr[i] && p->slot_range[i] < 0)
			return i;
	for (int i = 0; i < FFM_MEMTRACE_WATCHES; i++) {
		int o = p->slot_range[i];
		unsigned h = o >= 0 && o != ri ? slots_of(p, o) : 0;

		if (h && (h > most || (h == most && p->r[o].issued_ns < p->r[victim].issued_ns))) {
			most = h;
			victim = o;
		}
	}
	if (victim < 0 || !(most > mine + 1 || (most == 1 && mine == 0)))
		return -1;
	for (int i = 0; i < FFM_MEMTRACE_WATCHES; i++)
		if (p->slot_range[i] == victim && (s < 0 || p->slot_role[s] == ROLE_FIRST))
			s = i;
	set_slot(m, p, s, -1, 0, 0);
	return s;
}

/* Range ri was issued: its share of the slots, its windows moved to its next occurrence. */
static void watch_range(struct ffm_memtrace *m, struct proc *p, size_t ri)
{
	struct range *r = &p->r[ri];
	uint64_t win[FFM_MEMTRACE_WATCHES];
	uint8_t role[FFM_MEMTRACE_WATCHES];
	unsigned others = 0, want, have, nw;
	bool placed[FFM_MEMTRACE_WATCHES] = { false };

	if (!watching(m))
		return;
	for (size_t i = 0; i < p->nr; i++)
		others += i != ri && slots_of(p, (int)i) > 0;
	want = FFM_MEMTRACE_WATCHES / (others + 1);
	want = want ? want : 1;
	for (have = slots_of(p, (int)ri); have < want; have++) {
		int s = take_slot(m, p, (int)ri);

		if (s < 0)
			break;
		p->slot_range[s] = (int)ri; /* reserved; its address comes below */
	}
	nw = range_windows(r, r->occ++, have, win, role);
	/* Slots already on one of the windows stay armed; the others move. */
	for (int s = 0; s < FFM_MEMTRACE_WATCHES; s++)
		for (unsigned j = 0; p->slot_range[s] == (int)ri && j < nw; j++)
			if (!placed[j] && p->slot_addr[s] == win[j]) {
				placed[j] = true;
				p->slot_role[s] = role[j];
				break;
			}
	for (int s = 0; s < FFM_MEMTRACE_WATCHES; s++) {
		bool keep = false;
		unsigned j;

		if (p->slot_range[s] != (int)ri)
			continue;
		for (j = 0; j < nw; j++)
			keep |= placed[j] && p->slot_addr[s] == win[j];
		if (keep)
			continue;
		for (j = 0; j < nw && placed[j]; j++)
			;
		if (j < nw) {
			placed[j] = true;
			set_slot(m, p, s, (int)ri, win[j], role[j]);
		} else {
			set_slot(m, p, s, -1, 0, 0);
		}
	}
	rearm_range(m, p, (int)ri);
}

/*
 * What range ri's windows watched at a sync of thread t that ended at @end_ns (the slots whose
 * watch was in place in t by then: t->armed): the bytes in *watched; the words are marked as
 * covered. Whether any window was in place.
 */
static bool range_watched(struct proc *p, const struct thread *t, size_t ri, uint64_t end_ns,
			  uint64_t *watched)
{
	struct range *r = &p->r[ri];
	uint64_t words = range_words(r);
	bool any = false;

	*watched = 0;
	for (int s = 0; s < FFM_MEMTRACE_WATCHES; s++) {
		uint64_t w = p->slot_addr[s], i, b;

		if (p->slot_range[s] != (int)ri || !w || !t->armed[s] || t->armed[s] > end_ns ||
		    ffm_watch__addr(t->w[s]) != w)
			continue;
		any = true;
		if (!r->seen && words <= COVER_MAX_WORDS) /* no memory: the lower bound below */
			r->seen = calloc((words + 63) / 64, sizeof(*r->seen));
		b = word_bytes(r, w);
		*watched += b;
		i = (w - (r->lo & ~7ull)) >> 3;
		if (r->seen && !(r->seen[i / 64] >> (i % 64) & 1)) {
			r->seen[i / 64] |= 1ull << (i % 64);
			r->covered += b;
		} else if (!r->seen && p->slot_role[s] == ROLE_SWEEP && r->sweep <= words) {
			r->covered += b; /* no bitmap: the sweep's first pass, a lower bound */
		}
	}
	return any;
}

static void drop_range(struct ffm_memtrace *m, struct proc *p, size_t ri)
{
	for (int s = 0; s < FFM_MEMTRACE_WATCHES; s++)
		if (p->slot_range[s] == (int)ri)
			set_slot(m, p, s, -1, 0, 0);
	free(p->r[ri].seen);
	/* Move the last range into the hole; fix its slots' back references. */
	p->r[ri] = p->r[--p->nr];
	for (int s = 0; s < FFM_MEMTRACE_WATCHES && ri < p->nr; s++)
		if (p->slot_range[s] == (int)p->nr)
			p->slot_range[s] = (int)ri;
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
		p->r[i] = (struct range){ .lo = lo, .hi = lo + bytes };
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
		.use_delay_ns = -1, .watched_bytes = ps->watched, .covered_bytes = ps->covered,
	};

	if (!ps->open)
		return 0;
	ps->open = false;
	if (ps->used) {
		u.use_addr = ps->use_addr;
		u.use_stack = ps->use_stack;
		u.use_frame = frame_of(m, ps->use_stack);
		u.use_delay_ns = (int64_t)ps->use_delay;
		if (ps->late)
			u.flags |= FFM_SYNC_USE_LATE;
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
	uint64_t newest = 0, bytes;
	size_t live = 0, watched = 0, prot = SIZE_MAX;
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
		/* a window armed after the sync returned does not count: early accesses were unseen */
		if (range_watched(p, t, i, end_ns, &bytes))
			watched++;
		if (r->issued_ns >= newest) {
			newest = r->issued_ns;
			prot = i;
			ps->watched = bytes;
		}
	}
	if (prot != SIZE_MAX) {
		ps->prot_lo = p->r[prot].lo;
		ps->prot_hi = p->r[prot].hi;
		ps->covered = p->r[prot].covered;
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
	err = managed_call(m, p, t, c, info);
	if (err < 0)
		return err;
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
		err = managed_add(m, p, c->dst, c->bytes);
		if (err < 0)
			return err;
	} else if (c->ret == 0 && info->kind == FFM_KIND_FREE && c->dst) {
		managed_drop(m, p, c->dst);
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

/* Whether the window that saw an access at @addr was in place in thread t by @end_ns. */
static bool window_in_time(const struct proc *p, const struct thread *t, uint64_t addr,
			   uint64_t end_ns)
{
	for (int s = 0; s < FFM_MEMTRACE_WATCHES; s++)
		if (p->slot_addr[s] && p->slot_addr[s] == (addr & ~7ull))
			return t->armed[s] && t->armed[s] <= end_ns;
	return false; /* moved since: unknown, not trusted */
}

int ffm_memtrace__on_hit(struct ffm_memtrace *m, const struct ffm_rec_hit *h, int64_t stack)
{
	struct proc *p = proc_get(m, h->hdr.tgid, false);
	struct thread *t = NULL;
	struct pend_sync *ps;
	uint64_t from;

	for (size_t i = 0; p && i < p->nt; i++)
		if (p->t[i].tid == h->hdr.tid)
			t = &p->t[i];
	if (!t || !t->ps.open || t->ps.used || h->hdr.ts_ns < t->ps.end_ns)
		return 0; /* outside any sync window */
	ps = &t->ps;
	ps->used = true;
	ps->late = !window_in_time(p, t, h->addr, ps->end_ns);
	ps->use_addr = h->addr;
	/* From the end of the sync's return probe when it is this sync's (ffm_rec_hit), less
	 * the trap's latency: an access right after the return reads 0. */
	from = h->sync_done_ns >= ps->end_ns && h->sync_done_ns <= h->hdr.ts_ns ? h->sync_done_ns :
										  ps->end_ns;
	ps->use_delay = h->hdr.ts_ns - from > m->st.use_latency_ns ?
				h->hdr.ts_ns - from - m->st.use_latency_ns :
				0;
	ps->use_stack = stack;
	/* The range the access protects: the one holding the watched word that was hit. */
	for (size_t i = 0; i < p->nr; i++) {
		const struct range *r = &p->r[i];

		if (h->addr >= (r->lo & ~7ull) && h->addr < r->hi) {
			ps->prot_lo = r->lo;
			ps->prot_hi = r->hi;
			break;
		}
	}
	return 0;
}

static void proc_release(struct proc *p)
{
	for (size_t i = 0; i < p->nt; i++) {
		for (int s = 0; s < FFM_MEMTRACE_WATCHES; s++)
			p->t[i].w[s] = ffm_watch__free(p->t[i].w[s]);
		p->t[i].fw = ffm_watch__free(p->t[i].fw);
	}
	for (size_t i = 0; i < p->nr; i++)
		free(p->r[i].seen);
	free(p->t);
	free(p->r);
	free(p->mr);
	p->t = NULL;
	p->r = NULL;
	p->mr = NULL;
	p->nt = p->nr = p->capt = p->capr = p->nmr = p->capmr = 0;
}

/* A process's open windows closed (that of its last sync runs to its exit or the run's end),
 * its watchpoints released. */
static int close_proc(struct ffm_memtrace *m, struct proc *p)
{
	int err = 0;

	if (p->nmr) {
		p->nmr = 0;
		managed_push(m, p);
	}
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
	if (!opts || !opts->store ||
	    (opts->stage != FFM_STAGE_MEMORY && opts->stage != FFM_STAGE_SYNC_USE))
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
	if (watching(m)) {
		int err = ffm_collector__use_latency(m->o.collector, &m->st.use_latency_ns);

		if (err)
			log_warn("cannot time the watchpoints' own latency (%s): first uses are timed "
				 "with it", strerror(-err));
		else
			log_debug("first-use timing: %.1f us of probe and trap latency taken off each delay",
				  (double)m->st.use_latency_ns / 1e3);
	}
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
	free(m->mf);
	free(m);
	return NULL;
}

void ffm_memtrace__stats(const struct ffm_memtrace *m, struct ffm_memtrace_stats *out)
{
	*out = m->st;
}

/* ---- the run ----------------------------------------------------------------------------- */

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
	if (!err)
		err = managed_store(m);
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
