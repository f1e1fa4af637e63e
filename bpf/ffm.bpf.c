// SPDX-License-Identifier: GPL-2.0
/*
 * ffm's collector: probes on libcuda (the internal wait function and the API entry points of a
 * stage) and on process exec/fork/exit. Records go to one ring buffer; see bpf/ffm.h for the
 * records and the stack-key scheme.
 *
 * Everything except the exec/fork/exit tracepoints runs only for processes in the procs map;
 * any other process returns after one hash lookup. The process tracepoints and the guards that
 * hold a job's process are in bpf/procs.bpf.h, included at the end: one object, one skeleton.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "ffm.h"
#include "ffm_hash.h"

char LICENSE[] SEC("license") = "GPL";

/* Knobs, set between open and load. */
const volatile __u32 ringbuf_wakeup_bytes = FFM_RINGBUF_BYTES / 8;
/* ffmd's own process (0: none, e.g. ffmctl profile): neither it nor a program it runs (the
 * calibration probe) ever joins a job. A uid 0 rule or a cgroup rule that holds ffmd would
 * otherwise have the map guard stop the probe program that makes a driver ready, and the
 * driver wait for the probe: a deadlock. */
const volatile __u32 self_tgid = 0;
/* Set by the collector when the uprobes are sessions (an entry-only program then says so). */
const volatile __u32 session_mode = 0;
/* What one probed call's traps cost (the entry breakpoint and the return trampoline, with a
 * program as small as the entry's), measured by the collector after load
 * (ffm_collector__probe_trap_ns); added to struct thr.probe_ns per probed call. */
__u64 probe_trap_ns = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, FFM_RINGBUF_BYTES);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FFM_MAX_PROCS);
	__type(key, __u32);
	__type(value, struct ffm_proc);
} procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FFM_MAX_JOBS);
	__type(key, __u32);
	__type(value, struct ffm_job_cfg);
} jobs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FFM_MAX_JOBS + 1);
	__type(key, __u32);
	__type(value, struct ffm_rec_drops);
} drops SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FFM_MAX_JOBS + 1);
	__type(key, __u32);
	__type(value, struct ffm_bpf_overhead);
} bpf_overhead SEC(".maps");

/* Rules that make a newly exec'd process part of a job: value = job slot. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u32);
} uid_rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u64);
	__type(value, __u32);
} cgroup_rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, struct ffm_exe_key);
	__type(value, __u32);
} exe_rules SEC(".maps");

/* Per-thread state across entry and return probes. LRU: a thread killed mid-call leaves an
 * entry that is reclaimed under pressure instead of filling the map. */
struct thr {
	__u64 wait_start;
	__u64 wait_acc;
	__u64 call_start;
	__u64 cookie;
	__u64 bytes, dst, src, stream, outp;
	__u64 hash;     /* stage 3: hash of an HtoD source taken at the call's entry */
	__u32 wait_depth;
	__u32 call_depth;
	__u32 nwaits;
	__u32 nslept;   /* ... of which the thread slept in (ffm_rec_call.nslept) */
	__u64 wait_nvcsw; /* its voluntary context switches at the outermost wait's entry */
	__u32 hflags;   /* FFM_XFER_* of hash; HASHED_AT_ENTRY when hash is valid */
	__u32 sync_gen; /* synchronizations this thread ended (stages 3-4) */
	__u64 sync_done; /* when the return probe of the last of them finished (ffm_rec_hit) */
	__u32 hit_gen;  /* sync_gen + 1 once a watchpoint hit was reported after that sync */
	/* The stack key this thread sent or found in `seen` last, and its job's gen then: a
	 * loop that synchronizes at one place skips the `seen` lookup (send_stack). */
	__u64 seen_key;
	__u32 seen_gen;
	__u32 gen; /* struct ffm_job_cfg.gen of the job run this state belongs to */
	__u32 wait_epoch; /* struct ffm_proc.link_epoch at the outermost wait's entry */
	__u32 waits_alone; /* its job's FFM_JOB_WAITS_ALONE then: read at the return without
			    * the job's lookup, which a wait inside a call does not need else */
	/* sp at the entry of the outermost wait and call in progress (or last ended) */
	__u64 wait_sp, call_sp;
	__u64 probe_ns; /* ffm_rec_call.probe_ns */
	__u64 ret_ip;   /* the return address of the last probed call to return (in_own_probe) */
	/* The Python thread state found for this thread (bpf/python.bpf.h; 0: none found at
	 * py_checked_ns), and the fsbase it was found for. */
	__u64 py_tstate, py_fsbase, py_checked_ns;
};

/*
 * Depths that heal. A probe whose links are replaced (a process's probes for its next job
 * made before the last job's are gone: each detach waits for the kernel) runs twice per call
 * for a while, and a link removed between a call's entry and return leaves the entry
 * uncounted-for. Neither may leave a thread's depth off for good, which would hide all its
 * later calls. An entry at or above the stack position of the outermost call in progress
 * cannot be inside that call: the state starts over there (a truly nested call has a lower
 * sp). A return at depth 0 exactly where the last outermost call returned is the second run
 * of that return, not a loss.
 */
static __always_inline bool stale_outer(__u32 depth, __u64 outer_sp, __u64 sp)
{
	return depth && sp >= outer_sp;
}

static __always_inline bool repeated_return(__u64 outer_sp, __u64 sp)
{
	return sp == outer_sp + 8; /* the return popped the return address */
}

#define HASHED_AT_ENTRY (1u << 31)

/*
 * A thread's state lives in task-local storage: found from the task itself (no hash of the
 * tid, a stage-1 wait does it twice), made on the thread's first probed call and freed by the
 * kernel with the task. A NULL from bpf_task_storage_get means no memory, or this CPU already
 * inside task storage (a probe nested in another tracing program): counted as a drop.
 */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct thr);
} threads SEC(".maps");

/* The calling thread's state; @create: make it (zeroed) when the thread has none. */
static __always_inline struct thr *thread_state(bool create)
{
	return bpf_task_storage_get(&threads, bpf_get_current_task_btf(), 0,
				    create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
}

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct ffm_slot_key);
	__type(value, struct ffm_slots);
} slots SEC(".maps");

/* Stacks sent per process and job run (struct ffm_job_cfg.gen). */
struct seen_key {
	__u32 tgid;
	__u32 gen;
	__u64 stack_key;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 262144);
	__type(key, struct seen_key);
	__type(value, __u8);
} seen SEC(".maps");

static __always_inline void count_drop(__u32 job, __u32 reason)
{
	struct ffm_rec_drops *d;

	if (job >= FFM_MAX_JOBS)
		job = FFM_MAX_JOBS;
	d = bpf_map_lookup_elem(&drops, &job);
	if (d && reason < FFM_REC_DROP__MAX)
		d->n[reason]++;
}

/* A program that ran for a job's process since @t0: its time to the job (struct ffm_bpf_overhead).
 */
