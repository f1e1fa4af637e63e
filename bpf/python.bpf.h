// SPDX-License-Identifier: GPL-2.0
/*
 * ffm's collector, its Python part (included by bpf/ffm.bpf.c before the probes that take a
 * stack key): the calling thread's CPython frames, read at the probe, for the stack key and
 * the first-seen stack record (bpf/ffm.h, struct ffm_py_frame).
 *
 * Only processes in the pyprocs map walk (user space adds one once it has checked its CPython
 * build); any other pays one hash lookup. The thread's PyThreadState is the one of the main
 * interpreter's whose thread_id is the task's fsbase, cached in its struct thr and checked at
 * each use. Why, and how frames are read: docs/BPF.md, "Python frames".
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

/* Frames are read in blocks of the 3.11+ data stack, a frame elsewhere on its own
 * (docs/BPF.md, "Frames read in blocks"). */
#define PY_BLOCK 8192 /* 8 KiB: 30 frames of a few locals each, measured faster than 4 KiB */

/* 3.12's C-stack shims: the window read around the innermost _PyCFrame also covers its shim,
 * at a distance learned in BPF (ffm_py_layout.cf_shim; docs/BPF.md, "3.12's C-stack shims"). */
#define PY_SHIM_MAX 512 /* |cf_shim| at most: the two are locals of one function */
#define PY_WIN (PY_SHIM_MAX + 128)

/* Where a walk is (in the per-CPU scratch, not on the stack: the verifier then checks one
 * step of the bpf_loop for any state instead of following each frame count). */
struct pycur {
	__u64 fr;
	__u64 lo, hi;   /* the data stack's used part: frames there are read in blocks */
	__u64 blo, bhi; /* the user addresses s->blk[0, bhi - blo) holds; 0: none */
	__u64 wlo, whi; /* the window around the _PyCFrame in s->blk[PY_BLOCK, ...); 0: none */
	__u64 cf;       /* the innermost _PyCFrame (CFRAME chains), 0: none */
	__u64 h;        /* the kept frames' part of the stack key so far */
	__u32 n;
	__u32 shims;    /* shim frames met */
	__s32 learn;    /* a shim's distance from cf to keep in the layout, 0: none */
	__u32 _pad;
};

#define PY_KEY_SEED 0x7079746830ULL /* the Python part's seed */

/*
 * Per-CPU scratch: the walk in progress, the copied thread-state prefix (ts_read bytes; words
 * read at (off & 0x1f8)) and the frames: blk[0, PY_BLOCK) a block of the data stack,
 * [PY_BLOCK, PY_BLOCK + PY_WIN) the window around the innermost _PyCFrame, from PY_FR_AT a
 * frame read on its own (FFM_PY_FR_READ bytes). A frame's fields are read at (its offset in
 * blk, <= PY_FR_AT) + (field & 0x7f): always inside blk. Both arrays are 8-aligned
 * so that a word is one load.
 */
struct pyscratch {
	struct pycur c;
	__u8 ts[512] __attribute__((aligned(8)));
	/* a code object's head (FFM_PY_CO_READ bytes; words read at (off & 0xf8)), for its
	 * code record (py_send_codes) */
	__u8 co[256] __attribute__((aligned(8)));
	__u8 blk[PY_BLOCK + PY_WIN + 128] __attribute__((aligned(8)));
};

#define PY_FR_AT (PY_BLOCK + PY_WIN) /* where a frame read on its own is copied */

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pyscratch);
} py_scratch SEC(".maps");

/* The u64 at @off of a copied thread-state prefix (offsets are 8-aligned, < FFM_PY_TS_READ). */
static __always_inline __u64 ts_word(const struct pyscratch *s, __u32 off)
{
	return *(const __u64 *)(s->ts + (off & 0x1f8));
}

