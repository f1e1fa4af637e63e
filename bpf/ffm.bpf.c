// SPDX-License-Identifier: GPL-2.0
/*
 * ffm's collector: probes on libcuda (the internal wait function and the API entry points of a
 * stage) and on process exec/fork/exit. Records go to one ring buffer; see bpf/ffm.h for the
 * records and the stack-key scheme.
 *
 * Everything except the exec/fork/exit tracepoints runs only for processes in the procs map;
 * any other process returns after one hash lookup.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "ffm.h"

char LICENSE[] SEC("license") = "GPL";

/* Knobs, set between open and load. */
const volatile __u32 ringbuf_wakeup_bytes = FFM_RINGBUF_BYTES / 8;

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
	__u32 wait_depth;
	__u32 call_depth;
	__u32 nwaits;
	__u32 _pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, FFM_MAX_THREADS);
	__type(key, __u32);
	__type(value, struct thr);
} threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct ffm_slot_key);
	__type(value, struct ffm_slots);
} slots SEC(".maps");

struct seen_key {
	__u32 tgid;
	__u32 _pad;
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

static __always_inline __u64 rb_flags(void)
{
	/* Wake the consumer only when a good share of the buffer is filled; otherwise it
	 * polls on a timer. A wake-up per record costs ~1.4 us (DESIGN.md). */
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

struct walk {
	__u64 lib[FFM_LIB_FRAMES];
	__u32 nlib;
	__u32 truncated;
	__u64 callsite;
	__u64 callsite_slot;
};

/* Per-CPU scratch for the walk (too big for the 512-byte BPF stack together with the rest). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct walk);
} walk_scratch SEC(".maps");

/*
 * Walk the rbp chain from a point inside libcuda to the first return address outside it.
 * @ip: an address in the innermost libcuda frame, @bp: that frame's rbp.
 * A probe at a function's return has ip = the return address into the caller and rbp = the
 * caller's frame pointer, so the chain starts with the caller.
 */
static __always_inline void walk_lib(struct walk *w, const struct ffm_proc *p, __u64 ip, __u64 bp)
{
	w->nlib = 0;
	w->truncated = 0;
	w->callsite = 0;
	w->callsite_slot = 0;
	if (!in_lib(p, ip))
		return;
	w->lib[0] = ip;
	w->nlib = 1;
	for (int i = 1; i < FFM_LIB_FRAMES; i++) {
		__u64 frame[2];

		if (!bp || bpf_probe_read_user(frame, sizeof(frame), (void *)bp))
			return;
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

static __always_inline __u64 stack_key_of(const struct walk *w, __u32 tgid)
{
	struct ffm_slot_key sk = { .tgid = tgid, .callsite = w->callsite };
	struct ffm_slots *s;
	__u64 h = 0x84222325cbf29ce4ULL;
	__u32 n = w->nlib;

	for (int i = 0; i < FFM_LIB_FRAMES; i++) {
		if (i >= n)
			break;
		h = mix(h, w->lib[i]);
	}
	h = mix(h, w->callsite);
	if (!w->callsite)
		return h;
	s = bpf_map_lookup_elem(&slots, &sk);
	if (!s)
		return h;
	for (int i = 0; i < FFM_LEARNED_SLOTS; i++) {
		__u64 v = 0;

		if (i >= s->n)
			break;
		bpf_probe_read_user(&v, sizeof(v), (void *)(w->callsite_slot + s->off[i]));
		h = mix(h, v);
	}
	return h ? h : 1;
}

/* Send the stack of a key seen for the first time in this process. */
static __always_inline void send_stack(struct pt_regs *ctx, const struct walk *w, __u64 key,
				       __u64 id, __u32 job, __u64 now)
{
	struct seen_key sk = { .tgid = id >> 32, .stack_key = key };
	struct ffm_rec_stack *r;
	__u64 sp = PT_REGS_SP(ctx);
	__u32 first, len;
	__u8 one = 1;

	if (bpf_map_lookup_elem(&seen, &sk))
		return;
	r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) {
		count_drop(job, FFM_REC_DROP_STACK);
		return;
	}
	fill_hdr(&r->hdr, FFM_REC_STACK, id, job, now);
	r->stack_key = key;
	r->ip = PT_REGS_IP(ctx);
	r->sp = sp;
	r->bp = PT_REGS_FP(ctx);
	r->callsite = w->callsite;
	r->callsite_slot = w->callsite_slot;
	r->nlib = w->nlib;
	for (int i = 0; i < FFM_LIB_FRAMES; i++)
		r->lib[i] = i < w->nlib ? w->lib[i] : 0;

	/* Copy up to FFM_STACK_BYTES from sp, stopping where the stack mapping ends: the first
	 * chunk runs to a 1 KiB boundary, the rest are aligned 1 KiB chunks, so a chunk never
	 * straddles the end of the (page-aligned) stack mapping. */
	first = 1024 - (sp & 1023);
	len = 0;
	if (bpf_probe_read_user(r->stack, first & 1023 ? first & 1023 : 1024, (void *)sp) == 0) {
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
	bpf_ringbuf_submit(r, rb_flags());
	bpf_map_update_elem(&seen, &sk, &one, BPF_ANY);
}

/* ---- the internal wait function --------------------------------------------------------- */

SEC("uprobe")
int BPF_KPROBE(wait_entry)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct ffm_proc *p = tracked(id >> 32);
	__u32 tid = (__u32)id;
	struct thr *t, zero = {};

	if (!p)
		return 0;
	learn_lib_range(p, PT_REGS_IP(ctx));
	t = bpf_map_lookup_elem(&threads, &tid);
	if (!t) {
		if (bpf_map_update_elem(&threads, &tid, &zero, BPF_NOEXIST) &&
		    !bpf_map_lookup_elem(&threads, &tid)) {
			count_drop(p->job, FFM_REC_DROP_THREADS);
			return 0;
		}
		t = bpf_map_lookup_elem(&threads, &tid);
		if (!t)
			return 0;
	}
	if (t->wait_depth++ == 0)
		t->wait_start = bpf_ktime_get_ns();
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(wait_exit)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 id = bpf_get_current_pid_tgid();
	struct ffm_proc *p = tracked(id >> 32);
	__u32 tid = (__u32)id, zero = 0, job;
	struct ffm_rec_wait *r;
	struct ffm_job_cfg *jc;
	struct walk *w;
	struct thr *t;
	__u64 dur, key;

	if (!p)
		return 0;
	job = p->job;
	t = bpf_map_lookup_elem(&threads, &tid);
	if (!t || t->wait_depth == 0) {
		count_drop(job, FFM_REC_DROP_UNMATCHED);
		return 0;
	}
	if (--t->wait_depth)
		return 0;
	dur = now - t->wait_start;
	if (t->call_depth) {
		/* Inside a probed API call: the call record carries the wait. */
		t->wait_acc += dur;
		t->nwaits++;
		return 0;
	}
	w = bpf_map_lookup_elem(&walk_scratch, &zero);
	jc = bpf_map_lookup_elem(&jobs, &job);
	if (!w || !jc)
		return 0;
	w->nlib = 0;
	w->callsite = 0;
	if (jc->flags & FFM_JOB_STACKS) {
		walk_lib(w, p, PT_REGS_IP(ctx), PT_REGS_FP(ctx));
		if (w->truncated)
			count_drop(job, FFM_REC_DROP_DEPTH);
	}
	/* A new stack goes first: records are consumed in reservation order, so user space
	 * knows every key before the first record that uses it. */
	key = (jc->flags & FFM_JOB_STACKS) ? stack_key_of(w, id >> 32) : 0;
	if (key)
		send_stack(ctx, w, key, id, job, now);
	r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) {
		count_drop(job, FFM_REC_DROP_RINGBUF);
		return 0;
	}
	fill_hdr(&r->hdr, FFM_REC_WAIT, id, job, now);
	r->start_ns = t->wait_start;
	r->dur_ns = dur;
	r->stack_key = key;
	r->api_id = 0xffff;
	r->_pad = 0;
	bpf_ringbuf_submit(r, rb_flags());
	return 0;
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

SEC("uprobe")
int BPF_KPROBE(api_entry)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct ffm_proc *p = tracked(id >> 32);
	__u32 tid = (__u32)id, job;
	struct ffm_job_cfg *jc;
	struct thr *t, zero = {};
	struct args a;
	__u64 c;

	if (!p)
		return 0;
	job = p->job;
	jc = bpf_map_lookup_elem(&jobs, &job);
	if (!jc || !(jc->flags & FFM_JOB_CALLS))
		return 0;
	learn_lib_range(p, PT_REGS_IP(ctx));
	t = bpf_map_lookup_elem(&threads, &tid);
	if (!t) {
		bpf_map_update_elem(&threads, &tid, &zero, BPF_NOEXIST);
		t = bpf_map_lookup_elem(&threads, &tid);
		if (!t) {
			count_drop(job, FFM_REC_DROP_THREADS);
			return 0;
		}
	}
	if (t->call_depth++)
		return 0; /* a probed API called by another: the outer call is the one recorded */
	c = bpf_get_attach_cookie(ctx);
	t->cookie = c;
	t->call_start = bpf_ktime_get_ns();
	t->wait_acc = 0;
	t->nwaits = 0;
	load_args(&a, ctx);
	t->bytes = ARG(&a, c, FFM_COOKIE_BYTES_SHIFT);
	if (FFM_COOKIE_ARG(c, FFM_COOKIE_ELSZ_SHIFT))
		t->bytes *= FFM_COOKIE_ARG(c, FFM_COOKIE_ELSZ_SHIFT);
	t->dst = ARG(&a, c, FFM_COOKIE_DST_SHIFT);
	t->src = ARG(&a, c, FFM_COOKIE_SRC_SHIFT);
	t->stream = ARG(&a, c, FFM_COOKIE_STREAM_SHIFT);
	t->outp = ARG(&a, c, FFM_COOKIE_OUTP_SHIFT);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(api_exit)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 id = bpf_get_current_pid_tgid();
	struct ffm_proc *p = tracked(id >> 32);
	__u32 tid = (__u32)id, zero = 0, job;
	struct ffm_rec_call *r;
	struct walk *w;
	struct thr *t;
	__u64 key;

	if (!p)
		return 0;
	job = p->job;
	t = bpf_map_lookup_elem(&threads, &tid);
	if (!t || t->call_depth == 0)
		return 0; /* a job in stage 1 or attached mid-call */
	if (--t->call_depth)
		return 0;
	w = bpf_map_lookup_elem(&walk_scratch, &zero);
	if (!w)
		return 0;
	/* At the return the application's frame is current: the call site is the ip itself,
	 * read from the slot just below sp. */
	w->nlib = 0;
	w->truncated = 0;
	w->callsite = PT_REGS_IP(ctx);
	w->callsite_slot = PT_REGS_SP(ctx) - 8;
	key = stack_key_of(w, id >> 32);
	send_stack(ctx, w, key, id, job, now); /* before the call record, as in wait_exit */

	r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) {
		count_drop(job, FFM_REC_DROP_RINGBUF);
		return 0;
	}
	fill_hdr(&r->hdr, FFM_REC_CALL, id, job, now);
	r->start_ns = t->call_start;
	r->dur_ns = now - t->call_start;
	r->wait_ns = t->wait_acc;
	r->nwaits = t->nwaits;
	r->stack_key = key;
	r->bytes = t->bytes;
	r->dst = t->dst;
	r->src = t->src;
	r->stream = t->stream;
	r->ret = PT_REGS_RC(ctx);
	r->api_id = FFM_COOKIE_API(t->cookie);
	if (t->outp) {
		/* Allocations return their pointer through an out argument. */
		__u64 v = 0;

		bpf_probe_read_user(&v, sizeof(v), (void *)t->outp);
		r->dst = v;
	}
	bpf_ringbuf_submit(r, rb_flags());
	return 0;
}

/* ---- processes --------------------------------------------------------------------------- */

static __always_inline void emit_proc(__u32 type, __u32 tgid, __u32 tid, __u32 job, __u32 ppid,
				      __u32 exit_code)
{
	struct ffm_rec_proc *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);