static __always_inline void charge(__u32 job, __u64 t0)
{
	struct ffm_bpf_overhead *c;

	if (job >= FFM_MAX_JOBS)
		job = FFM_MAX_JOBS;
	c = bpf_map_lookup_elem(&bpf_overhead, &job);
	if (c) {
		c->ns += bpf_ktime_get_ns() - t0;
		c->runs++;
	}
}

static __always_inline __u64 rb_flags(void)
{
	/* Wake the consumer only when a good share of the buffer is filled; otherwise it
	 * polls on a timer. A wake-up per record costs ~1.4 us (docs/DESIGN.md). */
	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= ringbuf_wakeup_bytes ?
		       BPF_RB_FORCE_WAKEUP :
		       BPF_RB_NO_WAKEUP;
}

static __always_inline void fill_hdr(struct ffm_rec_hdr *h, __u32 type, __u64 id, __u32 job,
				     __u64 now)
{
	h->type = type;
	h->flags = 0;
	h->cpu = bpf_get_smp_processor_id();
	h->ts_ns = now;
	h->tgid = id >> 32;
	h->tid = (__u32)id;
	h->job = job;
	h->_pad = 0;
}

static __always_inline struct ffm_proc *tracked(__u32 tgid)
{
	return bpf_map_lookup_elem(&procs, &tgid);
}

static __always_inline __u64 mix(__u64 h, __u64 w)
{
	/* 64-bit multiply-xorshift mix; keys only need to be distinct, not secret. */
	h ^= w + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return h;
}

/* Learn libcuda's text range in this process from an address inside it. */
struct vma_range {
	__u64 start, end;
};

static long vma_cb(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct vma_range *r = data;

	r->start = vma->vm_start;
	r->end = vma->vm_end;
	return 0;
}

static __always_inline void learn_lib_range(struct ffm_proc *p, __u64 ip)
{
	struct vma_range r = {};

	if (p->lib_end)
		return;
	/* bpf_find_vma wants its callback context on the stack. */
	if (bpf_find_vma(bpf_get_current_task_btf(), ip, vma_cb, &r, 0) == 0) {
		p->lib_start = r.start;
		p->lib_end = r.end;
	}
}

static __always_inline int in_lib(const struct ffm_proc *p, __u64 a)
{
	return a >= p->lib_start && a < p->lib_end;
}

#include "python.bpf.h"

#ifndef WALK_CHUNK
#define WALK_CHUNK 4096
#endif

struct walk {
	__u64 lib[FFM_LIB_FRAMES];
	__u32 nlib;
	__u32 truncated;
	__u64 callsite;
	__u64 callsite_slot;
	__u64 tramp; /* uretprobe_trampoline() of this process, taken once per walk */
	__u32 npy, py_flags; /* Python frames (bpf/python.bpf.h) */
	struct ffm_py_frame py[FFM_PY_FRAMES];
	/*
	 * The stack as the walk reads it: one aligned WALK_CHUNK of user memory at a time, not a
	 * read per frame. A read from user memory has a fixed price (~50-100 ns on the GPU
	 * nodes, their mitigations included) that dwarfs copying 1 KiB, and the real driver's
	 * wait sits several frames below the public function: per-frame reads made the walk most
	 * of what stage 1 cost. An aligned chunk never crosses a page, so it can be read whenever
	 * the frame in it can.
	 */
	__u64 chunk_lo; /* user address of chunk[0]; 0: nothing read yet */
	__u8 chunk[WALK_CHUNK];
};

/* Per-CPU scratch for the walk (too big for the 512-byte BPF stack together with the rest). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct walk);
} walk_scratch SEC(".maps");

/*
 * Return probes replace a function's return address on the stack with the address of the
 * kernel's uretprobe trampoline (the "[uprobes]" page) until the function returns. Any return
 * probe on a caller (ffm's own API probes of another job, another tool) therefore hides the
 * real return address from a stack walk. The task's pending return instances keep the
 * originals, each with the stack slot it was taken from (the sp at the probed entry).
 */
#define FFM_MAX_RETURN_INSTANCES 16

static __always_inline __u64 uretprobe_trampoline(void)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct mm_struct *mm = t->mm; /* trusted BTF pointers: plain loads, no helper calls */
	struct xol_area *xa;

	if (!mm)
		return 0;
	xa = mm->uprobes_state.xol_area;
	return xa ? xa->vaddr : 0;
}

/* The real return address for the word @ra read from stack slot @slot. */
static __always_inline __u64 fix_ret(__u64 ra, __u64 slot, __u64 tramp)
{
	struct task_struct *t;
	struct return_instance *ri;

	if (!tramp || ra != tramp)
		return ra;
	t = bpf_get_current_task_btf();
	ri = BPF_CORE_READ(t, utask, return_instances);
	for (int i = 0; i < FFM_MAX_RETURN_INSTANCES && ri; i++) {
		if (BPF_CORE_READ(ri, stack) == slot)
			return BPF_CORE_READ(ri, orig_ret_vaddr);
		ri = BPF_CORE_READ(ri, next);
	}
	return ra;
}

static __always_inline void walk_reset(struct walk *w)
{
	w->nlib = 0;
	w->truncated = 0;
	w->callsite = 0;
	w->callsite_slot = 0;
	w->chunk_lo = 0;
	w->npy = 0;
	w->py_flags = 0;
}

/* @n (8 or 16) bytes of the stack at @addr, through w's chunk; 0 or a negative errno. */
static __always_inline long stack_read(struct walk *w, void *dst, __u32 n, __u64 addr)
{
	__u64 lo = addr & ~(__u64)(WALK_CHUNK - 1), off = addr - lo;

	if (off > WALK_CHUNK - n)
		return bpf_probe_read_user(dst, n, (void *)addr); /* straddles two chunks */
	if (w->chunk_lo != lo) {
		long err = bpf_probe_read_user(w->chunk, WALK_CHUNK, (void *)lo);

		if (err) {
			w->chunk_lo = 0;
			return err;
		}
		w->chunk_lo = lo;
	}
	off &= WALK_CHUNK - 1; /* for the verifier: both bounds */
	if (off > WALK_CHUNK - 16)
		return bpf_probe_read_user(dst, n, (void *)addr);
	__builtin_memcpy(dst, w->chunk + off, 8);
	if (n == 16)
		__builtin_memcpy(dst + 8, w->chunk + off + 8, 8);
	return 0;
}

/*
 * Walk the rbp chain from a point inside libcuda to the first return address outside it.
 * @ip: an address in the innermost libcuda frame, @bp: that frame's rbp.
 * A probe at a function's return has ip = the return address into the caller and rbp = the
 * caller's frame pointer, so the chain starts with the caller.
 */
static __always_inline void walk_lib(struct walk *w, const struct ffm_proc *p, __u64 ip, __u64 bp)
{
	__u64 tramp = uretprobe_trampoline();

	walk_reset(w);
	w->tramp = tramp;
	if (!in_lib(p, ip))
		return;
	w->lib[0] = ip;
	w->nlib = 1;
	for (int i = 1; i < FFM_LIB_FRAMES; i++) {
		__u64 frame[2];

		if (!bp || stack_read(w, frame, sizeof(frame), bp))
			return;
		frame[1] = fix_ret(frame[1], bp + 8, tramp);
		if (!in_lib(p, frame[1])) {
			w->callsite = frame[1];
			w->callsite_slot = bp + 8;
			return;
		}
		w->lib[i] = frame[1];
		w->nlib = i + 1;
		if (frame[0] <= bp) /* the stack grows down: a caller's frame is higher */
			return;
		bp = frame[0];
	}
	w->truncated = 1;
}