/* Copy the prefix of thread state @ts; its thread_id, or 0 when unreadable. */
static __always_inline __u64 py_read_ts(struct pyscratch *s, const struct ffm_py_layout *l,
					__u64 ts)
{
	__u32 n = l->ts_read;

	if (n > FFM_PY_TS_READ)
		n = FFM_PY_TS_READ;
	if (!ts || bpf_probe_read_user(s->ts, n, (void *)ts))
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

/* The thread state of the calling thread (its prefix left in @s->ts), 0 if none; cached in
 * @c, the thread's struct thr (NULL: none, searched every time). */
static __always_inline __u64 py_tstate(struct pyscratch *s, const struct ffm_py_layout *l,
				       struct thr *c, __u64 fsbase)
{
	struct ts_search q = { .l = l, .s = s, .fsbase = fsbase };
	__u64 now, head = 0;

	if (c && c->py_fsbase == fsbase) {
		if (c->py_tstate && py_read_ts(s, l, c->py_tstate) == fsbase)
			return c->py_tstate;
		now = bpf_ktime_get_ns();
		if (!c->py_tstate && now - c->py_checked_ns < PY_RETRY_NS)
			return 0;
	} else {
		now = bpf_ktime_get_ns();
	}
	if (bpf_probe_read_user(&head, sizeof(head), (void *)l->interp) || !head ||
	    bpf_probe_read_user(&q.ts, sizeof(q.ts), (void *)(head + l->is_threads)))
		q.ts = 0;
	if (q.ts)
		bpf_loop(PY_MAX_THREADS, ts_step, &q, 0);
	if (q.ts && ts_word(s, l->ts_thread_id) != fsbase)
		q.ts = 0; /* the list was longer than PY_MAX_THREADS */
	if (c) {
		c->py_tstate = q.ts;
		c->py_fsbase = fsbase;
		c->py_checked_ns = now;
	}
	return q.ts;
}

/* Copy the window of _PyCFrame @cf that covers the shim at @d from it (see PY_SHIM_MAX) into
 * s->blk[PY_BLOCK, ...); its current_frame, or 0 when the window is not readable. */
static __always_inline __u64 py_window(struct pyscratch *s, const struct ffm_py_layout *l,
				       __u64 cf, __s32 d)
{
	struct pycur *q = &s->c;
	__u64 lo = d < 0 ? cf + d : cf, hi = cf + (d > 0 ? d : 0) + FFM_PY_FR_READ, len = hi - lo;
	__u64 at = cf + (l->cf_frame & 0x38) - lo;

	asm volatile("" : "+r"(len));
	if (len > PY_WIN || at > PY_WIN - 8 || hi < lo)
		return 0;
	if (bpf_probe_read_user(s->blk + PY_BLOCK, len, (void *)lo))
		return 0;
	q->wlo = lo;
	q->whi = hi;
	return *(const __u64 *)(s->blk + PY_BLOCK + (at & (PY_WIN - 8)));
}

/* The innermost frame of the thread state whose prefix is in @s->ts. */
static __always_inline __u64 py_top_frame(struct pyscratch *s, const struct ffm_py_layout *l)
{
	__u64 p = ts_word(s, l->ts_frame), f = 0;
	__s32 d = l->cf_shim;

	if (l->chain != FFM_PY_CHAIN_CFRAME)
		return p;
	s->c.cf = p;
	if (!p)
		return 0;
	if (d && d >= -PY_SHIM_MAX && d <= PY_SHIM_MAX) {
		f = py_window(s, l, p, d);
		if (f)
			return f;
	}
	if (bpf_probe_read_user(&f, sizeof(f), (void *)(p + l->cf_frame)))
		return 0;
	return f;
}

/* The walk of one frame chain (bpf_loop's context). */
struct fr_walk {
	const struct ffm_py_layout *l;
	struct pyscratch *s;
	struct ffm_py_frame *py;
};

/* The word at @off of s->blk: a frame's offset (<= PY_FR_AT) plus a field's (& 0x78). */
static __always_inline __u64 blk_word(const struct pyscratch *s, __u32 off)
{
	return off <= PY_FR_AT + 120 ? *(const __u64 *)(s->blk + off) : 0;
}

/* Where the frame at @fr is in s->blk after reading it if needed: its offset, or -1. A
 * PyFrameObject (@object) is on the heap, never in a block or window: read on its own. */
static __always_inline long fr_locate(struct pyscratch *s, __u64 fr, bool object)
{
	struct pycur *q = &s->c;
	__u64 end = fr + FFM_PY_FR_READ, lo, len;

	if (end < fr)
		return -1;
	if (fr >= q->blo && end <= q->bhi)
		return fr - q->blo;
	if (fr >= q->wlo && end <= q->whi)
		return PY_BLOCK + (fr - q->wlo);
	if (fr >= q->lo && end <= q->hi && end > fr) {
		lo = end - q->lo > PY_BLOCK ? end - PY_BLOCK : q->lo;
		len = end - lo;
		asm volatile("" : "+r"(len)); /* the check below on the register passed */
		if (len > PY_BLOCK)
			return -1;
		if (!bpf_probe_read_user(s->blk, len, (void *)lo)) {
			q->blo = lo;
			q->bhi = end;
			return fr - lo;
		}
		q->blo = q->bhi = 0;
	}
	if (object ? bpf_probe_read_user(s->blk + PY_FR_AT, FFM_PY_FO_READ, (void *)fr) :
		     bpf_probe_read_user(s->blk + PY_FR_AT, FFM_PY_FR_READ, (void *)fr))
		return -1;
	return PY_FR_AT;
}

/* A frame's word of the stack key: the code object and the instruction's offset, rotated
 * into bits a user address does not use (x86-64 user space is below 2^47). */
static __always_inline __u64 fr_word(__u64 code, __u32 instr)
{
	return code ^ ((__u64)instr << 47 | (__u64)instr >> 17);
}

static long fr_step(__u32 i, void *ctx)
{
	struct fr_walk *w = ctx;
	struct pyscratch *s = w->s;
	struct pycur *q = &s->c;
	const struct ffm_py_layout *l = w->l;
	__u64 code, instr, fr;
	__u32 n = q->n, o, off;
	long at;

	if (!q->fr || n >= FFM_PY_FRAMES)
		return 1;
	at = fr_locate(s, q->fr, l->chain == FFM_PY_CHAIN_OBJECT);
	if (at < 0 || at > PY_FR_AT)
		return 1;
	o = at;
	code = blk_word(s, o + (l->fr_code & 0x78));
	instr = blk_word(s, o + (l->fr_instr & 0x78));
	fr = q->fr;
	q->fr = blk_word(s, o + (l->fr_previous & 0x78));
	if (l->owner_cstack != 0xff && s->blk[o + (l->fr_owner & 0x7f)] == l->owner_cstack) {
		/* a shim frame of a C entry into the interpreter; the first one, when read on its
		 * own, tells where the innermost loop's shim lies from its _PyCFrame */
		if (!q->shims++ && o == PY_FR_AT && q->cf && !((fr - q->cf) & 7) &&
		    fr - q->cf + PY_SHIM_MAX <= 2 * PY_SHIM_MAX)
			q->learn = fr - q->cf;
		return 0;
	}
	if (!code)
		return 0;
	if (l->chain == FFM_PY_CHAIN_OBJECT) /* f_lasti: -1 before the first instruction */
		off = l->lasti_shift ? (__u32)((__s32)instr * 2) : (__u32)instr;
	else
		off = instr - code - l->co_code;
	w->py[n & (FFM_PY_FRAMES - 1)].code = code;
	w->py[n & (FFM_PY_FRAMES - 1)].instr = (__s32)off;
	w->py[n & (FFM_PY_FRAMES - 1)]._pad = 0;
	q->h = mix(q->h, fr_word(code, off));
	q->n = n + 1;
	return 0;
}

/* The calling thread's Python frames into @py (at most FFM_PY_FRAMES, innermost first);
 * returns how many, with FFM_PY_* in *flags and their part of the stack key in *hash (one mix
 * per frame, made as the frame is found). 0 for a process outside pyprocs. @t is the thread's
 * state where the caller has it (NULL: looked up here, made if missing), which caches the
 * thread's PyThreadState: one task-storage lookup an event, not two. */
static __always_inline __u32 py_walk(__u32 tgid, struct thr *t, struct ffm_py_frame *py,
				     __u32 *flags, __u64 *hash)
{
	struct ffm_py_layout *l = bpf_map_lookup_elem(&pyprocs, &tgid);
	struct fr_walk w = { .l = l, .py = py };
	struct task_struct *task;
	struct pycur *q;
	__u32 zero = 0;
	__u64 chunk;

	*flags = 0;
	*hash = 0;
	if (!l)
		return 0;
	w.s = bpf_map_lookup_elem(&py_scratch, &zero);
	if (!w.s)
		return 0;
	task = bpf_get_current_task_btf();
	if (!t)
		t = thread_state(true);
	if (!py_tstate(w.s, l, t, BPF_CORE_READ(task, thread.fsbase))) {
		*flags = FFM_PY_NO_TSTATE;
		return 0;
	}
	q = &w.s->c;
	chunk = l->chain == FFM_PY_CHAIN_OBJECT ? 0 : ts_word(w.s, l->ts_chunk);
	q->hi = ts_word(w.s, l->ts_top);
	q->lo = chunk + 24; /* offsetof(_PyStackChunk, data) */
	if (!chunk || q->lo < chunk || q->hi <= q->lo)
		q->lo = q->hi = 0; /* no data stack: every frame read on its own */
	q->blo = q->bhi = q->wlo = q->whi = q->cf = 0;
	q->n = q->shims = 0;
	q->learn = 0;
	q->h = PY_KEY_SEED;
	q->fr = py_top_frame(w.s, l);
	bpf_loop(FFM_PY_FRAMES + 8, fr_step, &w, 0);
	if (q->learn)
		l->cf_shim = q->learn;
	if (q->fr && q->n >= FFM_PY_FRAMES)
		*flags |= FFM_PY_TRUNCATED;
	*hash = q->h;
	return q->n < FFM_PY_FRAMES ? q->n : FFM_PY_FRAMES;
}

/* The Python part of a stack key: @h unchanged where there are no Python frames. */
static __always_inline __u64 py_mix(__u64 h, __u32 n, __u64 hash)
{
	return n ? mix(h, hash) : h;
}

/*
 * Code records (FFM_REC_PYCODE): a copy of each code object a new stack's frames run, sent
 * before the stack's record while the frames still run it, so that user space never has to
 * read a code object that the interpreter may have freed since (a short program's last new
 * stacks are unwound while it finalizes). Once per process, job run and code object; the key
 * holds the object's own pointers too, so a freed object's address reused by another code
 * object is sent again. Only at new stacks, which are rare by design.
 */
struct pycode_key {
	__u32 tgid;
	__u32 gen;
	__u64 code;
	__u64 tag; /* the code object's filename, qualname, linetable and first line */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct pycode_key);
	__type(value, __u8);
} pycodes SEC(".maps");