	if (!r) {
		count_drop(job, FFM_REC_DROP_RINGBUF);
		return;
	}
	fill_hdr(&r->hdr, type, (__u64)tgid << 32 | tid, job, bpf_ktime_get_ns());
	r->ppid = ppid;
	r->exit_code = exit_code;
	r->cgroup_id = bpf_get_current_cgroup_id();
	r->uid = (__u32)bpf_get_current_uid_gid();
	r->_pad = 0;
	bpf_get_current_comm(r->comm, sizeof(r->comm));
	/* Process events are rare: wake the consumer, it attaches and resolves at once. */
	bpf_ringbuf_submit(r, BPF_RB_FORCE_WAKEUP);
}

static __always_inline int job_active(__u32 job)
{
	struct ffm_job_cfg *jc = bpf_map_lookup_elem(&jobs, &job);

	return jc && (jc->flags & FFM_JOB_ACTIVE);
}

static __always_inline __s64 match_rules(struct linux_binprm *bprm)
{
	__u32 uid = (__u32)bpf_get_current_uid_gid();
	struct ffm_exe_key ek = {};
	struct inode *ino;
	__u32 *job;

	job = bpf_map_lookup_elem(&uid_rules, &uid);
	if (job && job_active(*job))
		return *job;
	for (int lvl = 0; lvl < FFM_MAX_CGROUP_LEVELS; lvl++) {
		__u64 cg = bpf_get_current_ancestor_cgroup_id(lvl);

		if (!cg)
			break;
		job = bpf_map_lookup_elem(&cgroup_rules, &cg);
		if (job && job_active(*job))
			return *job;
	}
	ino = BPF_CORE_READ(bprm, file, f_inode);
	if (ino) {
		ek.ino = BPF_CORE_READ(ino, i_ino);
		ek.dev = BPF_CORE_READ(ino, i_sb, s_dev);
		job = bpf_map_lookup_elem(&exe_rules, &ek);
		if (job && job_active(*job))
			return *job;
	}
	return -1;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *task, pid_t old_pid, struct linux_binprm *bprm)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	struct ffm_proc *p = tracked(tgid), np = {};
	__s64 job;

	if (p) {
		/* Already in a job (pid selector or inherited): the new image has a new
		 * address space, so learned libcuda ranges are void. */
		p->lib_start = p->lib_end = 0;
		emit_proc(FFM_REC_EXEC, tgid, (__u32)id, p->job, 0, 0);
		return 0;
	}
	job = match_rules(bprm);
	if (job < 0)
		return 0;
	np.job = job;
	if (bpf_map_update_elem(&procs, &tgid, &np, BPF_NOEXIST)) {
		count_drop(job, FFM_REC_DROP_PROCS);
		return 0;
	}
	emit_proc(FFM_REC_EXEC, tgid, (__u32)id, job, 0, 0);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = BPF_CORE_READ(parent, tgid);
	__u32 ctgid = BPF_CORE_READ(child, tgid);
	struct ffm_proc *p, np = {};

	if (ptgid == ctgid)
		return 0; /* a new thread */
	p = tracked(ptgid);
	if (!p)
		return 0;
	/* The child shares the parent's mappings until it execs. */
	np = *p;
	if (bpf_map_update_elem(&procs, &ctgid, &np, BPF_NOEXIST)) {
		count_drop(p->job, FFM_REC_DROP_PROCS);
		return 0;
	}
	emit_proc(FFM_REC_FORK, ctgid, BPF_CORE_READ(child, pid), p->job, ptgid, 0);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *task)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	struct ffm_proc *p;

	bpf_map_delete_elem(&threads, &tid);
	if (tgid != tid)
		return 0;
	p = tracked(tgid);
	if (!p)
		return 0;
	emit_proc(FFM_REC_EXIT, tgid, tid, p->job, 0, BPF_CORE_READ(task, exit_code));
	bpf_map_delete_elem(&procs, &tgid);
	return 0;
}