#define STACK_KEY_SEED 0x84222325cbf29ce4ULL

/* The call-site part of a stack key: the call site and the words at its learned slots, read
 * through @w's chunk when there is a walk (else NULL). */
static __always_inline __u64 callsite_key(__u64 h, __u32 tgid, struct walk *w, __u64 callsite,
					  __u64 callsite_slot, __u64 tramp)
{
	struct ffm_slot_key sk = { .tgid = tgid, .callsite = callsite };
	struct ffm_slots *s;

	h = mix(h, callsite);
	if (!callsite)
		return h;
	s = bpf_map_lookup_elem(&slots, &sk);
	if (!s)
		return h;
	for (int i = 0; i < FFM_LEARNED_SLOTS; i++) {
		__u64 v = 0, slot;

		if (i >= s->n)
			break;
		slot = callsite_slot + s->off[i];
		if (w)
			stack_read(w, &v, sizeof(v), slot);
		else
			bpf_probe_read_user(&v, sizeof(v), (void *)slot);
		h = mix(h, fix_ret(v, slot, tramp));
	}
	return h ? h : 1;
}

static __always_inline __u64 stack_key_of(struct walk *w, __u32 tgid, struct thr *t)
{
	__u64 h = STACK_KEY_SEED, ph;
	__u32 n = w->nlib;

	for (int i = 0; i < FFM_LIB_FRAMES; i++) {
		if (i >= n)
			break;
		h = mix(h, w->lib[i]);
	}
	w->npy = py_walk(tgid, t, w->py, &w->py_flags, &ph);
	h = py_mix(h, w->npy, ph);
	return callsite_key(h, tgid, w, w->callsite, w->callsite_slot, w->tramp);
}

static __always_inline void note_seen(struct thr *t, __u64 key, __u32 gen)
{
	if (t) {
		t->seen_key = key;
		t->seen_gen = gen;
	}
}

/* Send the stack of a key seen for the first time in this process and job run; @t: the
 * thread's state, if it has one; @ctx NULL: no native part (a CPU sample's Python frames). */
static __always_inline void send_stack(struct pt_regs *ctx, const struct walk *w, __u64 key,
				       __u64 id, __u32 job, const struct ffm_job_cfg *jc,
				       struct thr *t, __u64 now)
{
	struct seen_key sk = { .tgid = id >> 32, .gen = jc->gen, .stack_key = key };
	struct ffm_rec_stack *r;
	__u64 sp = ctx ? PT_REGS_SP(ctx) : 0;
	__u32 first, len;
	__u8 one = 1;

	if (t && t->seen_key == key && t->seen_gen == jc->gen)
		return;
	if (bpf_map_lookup_elem(&seen, &sk)) {
		note_seen(t, key, jc->gen);
		return;
	}
	py_send_codes(w->py, w->npy, id, job, jc->gen, now);
	r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) {
		count_drop(job, FFM_REC_DROP_STACK);
		return;
	}
	fill_hdr(&r->hdr, FFM_REC_STACK, id, job, now);
	r->stack_key = key;
	r->ip = ctx ? PT_REGS_IP(ctx) : 0;
	r->sp = sp;
	r->bp = ctx ? PT_REGS_FP(ctx) : 0;
	r->callsite = w->callsite;
	r->callsite_slot = w->callsite_slot;
	r->nlib = w->nlib;
	for (int i = 0; i < FFM_LIB_FRAMES; i++)
		r->lib[i] = i < w->nlib ? w->lib[i] : 0;
	r->npy = w->npy;
	r->py_flags = w->py_flags;
	__builtin_memcpy(r->py, w->py, sizeof(r->py));

	/* Copy up to FFM_STACK_BYTES from sp, stopping where the stack mapping ends: the first
	 * chunk runs to a 1 KiB boundary, the rest are aligned 1 KiB chunks, so a chunk never
	 * straddles the end of the (page-aligned) stack mapping. */
	first = 1024 - (sp & 1023);
	len = 0;
	if (ctx && bpf_probe_read_user(r->stack, first & 1023 ? first & 1023 : 1024, (void *)sp) == 0) {
		len = first & 1023 ? first & 1023 : 1024;
		for (int i = 0; i < FFM_STACK_BYTES / 1024; i++) {
			__u32 off = len;

			if (off > FFM_STACK_BYTES - 1024)
				break;
			if (bpf_probe_read_user(r->stack + off, 1024, (void *)(sp + off)))
				break;
			len = off + 1024;
		}
	}
	r->stack_len = len;
	/* Put the real return addresses where return probes left the trampoline's, so the CFI
	 * unwind in user space sees the application's frames (see fix_ret). */
	{
		struct task_struct *t = bpf_get_current_task_btf();
		struct return_instance *ri = BPF_CORE_READ(t, utask, return_instances);

		for (int i = 0; i < FFM_MAX_RETURN_INSTANCES && ri; i++) {
			__u64 off = BPF_CORE_READ(ri, stack) - sp, orig = BPF_CORE_READ(ri, orig_ret_vaddr);

			ri = BPF_CORE_READ(ri, next);
			if (off >= len || off > FFM_STACK_BYTES - 8)
				continue;
			bpf_probe_read_kernel(r->stack + off, sizeof(orig), &orig);
		}
	}
	/* Wake the consumer at once: it unwinds with the process's /proc/PID/maps, which are
	 * gone once the process exits. New stacks are rare by design. */
	bpf_ringbuf_submit(r, BPF_RB_FORCE_WAKEUP);
	bpf_map_update_elem(&seen, &sk, &one, BPF_ANY);
	note_seen(t, key, jc->gen);
}

/* ---- the internal wait function --------------------------------------------------------- */

/*
 * Each probe has an entry half and a return half. The entry half returns SKIP_RETURN when the
 * return half has nothing to do (a process outside every job): attached as a uprobe session
 * (below), the kernel then never installs the return probe, which is most of what a probed
 * call of an untracked process costs.
 */
#define WANT_RETURN 0
#define SKIP_RETURN 1

/*
 * The calling thread's state at a probe's entry, for a process of the job run @jc. State
 * left by another job run starts over: when a process leaves its job, its probes go, and a
 * call it was inside then never runs its return half; the depth that call left would hide
 * every later call of the thread in its next job (ffm_job_cfg.gen changes only when a slot
 * gets a job run). NULL (counted as a drop) when the kernel has no memory for it.
 */
static __always_inline struct thr *thread_enter(const struct ffm_job_cfg *jc, __u32 job)
{
	struct thr *t = thread_state(true);

	if (!t) {
		count_drop(job, FFM_REC_DROP_THREADS);
		return NULL;
	}
	if (t->gen != jc->gen) {
		__builtin_memset(t, 0, sizeof(*t));
		t->gen = jc->gen;
	}
	return t;
}