#define PY_MAX_CHARS (1u << 20)

struct code_send {
	const struct ffm_py_layout *l;
	struct pyscratch *s;
	const struct ffm_py_frame *py;
	__u32 n, job, gen;
	__u64 id, now;
};

static __always_inline __u64 rec_word(const __u8 *p, __u32 off)
{
	return *(const __u64 *)(p + (off & 0xf8));
}

/* Copy the characters of the compact str at @str into @dst (@cap bytes, a power of two);
 * the header is first read into @dst too. */
static __always_inline void str_snap(__u8 *dst, __u32 cap, __u64 str, const struct ffm_py_layout *l,
				     __u8 *kind, __u32 *chars, __u16 *bytes)
{
	__u64 type, len, data, n; /* n: 64 bits, so the check and the call see one register */
	__u32 state, k;

	*kind = 0;
	*chars = 0;
	*bytes = 0;
	if (!str || bpf_probe_read_user(dst, 40, (void *)str))
		return;
	type = rec_word(dst, FFM_PY_OB_TYPE);
	len = rec_word(dst, FFM_PY_STR_LENGTH);
	state = *(const __u32 *)(dst + FFM_PY_STR_STATE);
	k = (state >> 2) & 7;
	if (type != l->str_type || !((state >> 5) & 1) || (k != 1 && k != 2 && k != 4) ||
	    len > PY_MAX_CHARS)
		return;
	data = str + (((state >> 6) & 1) ? l->str_ascii : l->str_compact);
	n = len * k;
	if (n > cap)
		n = cap;
	asm volatile("" : "+r"(n)); /* the check below on the register passed */
	if (n > cap || (n && bpf_probe_read_user(dst, n, (void *)data)))
		return;
	*kind = (__u8)k;
	*chars = (__u32)len;
	*bytes = (__u16)n;
}

