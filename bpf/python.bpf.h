// SPDX-License-Identifier: GPL-2.0
/*
 * ffm's collector, its Python part (included by bpf/ffm.bpf.c before the probes that take a
 * stack key): the calling thread's CPython frames, read at the probe, for the stack key and
 * the first-seen stack record (bpf/ffm.h, struct ffm_py_frame).
 *
 * Only processes in the pyprocs map walk: user space adds a job's process there once it has
 * found a CPython build it knows in it and checked the layout against the live process
 * (symbols/python.c). Any other process pays one hash lookup inside the existing probes; no
 * probe is ever placed on the interpreter.
 *
 * The thread's PyThreadState: the GIL's holder is no use (ctypes and most of PyTorch release
 * the GIL around the foreign call), and TLS offsets differ per build. Instead the main
 * interpreter's list of thread states is walked for the one whose thread_id (pthread_self(),
 * on x86-64 glibc the thread pointer) equals the task's fsbase; the answer is cached in task
 * storage and checked again (its thread_id) at each use, so a freed and reused thread state
 * is never followed.
 */
#ifndef FFM_PYTHON_BPF_H
#define FFM_PYTHON_BPF_H

#define PY_MAX_THREADS 64   /* thread states looked at per search */
#define PY_RETRY_NS 50000000 /* a thread without a thread state is searched again after this */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FFM_MAX_PROCS);
	__type(key, __u32);
	__type(value, struct ffm_py_layout);
} pyprocs SEC(".maps");

/* Per thread: the thread state found for it (0: none found at checked_ns). */
struct pythr {
	__u64 tstate;
	__u64 fsbase;
	__u64 checked_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct pythr);
} pythreads SEC(".maps");

/* Per-CPU scratch: the copied prefixes of a thread state and of a frame. */
struct pyscratch {
	__u8 ts[FFM_PY_TS_READ];
	__u8 fr[128]; /* FFM_PY_FR_READ copied; owner is read at (fr_owner & 0x7f) */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pyscratch);
} py_scratch SEC(".maps");

/* The u64 at @off of a copied thread-state prefix (offsets are 8-aligned, < FFM_PY_TS_READ). */
static __always_inline __u64 ts_word(const struct pyscratch *s, __u32 off)
{
	__u64 v;

	__builtin_memcpy(&v, s->ts + (off & (FFM_PY_TS_READ - 8)), 8);
	return v;
}

/* The same for a frame prefix (code, previous, instr are 8-aligned, < 64). */
static __always_inline __u64 fr_word(const struct pyscratch *s, __u32 off)
{
	__u64 v;

	__builtin_memcpy(&v, s->fr + (off & 0x38), 8);
	return v;
}

/* Copy the prefix of thread state @ts; its thread_id, or 0 when unreadable. */
static __always_inline __u64 py_read_ts(struct pyscratch *s, const struct ffm_py_layout *l, __u64 ts)
{
	if (!ts || bpf_probe_read_user(s->ts, FFM_PY_TS_READ, (void *)ts))
		return 0;
	return ts_word(s, l->ts_thread_id);
}

/* One search through the interpreter's thread states (bpf_loop: verified once). */
struct ts_search {
	const struct ffm_py_layout *l;
	struct pyscratch *s;
	__u64 ts, fsbase;
};

static long ts_step(__u32 i, void *ctx)
{
	struct ts_search *q = ctx;

	if (py_read_ts(q->s, q->l, q->ts) == q->fsbase)
		return 1;
	q->ts = q->ts ? ts_word(q->s, q->l->ts_next) : 0;
	return q->ts ? 0 : 1;
}

/* The thread state of the calling thread (its prefix left in @s->ts), 0 if none. */
static __always_inline __u64 py_tstate(struct pyscratch *s, const struct ffm_py_layout *l,
				       __u64 fsbase)
{
	struct pythr *c = bpf_task_storage_get(&pythreads, bpf_get_current_task_btf(), 0,
					       BPF_LOCAL_STORAGE_GET_F_CREATE);
	struct ts_search q = { .l = l, .s = s, .fsbase = fsbase };
	__u64 now = bpf_ktime_get_ns(), head = 0;

	if (c && c->fsbase == fsbase) {
		if (c->tstate && py_read_ts(s, l, c->tstate) == fsbase)
			return c->tstate;
		if (!c->tstate && now - c->checked_ns < PY_RETRY_NS)
			return 0;
	}
	if (bpf_probe_read_user(&head, sizeof(head), (void *)l->interp) || !head ||
	    bpf_probe_read_user(&q.ts, sizeof(q.ts), (void *)(head + l->is_threads)))
		q.ts = 0;
	if (q.ts)
		bpf_loop(PY_MAX_THREADS, ts_step, &q, 0);
	if (q.ts && ts_word(s, l->ts_thread_id) != fsbase)
		q.ts = 0; /* the list was longer than PY_MAX_THREADS */
	if (c) {
		c->tstate = q.ts;
		c->fsbase = fsbase;
		c->checked_ns = now;
	}
	return q.ts;
}