/* A wait's entry in job process @p (never NULL). */
static __always_inline int wait_begin(struct pt_regs *ctx, struct ffm_proc *p)
{
	struct ffm_job_cfg *jc;
	struct thr *t;

	jc = bpf_map_lookup_elem(&jobs, &p->job);
	if (!jc)
		return SKIP_RETURN;
	learn_lib_range(p, PT_REGS_IP(ctx));
	t = thread_enter(jc, p->job);
	if (!t)
		return SKIP_RETURN;
	/* An entry under a newer link than the wait in progress: that wait's return went with
	 * the link it entered under (adaptive stage 1 takes the probe off and puts it back). */
	if (stale_outer(t->wait_depth, t->wait_sp, PT_REGS_SP(ctx)) || t->wait_epoch != p->link_epoch)
		t->wait_depth = 0;
	if (t->wait_depth++ == 0) {
		t->wait_nvcsw = bpf_get_current_task_btf()->nvcsw;
		t->wait_start = bpf_ktime_get_ns();
		t->wait_sp = PT_REGS_SP(ctx);
		t->wait_epoch = p->link_epoch;
		t->waits_alone = jc->flags & FFM_JOB_WAITS_ALONE;
	}
	return WANT_RETURN;
}

static __always_inline int wait_enter(struct pt_regs *ctx)
{
	struct ffm_proc *p = tracked(bpf_get_current_pid_tgid() >> 32);

	return p ? wait_begin(ctx, p) : SKIP_RETURN;
}

static __always_inline void wait_leave(struct pt_regs *ctx)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 id = bpf_get_current_pid_tgid();
	struct ffm_proc *p = tracked(id >> 32);
	__u32 zero = 0, job;
	struct ffm_rec_wait *r;
	struct ffm_job_cfg *jc;
	struct walk *w;
	struct thr *t;
	__u64 dur, key;
	bool slept;

	if (!p)
		return;
	job = p->job;
	t = thread_state(false);
	if (!t || t->wait_depth == 0) {
		if (!t || !repeated_return(t->wait_sp, PT_REGS_SP(ctx)))
			count_drop(job, FFM_REC_DROP_UNMATCHED);
		return;
	}
	if (--t->wait_depth)
		return;
	dur = now - t->wait_start;
	/* Slept: a voluntary context switch during the wait (a blocking-sync context sleeps in
	 * the kernel; spinning and yielding do not count as voluntary). The schedule mode the
	 * analysis prices a wait's exit latency by (analysis/price.c). */
	slept = bpf_get_current_task_btf()->nvcsw != t->wait_nvcsw;
	if (t->call_depth) {
		/* Inside a probed API call: the call record carries the wait, and only a run
		 * that keeps stage 1's records as they are records it on its own too. */
		t->wait_acc += dur;
		t->nwaits++;
		t->nslept += slept;
		if (!t->waits_alone)
			return;
	} else {
		/* A wait outside every probed call ends a synchronization of its own (stages 3-4). */
		t->sync_gen++;
	}
	jc = bpf_map_lookup_elem(&jobs, &job);
	w = bpf_map_lookup_elem(&walk_scratch, &zero);
	if (!w || !jc)
		return;
	if (jc->flags & FFM_JOB_STACKS) {
		walk_lib(w, p, PT_REGS_IP(ctx), PT_REGS_FP(ctx));
		if (w->truncated)
			count_drop(job, FFM_REC_DROP_DEPTH);
	}
	/* A new stack goes first: records are consumed in reservation order, so user space
	 * knows every key before the first record that uses it. */
	key = (jc->flags & FFM_JOB_STACKS) ? stack_key_of(w, id >> 32, t) : 0;
	if (key)
		send_stack(ctx, w, key, id, job, jc, t, now);
	r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) {
		count_drop(job, FFM_REC_DROP_RINGBUF);
		return;
	}
	fill_hdr(&r->hdr, FFM_REC_WAIT, id, job, now);
	r->start_ns = t->wait_start;
	r->dur_ns = dur;
	r->stack_key = key;
	r->api_id = 0xffff;
	r->flags = slept ? FFM_WAIT_SLEPT : 0;
	bpf_ringbuf_submit(r, rb_flags());
	t->sync_done = bpf_ktime_get_ns();
	/* Inside a copy (FFM_JOB_WAITS_ALONE): this record's walk and submit are ffm's time,
	 * not the copy's own, which the analysis prices (analysis/dupcost.c). */
	if (t->call_depth)
		t->wait_acc += t->sync_done - now;
}

/*
 * Uprobe sessions (Linux 6.12): one program runs at the entry and, only if the entry returned
 * WANT_RETURN, at the return of the same call. The two are told apart by the instruction
 * pointer: at the entry it is the probed address itself (bpf_get_func_ip), at the return the
 * caller's return address. That needs no kfunc (bpf_session_is_return), so the object still
 * loads, through libbpf 1.1, on kernels without sessions, where the classic pairs are used.
 */
static __always_inline int at_return(struct pt_regs *ctx)
{
	return PT_REGS_IP(ctx) != bpf_get_func_ip(ctx);
}

SEC("uprobe") /* attach type BPF_TRACE_UPROBE_SESSION, set by the collector */
int wait_sess(struct pt_regs *ctx)
{
	if (!at_return(ctx))
		return wait_enter(ctx);
	wait_leave(ctx);
	return 0;
}

/*
 * The benchmark's yardstick (bench/bench_overhead.c, column "bare"): a probe whose program does
 * nothing but ask for the return. What a call costs with it is the kernel's own price of an
 * entry and a return probe, which no program can go under; stage 1 minus that is ffm's share.
 * Loaded only when asked for (struct ffm_collector_opts.bare_probes); ffmd never does.
 */
SEC("uprobe")
int bare(struct pt_regs *ctx)
{
	return WANT_RETURN;
}

SEC("uprobe")
int BPF_KPROBE(wait_entry)
{
	wait_enter(ctx);
	return 0; /* non-zero would emit a perf sample from a perf-event uprobe */
}

SEC("uretprobe")
int BPF_KRETPROBE(wait_exit)
{
	wait_leave(ctx);
	return 0;
}

/* ---- stage 3: hashing transferred bytes ---------------------------------------------------
 *
 * Done in sleepable twins of the API probes (api_entry_h/api_exit_h, attached instead of
 * api_entry/api_exit while a job is at stage 3): bpf_copy_from_user may fault pages in, and the
 * thread is inside our probe while we hash, so the bytes hashed are exactly the ones the driver
 * copies: an HtoD source at the call's entry, a DtoH destination once the copy is complete (at
 * the return of a synchronous copy, or of the synchronization that covered an async one).
 * The chunk buffer is task-local storage: per-CPU scratch is not safe in a program that can be
 * preempted while it sleeps on a fault.
 */
struct hbuf {
	__u8 b[FFM_HASH_CHUNK];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct hbuf);
} hbufs SEC(".maps");