static long code_step(__u32 i, void *ctx)
{
	struct code_send *q = ctx;
	const struct ffm_py_layout *l = q->l;
	struct pycode_key k = { .tgid = q->id >> 32, .gen = q->gen };
	struct ffm_rec_pycode *r;
	__u64 file, qual, table, size, n;
	__s32 first;
	__u8 one = 1;

	if (i >= q->n || i >= FFM_PY_FRAMES)
		return 1;
	asm volatile("" : "+r"(i)); /* keep the mask below: the verifier needs it */
	k.code = q->py[i & (FFM_PY_FRAMES - 1)].code;
	/* The code object's head: which object it is, and whether it was sent. */
	if (bpf_probe_read_user(q->s->co, FFM_PY_CO_READ, (void *)k.code) ||
	    rec_word(q->s->co, FFM_PY_OB_TYPE) != l->code_type)
		return 0;
	file = rec_word(q->s->co, l->co_filename);
	qual = rec_word(q->s->co, l->co_qualname);
	table = rec_word(q->s->co, l->co_linetable);
	first = *(const __s32 *)(q->s->co + (l->co_firstlineno & 0xfc));
	k.tag = mix(mix(mix(mix(0, file), qual), table), (__u32)first);
	if (bpf_map_lookup_elem(&pycodes, &k))
		return 0;
	r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r)
		return 1;
	fill_hdr(&r->hdr, FFM_REC_PYCODE, q->id, q->job, q->now);
	r->code = k.code;
	r->first_line = first;
	str_snap(r->file, FFM_PY_FILE_BYTES, file, l, &r->file_kind, &r->file_chars, &r->file_bytes);
	str_snap(r->qual, FFM_PY_QUAL_BYTES, qual, l, &r->qual_kind, &r->qual_chars, &r->qual_bytes);
	r->table_size = 0;
	r->table_bytes = 0;
	if (table && !bpf_probe_read_user(r->table, 24, (void *)table) &&
	    rec_word(r->table, FFM_PY_OB_TYPE) == l->bytes_type) {
		size = rec_word(r->table, FFM_PY_OB_SIZE);
		n = size > FFM_PY_TABLE_BYTES ? FFM_PY_TABLE_BYTES : size;
		asm volatile("" : "+r"(n)); /* the check below on the register passed */
		if (n <= FFM_PY_TABLE_BYTES && size <= 0xffffffffu &&
		    (!n || !bpf_probe_read_user(r->table, n, (void *)(table + FFM_PY_BYTES_SVAL)))) {
			r->table_size = (__u32)size;
			r->table_bytes = (__u16)n;
		}
	}
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP); /* the stack record after it wakes the reader */
	bpf_map_update_elem(&pycodes, &k, &one, BPF_ANY);
	return 0;
}

/* The code records of a new stack's @n frames @py (before its stack record). */
static __always_inline void py_send_codes(const struct ffm_py_frame *py, __u32 n, __u64 id,
					  __u32 job, __u32 gen, __u64 now)
{
	__u32 tgid = id >> 32, zero = 0;
	struct code_send q = { .py = py, .n = n, .job = job, .gen = gen, .id = id, .now = now };

	if (!n)
		return;
	q.l = bpf_map_lookup_elem(&pyprocs, &tgid);
	q.s = bpf_map_lookup_elem(&py_scratch, &zero);
	if (q.l && q.s)
		bpf_loop(FFM_PY_FRAMES, code_step, &q, 0);
}

/* A forked child has its parent's image, hence its parent's layout. */
static __always_inline void py_fork(__u32 ptgid, __u32 ctgid)
{
	struct ffm_py_layout *l = bpf_map_lookup_elem(&pyprocs, &ptgid);

	if (l)
		bpf_map_update_elem(&pyprocs, &ctgid, l, BPF_ANY);
}

#endif /* FFM_PYTHON_BPF_H */