/* The innermost frame of the thread state whose prefix is in @s->ts. */
static __always_inline __u64 py_top_frame(struct pyscratch *s, const struct ffm_py_layout *l)
{
	__u64 p = ts_word(s, l->ts_frame), f = 0;

	if (l->chain == FFM_PY_CHAIN_CURRENT)
		return p;
	if (!p || bpf_probe_read_user(&f, sizeof(f), (void *)(p + l->cf_frame)))
		return 0;
	return f;
}

/* One step of the frame chain (bpf_loop). */
struct fr_walk {
	const struct ffm_py_layout *l;
	struct pyscratch *s;
	struct ffm_py_frame *py;
	__u64 fr;
	__u32 n;
};

static long fr_step(__u32 i, void *ctx)
{
	struct fr_walk *q = ctx;
	struct pyscratch *s = q->s;
	const struct ffm_py_layout *l = q->l;
	__u64 code, instr;
	__u32 n = q->n;

	if (!q->fr || n >= FFM_PY_FRAMES || bpf_probe_read_user(s->fr, FFM_PY_FR_READ, (void *)q->fr))
		return 1;
	code = fr_word(s, l->fr_code);
	instr = fr_word(s, l->fr_instr);
	q->fr = fr_word(s, l->fr_previous);
	if (!code || s->fr[l->fr_owner & 0x7f] == l->owner_cstack)
		return 0; /* a shim frame of a C entry into the interpreter */
	q->py[n & (FFM_PY_FRAMES - 1)].code = code;
	q->py[n & (FFM_PY_FRAMES - 1)].instr = (__s32)(instr - code - l->co_code);
	q->py[n & (FFM_PY_FRAMES - 1)]._pad = 0;
	q->n = n + 1;
	return 0;
}

/* The calling thread's Python frames into @py (at most FFM_PY_FRAMES, innermost first);
 * returns how many, with FFM_PY_* in *flags. 0 for a process outside pyprocs. */
static __always_inline __u32 py_walk(__u32 tgid, struct ffm_py_frame *py, __u32 *flags)
{
	struct ffm_py_layout *l = bpf_map_lookup_elem(&pyprocs, &tgid);
	struct fr_walk q = { .l = l, .py = py };
	struct task_struct *task;
	__u32 zero = 0;

	*flags = 0;
	if (!l)
		return 0;
	q.s = bpf_map_lookup_elem(&py_scratch, &zero);
	if (!q.s)
		return 0;
	task = bpf_get_current_task_btf();
	if (!py_tstate(q.s, l, BPF_CORE_READ(task, thread.fsbase))) {
		*flags = FFM_PY_NO_TSTATE;
		return 0;
	}
	q.fr = py_top_frame(q.s, l);
	bpf_loop(FFM_PY_FRAMES + 8, fr_step, &q, 0);
	if (q.fr && q.n >= FFM_PY_FRAMES)
		*flags |= FFM_PY_TRUNCATED;
	return q.n;
}

/* The Python part of a stack key. */
static __always_inline __u64 py_mix(__u64 h, const struct ffm_py_frame *py, __u32 n)
{
	for (int i = 0; i < FFM_PY_FRAMES; i++) {
		if (i >= n)
			break;
		h = mix(h, py[i].code);
		h = mix(h, (__u64)(__u32)py[i].instr);
	}
	return h;
}

/* A forked child has its parent's image, hence its parent's layout. */
static __always_inline void py_fork(__u32 ptgid, __u32 ctgid)
{
	struct ffm_py_layout *l = bpf_map_lookup_elem(&pyprocs, &ptgid);

	if (l)
		bpf_map_update_elem(&pyprocs, &ctgid, l, BPF_ANY);
}

#endif /* FFM_PYTHON_BPF_H */