/* Async DtoH copies of a thread not yet complete (key: tid). */
struct pend_ent {
	__u64 dst, bytes, stream, start;
};

struct pend {
	__u32 n;
	__u32 _pad;
	struct pend_ent e[FFM_PENDING_DTOH];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct pend);
} pending SEC(".maps");

static const struct pend pend_zero;

struct hctx {
	struct hbuf *buf;
	__u64 src, len, off; /* off: bytes copied into buf so far */
	__u32 nb;            /* blocks in the chunk now in buf */
	__u32 _pad;
	struct ffm_hash_state s;
	int err;
};

#define HASH_GROUP_BLOCKS 8 /* blocks hashed per loop step: 256 bytes */
#define HASH_GROUPS_PER_CHUNK (FFM_HASH_CHUNK / FFM_HASH_BLOCK / HASH_GROUP_BLOCKS)

/* Copy the next chunk into buf and zero-pad its last block if the message ends inside it. */
static __always_inline int load_chunk(struct hctx *c, struct hbuf *buf)
{
	__u64 left = c->len - c->off;
	__u32 n = left < FFM_HASH_CHUNK ? (__u32)left : FFM_HASH_CHUNK, r, b;

	if (n > FFM_HASH_CHUNK || n == 0)
		return -1;
	if (bpf_copy_from_user(buf->b, n, (void *)(c->src + c->off)))
		return -1;
	c->off += n;
	c->nb = (n + FFM_HASH_BLOCK - 1) / FFM_HASH_BLOCK;
	r = n & (FFM_HASH_BLOCK - 1);
	b = n & ~(FFM_HASH_BLOCK - 1);
	if (r && b <= FFM_HASH_CHUNK - FFM_HASH_BLOCK) {
		__u64 *w = (__u64 *)&buf->b[b];

		for (__u32 k = 0; k < 4; k++) {
			__u32 lo = k * 8;

			if (lo >= r)
				w[k] = 0;
			else if (lo + 8 > r)
				w[k] &= (1ull << ((r - lo) * 8)) - 1;
		}
	}
	return 0;
}

/* One loop step: 8 blocks (256 bytes); every 128th step first loads the next chunk. */
static long hash_group(__u64 i, void *data)
{
	struct hctx *c = data;
	struct hbuf *buf = c->buf;
	__u32 g = i & (HASH_GROUPS_PER_CHUNK - 1);
	__u64 v0, v1, v2, v3;

	if (!buf)
		return 1;
	if (g == 0 && load_chunk(c, buf)) {
		c->err = 1;
		return 1;
	}
	v0 = c->s.v0;
	v1 = c->s.v1;
	v2 = c->s.v2;
	v3 = c->s.v3;
	for (__u32 k = 0; k < HASH_GROUP_BLOCKS; k++) {
		__u32 j = g * HASH_GROUP_BLOCKS + k;
		const __u64 *w;

		if (j >= c->nb || j >= FFM_HASH_CHUNK / FFM_HASH_BLOCK)
			break;
		w = (const __u64 *)&buf->b[j * FFM_HASH_BLOCK];
		v0 = ffm_hash_round(v0, w[0]);
		v1 = ffm_hash_round(v1, w[1]);
		v2 = ffm_hash_round(v2, w[2]);
		v3 = ffm_hash_round(v3, w[3]);
	}
	c->s.v0 = v0;
	c->s.v1 = v1;
	c->s.v2 = v2;
	c->s.v3 = v3;
	return 0;
}

/* Hash [src, src+len) of the current process; *flags gets FFM_XFER_FAILED if unreadable. */
static __always_inline __u64 hash_user(__u64 src, __u64 len, __u32 *flags)
{
	struct hctx c = { .src = src, .len = len };

	ffm_hash_init(&c.s);
	c.buf = bpf_task_storage_get(&hbufs, bpf_get_current_task_btf(), 0,
				     BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!c.buf || (len && !src)) {
		*flags |= FFM_XFER_FAILED;
		return 0;
	}
	if (len)
		bpf_loop((len + 255) / 256, hash_group, &c, 0);
	if (c.err || c.off != len) {
		*flags |= FFM_XFER_FAILED;
		return 0;
	}
	return ffm_hash_final(&c.s, len);
}

/* What to hash and report; on the caller's stack. */
struct xfer_req {
	__u64 id, start, dst, src, bytes;
	__u64 at;   /* address hashed: src for HtoD, dst for DtoH */
	__u64 hash; /* precomputed when flags has HASHED_AT_ENTRY */
	__u32 job, dir, flags, _pad;
};

/* Hash (unless already hashed) and send a FFM_REC_XFER. A global function: the verifier checks
 * it once, not once per call site (the hashing loop inlined at several places of one program
 * exceeds its budget). */
__noinline int hash_emit(struct xfer_req *q)
{
	struct ffm_rec_xfer *r;
	__u32 flags;
	__u64 h;

	if (!q)
		return 0;
	flags = q->flags;
	if (flags & HASHED_AT_ENTRY)
		h = q->hash;
	else
		h = hash_user(q->at, q->bytes, &flags);
	flags &= ~HASHED_AT_ENTRY;
	r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) {
		count_drop(q->job, FFM_REC_DROP_RINGBUF);
		return 0;
	}
	fill_hdr(&r->hdr, FFM_REC_XFER, q->id, q->job, bpf_ktime_get_ns());
	r->call_start_ns = q->start;
	r->hash = h;
	r->dst = q->dst;
	r->src = q->src;
	r->bytes = q->bytes;
	r->dir = q->dir;
	r->flags = flags;
	if (flags & FFM_XFER_FAILED)
		count_drop(q->job, FFM_REC_DROP_HASH);
	bpf_ringbuf_submit(r, rb_flags());
	return 0;
}

/* The HtoD hash at a call's entry, kept in the thread's state until its return. */
__noinline int hash_source(struct thr *t)
{
	__u32 flags = 0;

	if (!t)
		return 0;
	t->hash = hash_user(t->src, t->bytes, &flags);
	t->hflags = flags | HASHED_AT_ENTRY;
	return 0;
}

/* A synchronization of this thread ended: hash the async DtoH copies it covered. A sync
 * without a stream argument (context sync, implicit syncs) or on the legacy default stream (0)
 * covers every stream; a stream sync covers its own stream and the legacy one. */
static __always_inline void hash_pending(__u64 id, __u32 job, __u64 sync_stream)
{
	__u32 tid = (__u32)id, keep = 0;
	struct pend *pd = bpf_map_lookup_elem(&pending, &tid);
	struct xfer_req q = { .id = id, .job = job, .dir = FFM_REC_DIR_DTOH };

	if (!pd || !pd->n)
		return;
	for (int i = 0; i < FFM_PENDING_DTOH; i++) {
		struct pend_ent e;

		if (i >= pd->n)
			break;
		e = pd->e[i];
		if (sync_stream && e.stream && e.stream != sync_stream) {
			if (keep < FFM_PENDING_DTOH)
				pd->e[keep++] = e;
			continue;
		}
		q.start = e.start;
		q.dst = q.at = e.dst;
		q.src = 0;
		q.bytes = e.bytes;
		q.flags = FFM_XFER_DEFERRED;
		hash_emit(&q);
	}
	pd->n = keep;
}

static __always_inline void push_pending(__u64 id, __u32 job, const struct thr *t)
{
	__u32 tid = (__u32)id;
	struct pend *pd = bpf_map_lookup_elem(&pending, &tid);
	__u32 n;

	if (!pd) {
		/* From .rodata: a zeroed struct pend does not fit on the BPF stack here. */
		bpf_map_update_elem(&pending, &tid, &pend_zero, BPF_NOEXIST);
		pd = bpf_map_lookup_elem(&pending, &tid);
		if (!pd)
			return;
	}
	n = pd->n;
	if (n >= FFM_PENDING_DTOH) {
		/* Too many copies in flight without a sync: the oldest one goes unhashed. */
		count_drop(job, FFM_REC_DROP_HASH);
		for (int i = 1; i < FFM_PENDING_DTOH; i++)
			pd->e[i - 1] = pd->e[i];
		n = FFM_PENDING_DTOH - 1;
	}
	if (n < FFM_PENDING_DTOH) {
		pd->e[n] = (struct pend_ent){ .dst = t->dst, .bytes = t->bytes, .stream = t->stream,
					      .start = t->call_start };
		pd->n = n + 1;
	}
}

/* ---- driver API entry points (stage >= 2) ----------------------------------------------- */

/* The six integer argument registers, index 1..6 (0: none). Loaded once into an array: a
 * switch on the index compiles to ctx pointer arithmetic, which the verifier refuses. */
struct args {
	__u64 v[8];
};

static __always_inline void load_args(struct args *a, struct pt_regs *ctx)
{
	a->v[0] = 0;
	a->v[1] = PT_REGS_PARM1(ctx);
	a->v[2] = PT_REGS_PARM2(ctx);
	a->v[3] = PT_REGS_PARM3(ctx);
	a->v[4] = PT_REGS_PARM4(ctx);
	a->v[5] = PT_REGS_PARM5(ctx);
	a->v[6] = ctx->r9; /* PT_REGS_PARM6 is newer than libbpf 1.1 */
	a->v[7] = 0;
}

#define ARG(a, c, shift) ((a)->v[FFM_COOKIE_ARG(c, shift) & 7])

/* A DtoH copy is issued: tell user space its destination now, before the copy and its sync run,
 * so a watchpoint can be armed on it. The key is the one the call's return will compute (at the
 * entry the return address is the word at sp, the call-site slot is sp itself). */
static __always_inline void emit_range(struct pt_regs *ctx, __u64 id, __u32 job,
				       const struct thr *t)
{
	__u64 sp = PT_REGS_SP(ctx), ra = 0;
	struct ffm_rec_range *r;

	bpf_probe_read_user(&ra, sizeof(ra), (void *)sp);
	r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) {
		count_drop(job, FFM_REC_DROP_RINGBUF);
		return;
	}
	fill_hdr(&r->hdr, FFM_REC_RANGE, id, job, t->call_start);
	r->call_start_ns = t->call_start;
	r->lo = t->dst;
	r->bytes = t->bytes;
	r->stack_key = callsite_key(STACK_KEY_SEED, id >> 32, NULL, ra, sp, uretprobe_trampoline());
	r->api_id = FFM_COOKIE_API(t->cookie);
	r->_pad = 0;
	/* Wake the consumer now: the watchpoint must be armed before the sync returns. */
	bpf_ringbuf_submit(r, BPF_RB_FORCE_WAKEUP);
}

static __always_inline int do_api_entry(struct pt_regs *ctx, const bool hashing)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct ffm_proc *p = tracked(id >> 32);
	__u32 job;
	struct ffm_job_cfg *jc;
	struct thr *t;
	struct args a;
	__u64 c;

	if (!p)
		return SKIP_RETURN;
	job = p->job;
	jc = bpf_map_lookup_elem(&jobs, &job);
	if (!jc || !(jc->flags & FFM_JOB_CALLS))
		return SKIP_RETURN;
	c = bpf_get_attach_cookie(ctx);
	/* A monitoring run times its copies only, whatever other jobs had probed (the
	 * system-wide sets serve every job at once). */
	if ((jc->flags & FFM_JOB_WAITS_ALONE) && FFM_COOKIE_KIND(c) != FFM_KIND_MEMCPY &&
	    FFM_COOKIE_KIND(c) != FFM_KIND_MEMSET)
		return SKIP_RETURN;
	learn_lib_range(p, PT_REGS_IP(ctx));
	t = thread_enter(jc, job);
	if (!t)
		return SKIP_RETURN;
	if (stale_outer(t->call_depth, t->call_sp, PT_REGS_SP(ctx)))
		t->call_depth = 0;
	if (t->call_depth++)
		return WANT_RETURN; /* a probed API called by another: the outer call is recorded */
	t->call_sp = PT_REGS_SP(ctx);
	t->cookie = c;
	t->call_start = bpf_ktime_get_ns();
	t->wait_acc = 0;
	t->nwaits = 0;
	t->nslept = 0;
	t->hflags = 0;
	load_args(&a, ctx);
	t->bytes = ARG(&a, c, FFM_COOKIE_BYTES_SHIFT);
	if (FFM_COOKIE_ARG(c, FFM_COOKIE_ELSZ_SHIFT))
		t->bytes *= FFM_COOKIE_ARG(c, FFM_COOKIE_ELSZ_SHIFT);
	t->dst = ARG(&a, c, FFM_COOKIE_DST_SHIFT);
	t->src = ARG(&a, c, FFM_COOKIE_SRC_SHIFT);
	t->stream = ARG(&a, c, FFM_COOKIE_STREAM_SHIFT);
	t->outp = ARG(&a, c, FFM_COOKIE_OUTP_SHIFT);
	if (FFM_COOKIE_KIND(c) != FFM_KIND_MEMCPY)
		return WANT_RETURN;
	if ((jc->flags & FFM_JOB_MEMTRACE) && FFM_COOKIE_DIR(c) == FFM_REC_DIR_DTOH && t->dst)
		emit_range(ctx, id, job, t);
	if (hashing && (jc->flags & FFM_JOB_HASH) &&
	    (FFM_COOKIE_DIR(c) == FFM_REC_DIR_HTOD || FFM_COOKIE_DIR(c) == FFM_REC_DIR_HTOH) &&
	    FFM_COOKIE_ARG(c, FFM_COOKIE_SRC_SHIFT)) {
		/* HtoD: the source as the driver is about to read it. The app cannot change it
		 * before the call returns; a pageable source is staged inside the call. */
		hash_source(t);
	}
	return WANT_RETURN;
}

SEC("uprobe")
int BPF_KPROBE(api_entry)
{
	do_api_entry(ctx, false);
	return 0;
}

SEC("uprobe.s")
int BPF_KPROBE(api_entry_h)
{
	do_api_entry(ctx, true);
	return 0;
}

/* Stage 3's hashes at a call's return (do_api_exit): what was hashed at the entry, and the
 * bytes a synchronization or a synchronous DtoH copy has put in place. */
static __always_inline void hash_at_exit(struct thr *t, struct xfer_req *q, __u64 id, __u32 job,
					 __u32 kind, __u32 dir, __u64 ret, bool sync)
{
	/* Hash records follow the call record, so user space knows the call's event. */
	q->id = id;
	q->job = job;
	q->start = t->call_start;
	q->dst = t->dst;
	q->src = t->src;
	q->bytes = t->bytes;
	q->dir = dir;
	if (t->hflags & HASHED_AT_ENTRY) {
		q->hash = t->hash;
		q->flags = t->hflags;
		hash_emit(q);
		t->hflags = 0;
	}
	if (sync)
		hash_pending(id, job, t->stream);
	if (kind == FFM_KIND_MEMCPY && dir == FFM_REC_DIR_DTOH && ret == 0 && t->dst) {
		if (!FFM_COOKIE_ARG(t->cookie, FFM_COOKIE_STREAM_SHIFT) || t->nwaits) {
			/* A synchronous copy, or an async one into pageable memory that waited for
			 * its bytes: they are in place now. */
			q->at = t->dst;
			q->flags = 0;
			hash_emit(q);
		} else {
			push_pending(id, job, t);
		}
	}
}

/* A name getter's return (FFM_KIND_NAME, @how an enum ffm_name_how): the handle and the name
 * the program got, read now, while the name is the program's to read. */
static __always_inline void emit_func(__u64 id, __u32 job, struct thr *t, __u32 how, __u64 now)
{
	struct ffm_rec_func *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	__u64 out = 0, name;
	long n = 0;

	if (!r) {
		count_drop(job, FFM_REC_DROP_RINGBUF);
		return;
	}
	fill_hdr(&r->hdr, FFM_REC_FUNC, id, job, now);
	if (t->outp)
		bpf_probe_read_user(&out, sizeof(out), (void *)t->outp);
	r->handle = how == FFM_NAME_OUT ? t->dst : out;
	r->alias = how == FFM_NAME_ALIAS ? t->dst : 0;
	r->_pad = 0;
	name = how == FFM_NAME_ARG ? t->src : how == FFM_NAME_OUT ? out : 0;
	r->name[0] = 0;
	if (name)
		n = bpf_probe_read_user_str(r->name, sizeof(r->name), (void *)name);
	r->name_len = n > 1 ? (__u32)(n - 1) : 0;
	bpf_ringbuf_submit(r, rb_flags());
}

static __always_inline int do_api_exit(struct pt_regs *ctx, const bool hashing)
{
	__u64 now = bpf_ktime_get_ns(), end;
	__u64 id = bpf_get_current_pid_tgid();
	struct ffm_proc *p = tracked(id >> 32);
	__u32 zero = 0, job, kind, dir;
	struct xfer_req q = {};
	struct ffm_rec_call *r;
	struct ffm_job_cfg *jc;
	struct walk *w;
	struct thr *t;
	__u64 key, ret;
	bool sync;

	if (!p)
		return 0;
	job = p->job;
	t = thread_state(false);
	if (!t || t->call_depth == 0)
		return 0; /* a job in stage 1 or attached mid-call */
	t->ret_ip = PT_REGS_IP(ctx);
	if (--t->call_depth) {
		t->probe_ns += probe_trap_ns; /* a probed call inside another: its traps */
		return 0;
	}
	kind = FFM_COOKIE_KIND(t->cookie);
	dir = FFM_COOKIE_DIR(t->cookie);
	ret = PT_REGS_RC(ctx);
	if (kind == FFM_KIND_NAME) {
		if (ret == 0) /* CUDA_SUCCESS: the out argument holds what the getter gave */
			emit_func(id, job, t, dir, now);
		t->probe_ns += probe_trap_ns + (bpf_ktime_get_ns() - now);
		return 0;
	}
	/* The definition of "a synchronization" that stages 3-4 share with user space. */
	sync = t->nwaits || kind == FFM_KIND_SYNC;
	if (sync)
		t->sync_gen++;
	w = bpf_map_lookup_elem(&walk_scratch, &zero);
	jc = bpf_map_lookup_elem(&jobs, &job);
	if (!w || !jc)
		return 0;
	/* At the return the application's frame is current: the call site is the ip itself,
	 * read from the slot just below sp. */
	walk_reset(w);
	w->tramp = uretprobe_trampoline();
	w->callsite = PT_REGS_IP(ctx);
	w->callsite_slot = PT_REGS_SP(ctx) - 8;
	key = stack_key_of(w, id >> 32, t);
	send_stack(ctx, w, key, id, job, jc, t, now); /* before the call record, as in wait_exit */

	r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) {
		count_drop(job, FFM_REC_DROP_RINGBUF);
	} else {
		fill_hdr(&r->hdr, FFM_REC_CALL, id, job, now);
		r->start_ns = t->call_start;
		r->dur_ns = now - t->call_start;
		r->wait_ns = t->wait_acc;
		r->nwaits = t->nwaits;
		r->nslept = t->nslept;
		r->_pad = 0;
		r->stack_key = key;
		r->bytes = t->bytes;
		r->dst = t->dst;
		r->src = t->src;
		r->stream = t->stream;
		r->ret = ret;
		r->probe_ns = t->probe_ns;
		r->api_id = FFM_COOKIE_API(t->cookie);
		if (t->outp) {
			/* Allocations return their pointer through an out argument. */
			__u64 v = 0;

			bpf_probe_read_user(&v, sizeof(v), (void *)t->outp);
			r->dst = v;
		}
		bpf_ringbuf_submit(r, rb_flags());
	}
	if (hashing && (jc->flags & FFM_JOB_HASH))
		hash_at_exit(t, &q, id, job, kind, dir, ret, sync);
	end = bpf_ktime_get_ns();
	if (sync)
		t->sync_done = end;
	t->probe_ns += probe_trap_ns + (end - now);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(api_exit)
{
	return do_api_exit(ctx, false);
}

SEC("uretprobe.s")
int BPF_KRETPROBE(api_exit_h)
{
	return do_api_exit(ctx, true);
}

SEC("uprobe") /* sessions: see wait_sess */
int api_sess(struct pt_regs *ctx)
{
	return at_return(ctx) ? do_api_exit(ctx, false) : do_api_entry(ctx, false);
}

SEC("uprobe.s")
int api_sess_h(struct pt_regs *ctx)
{
	return at_return(ctx) ? do_api_exit(ctx, true) : do_api_entry(ctx, true);
}

/* The job of the tracked process @tgid when its flags have @flag (its slot in *job), else
 * NULL: the start of the perf-event programs below. */
static __always_inline struct ffm_job_cfg *job_with(__u32 tgid, __u32 flag, __u32 *job)
{
	struct ffm_proc *p = tracked(tgid);
	struct ffm_job_cfg *jc;

	if (!p)
		return NULL;
	*job = p->job;
	jc = bpf_map_lookup_elem(&jobs, job);
	return jc && (jc->flags & flag) ? jc : NULL;
}

/* ---- stages 3-4: hardware watchpoints on GPU-written memory --------------------------------
 *
 * User space opens PERF_TYPE_BREAKPOINT events (read/write, 8 bytes) on the threads of a job
 * that call the driver and attaches this program to each. It reports the first access after
 * each synchronization of the thread (later ones cost the trap but no record), and none while
 * the thread is inside the driver (the driver itself filling a destination is no use).
 */
SEC("perf_event")
int watch_hit(struct bpf_perf_event_data *ctx)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 id = bpf_get_current_pid_tgid();
	struct pt_regs *regs = (struct pt_regs *)&ctx->regs;
	__u32 zero = 0, job;
	struct ffm_job_cfg *jc = job_with(id >> 32, FFM_JOB_MEMTRACE, &job);
	struct ffm_rec_hit *r;
	struct walk *w;
	struct thr *t;
	__u64 ip, key, ph;

	if (!jc)
		return 0;
	t = thread_state(false);
	if (t) {
		if (t->call_depth || t->wait_depth)
			return 0;
		if (t->hit_gen == t->sync_gen + 1)
			return 0;
		t->hit_gen = t->sync_gen + 1;
	}
	ip = PT_REGS_IP(regs);
	w = bpf_map_lookup_elem(&walk_scratch, &zero);
	if (!w)
		return 0;
	walk_reset(w);
	/* The key of an access: the instruction (one stack per accessing instruction). */
	key = mix(mix(STACK_KEY_SEED, 0x68697421ULL), ip);
	w->npy = py_walk(id >> 32, t, w->py, &w->py_flags, &ph);
	key = py_mix(key, w->npy, ph);
	key = key ? key : 1;
	if (jc->flags & FFM_JOB_STACKS)
		send_stack(regs, w, key, id, job, jc, t, now);
	r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) {
		count_drop(job, FFM_REC_DROP_RINGBUF);
		return 0;
	}
	fill_hdr(&r->hdr, FFM_REC_HIT, id, job, now);
	r->ip = ip;
	r->addr = ctx->addr;
	r->stack_key = (jc->flags & FFM_JOB_STACKS) ? key : 0;
	r->sync_done_ns = t ? t->sync_done : 0;
	bpf_ringbuf_submit(r, BPF_RB_FORCE_WAKEUP);
	return 0;
}

/*
 * The watchpoints' timing offset (ffm_collector__use_latency): a first use is timed from the
 * sync's return probe to the watchpoint's program, and both sides cost time the application
 * does not spend: the return path after the probe's program and the trap before the watch's
 * (tens of microseconds under a hypervisor that traps debug-register accesses). User space
 * times one return and one watched read of its own, back to back, with these two programs.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} calib_ts SEC(".maps");

static __always_inline void calib_stamp(__u32 k)
{
	__u64 now = bpf_ktime_get_ns();

	bpf_map_update_elem(&calib_ts, &k, &now, BPF_ANY);
}

SEC("uretprobe")
int calib_ret(struct pt_regs *ctx)
{
	calib_stamp(0);
	return 0;
}

SEC("perf_event")
int calib_hit(struct bpf_perf_event_data *ctx)
{
	calib_stamp(1);
	return 0;
}

/*
 * Whether a sample interrupted one of ffm's own probes: the kernel was running for the thread
 * (the sampled ip is a kernel address) with the thread's user ip at a probe's trap. An entry
 * probe traps at the driver function (inside the driver's text; kernel time under the driver's
 * own code outside a probed call, an unprobed function's ioctl, is the driver's, not the
 * caller's, either way); a return probe runs with the user ip already set back to the call's
 * return address (and the kernel's return trampoline page before that). Without this the
 * return probe's part after its call has ended (the stack walk, the record, the trap's way
 * back) was the user line's own CPU time: with Debian 12's python3.11 and ctypes, 30-40 µs a
 * host read of the simulated driver, a quarter more library time than the library works. The
 * program without ffm spends nothing there; the probes' cost is accounted for in probe_ns.
 */
static __always_inline bool in_own_probe(struct bpf_perf_event_data *ctx, __u32 tgid,
					 const struct thr *t)
{
	const struct ffm_proc *p;
	struct pt_regs *u;
	__u64 ip, xol;

	if ((__s64)PT_REGS_IP(&ctx->regs) >= 0)
		return false; /* user mode: the program's own instructions */
	u = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	if (!u)
		return false;
	ip = BPF_CORE_READ(u, ip);
	if (t && ip == t->ret_ip)
		return true;
	p = tracked(tgid);
	xol = uretprobe_trampoline();
	return (p && in_lib(p, ip)) || (xol && ip - xol < 4096);
}

/*
 * CPU samples of a job's Python threads (stage 2). User space opens a task-clock event in
 * frequency mode on each thread of a walked Python process that calls the driver
 * (daemon/pytrack.c) and attaches this program. A sample says which Python line the thread
 * was running and whether it was inside a probed driver call or its wait: the analysis sums the
 * CPU time a line spends outside them (a framework's own work around a host read, which no
 * driver probe sees). The key is the Python frames alone: the sample may interrupt the kernel.
 */
SEC("perf_event")
int cpu_sample(struct bpf_perf_event_data *ctx)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 id = bpf_get_current_pid_tgid();
	__u32 zero = 0, job, state = FFM_SAMPLE_USER;
	struct ffm_job_cfg *jc = job_with(id >> 32, FFM_JOB_CPU_SAMPLE, &job);
	struct ffm_rec_sample *r;
	struct walk *w;
	struct thr *t;
	__u64 key, ph;

	if (!jc)
		return 0;
	t = thread_state(false);
	if (in_own_probe(ctx, id >> 32, t))
		return 0;
	w = bpf_map_lookup_elem(&walk_scratch, &zero);
	if (!w)
		return 0;
	walk_reset(w);
	w->npy = py_walk(id >> 32, t, w->py, &w->py_flags, &ph);
	if (!w->npy)
		return 0;
	if (t && t->wait_depth)
		state = FFM_SAMPLE_WAIT;
	else if (t && t->call_depth)
		state = FFM_SAMPLE_CALL;
	key = py_mix(mix(STACK_KEY_SEED, 0x63707573ULL), w->npy, ph);
	key = key ? key : 1;
	if (jc->flags & FFM_JOB_STACKS)
		send_stack(NULL, w, key, id, job, jc, t, now);
	r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) {
		count_drop(job, FFM_REC_DROP_RINGBUF);
		return 0;
	}
	fill_hdr(&r->hdr, FFM_REC_SAMPLE, id, job, now);
	r->stack_key = key;
	r->period_ns = ctx->sample_period;
	r->state = state;
	r->_pad = 0;
	bpf_ringbuf_submit(r, 0);
	if (t) /* the sample's cost to the thread (the interrupt's own is not seen here) */
		t->probe_ns += bpf_ktime_get_ns() - now;
	return 0;
}

/* Processes: job membership at exec/fork/exit and the holds (a part of its own). */
#include "procs.bpf.h"
/* Stage 4's faults in managed memory (a part of its own). */
#include "managed.bpf.h"
