// SPDX-License-Identifier: GPL-2.0
/*
 * ffm's collector, its processes part (included once, at the end of bpf/ffm.bpf.c, whose maps
 * and helpers it uses: one BPF object, one skeleton): which processes are in a job (the rules
 * checked at exec, inheritance at fork, the end at exit), and the guards that hold a job's
 * process until its probes are in place (the map guard at its mmap of a driver, the fork stop)
 * without any parent ever seeing the stop (the wait guard).
 */
#ifndef FFM_PROCS_BPF_H
#define FFM_PROCS_BPF_H

/* ---- processes --------------------------------------------------------------------------- */

/*
 * The per-user quota of tracked processes: one user's fork flood must not fill the procs map
 * (FFM_MAX_PROCS entries, shared by every job) and leave another user's job untracked. A new
 * entry is charged to the real uid of the process that execs or forks it; past procs_per_user
 * (0: none) it is refused and counted as FFM_REC_DROP_QUOTA in the job it would have joined.
 * The default is FFM_USER_PROCS_DEFAULT (daemon/collector.h says why).
 */
const volatile __u32 procs_per_user = 512;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FFM_MAX_PROCS);
	__type(key, __u32);   /* uid */
	__type(value, __u32); /* its charged entries in procs */
} user_procs SEC(".maps");

/* Charge a new procs entry @np to the current user; false: the quota is full (counted). */
static __always_inline bool procs_charge(struct ffm_proc *np, __u32 job)
{
	__u32 uid = (__u32)bpf_get_current_uid_gid(), zero = 0, *n;

	np->flags &= ~FFM_PROC_CHARGED;
	np->quota_uid = 0;
	if (!procs_per_user)
		return true;
	n = bpf_map_lookup_elem(&user_procs, &uid);
	if (!n) {
		bpf_map_update_elem(&user_procs, &uid, &zero, BPF_NOEXIST);
		n = bpf_map_lookup_elem(&user_procs, &uid);
		if (!n)
			return true; /* no room: the procs map's own bound applies */
	}
	/* Checked, then added (BPF here has no fetching atomics): CPUs forking at the same
	 * instant may each pass the check, and overshoot the quota by as many. */
	if (*n >= procs_per_user) {
		count_drop(job, FFM_REC_DROP_QUOTA);
		return false;
	}
	__sync_fetch_and_add(n, 1);
	np->flags |= FFM_PROC_CHARGED;
	np->quota_uid = uid;
	return true;
}

/* The entry @p leaves procs (or never got in): its user's count goes down. */
static __always_inline void procs_uncharge(const struct ffm_proc *p)
{
	__u32 uid = p->quota_uid, *n;

	if (!(p->flags & FFM_PROC_CHARGED))
		return;
	n = bpf_map_lookup_elem(&user_procs, &uid);
	if (n && *n)
		__sync_fetch_and_add(n, -1);
}

static __always_inline struct ffm_rec_proc *reserve_proc(__u32 type, __u32 tgid, __u32 tid,
							 __u32 job, __u32 ppid, __u32 exit_code)
{
	struct ffm_rec_proc *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);

	if (!r) {
		count_drop(job, FFM_REC_DROP_RINGBUF);
		return NULL;
	}
	fill_hdr(&r->hdr, type, (__u64)tgid << 32 | tid, job, bpf_ktime_get_ns());
	r->ppid = ppid;
	r->exit_code = exit_code;
	r->cgroup_id = bpf_get_current_cgroup_id();
	r->uid = (__u32)bpf_get_current_uid_gid();
	r->flags = 0;
	r->args_hash = 0;
	bpf_get_current_comm(r->comm, sizeof(r->comm));
	return r;
}

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, char[FFM_ARGS_HASH_MAX + 1]);
} args_scratch SEC(".maps");

/* FNV-1a 64 of the first FFM_ARGS_HASH_MAX bytes of @task's argument block (ffm.h). */
static __always_inline __u64 args_hash(struct task_struct *task)
{
	unsigned long start = BPF_CORE_READ(task, mm, arg_start), end = BPF_CORE_READ(task, mm, arg_end);
	__u64 h = FFM_FNV1A_INIT, len = end > start ? end - start : 0;
	__u32 zero = 0;
	char *buf = bpf_map_lookup_elem(&args_scratch, &zero);

	if (!buf)
		return 0;
	if (len > FFM_ARGS_HASH_MAX)
		len = FFM_ARGS_HASH_MAX;
	if (bpf_probe_read_user(buf, len & FFM_ARGS_HASH_MAX, (const void *)start))
		return 0;
	for (__u32 i = 0; i < FFM_ARGS_HASH_MAX && i < len; i++)
		h = ffm_fnv1a_byte(h, (unsigned char)buf[i]); /* = ffm_args_block_hash() */
	return h;
}

static __always_inline void emit_proc(__u32 type, __u32 tgid, __u32 tid, __u32 job, __u32 ppid,
				      __u32 exit_code)
{
	struct ffm_rec_proc *r = reserve_proc(type, tgid, tid, job, ppid, exit_code);

	/* Process events are rare: wake the consumer, it attaches and resolves at once. */
	if (r)
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
	__u64 t0 = bpf_ktime_get_ns();
	struct ffm_rec_proc *r;
	__s64 job;

	if (p) {
		/* Already in a job (pid selector or inherited): the new image has a new
		 * address space, so learned libcuda ranges are void. */
		p->lib_start = p->lib_end = 0;
		bpf_map_delete_elem(&pyprocs, &tgid); /* and so is its Python layout */
		emit_proc(FFM_REC_EXEC, tgid, (__u32)id, p->job, 0, 0);
		charge(p->job, t0);
		return 0;
	}
	if (self_tgid && (tgid == self_tgid || BPF_CORE_READ(task, real_parent, tgid) == self_tgid))
		return 0;
	job = match_rules(bprm);
	if (job < 0)
		return 0;
	np.job = job;
	if (!procs_charge(&np, job))
		return 0;
	if (bpf_map_update_elem(&procs, &tgid, &np, BPF_NOEXIST)) {
		procs_uncharge(&np);
		count_drop(job, FFM_REC_DROP_PROCS);
		return 0;
	}
	/* A rule matched: user space makes the job's key of this exec's comm and arguments. */
	r = reserve_proc(FFM_REC_EXEC, tgid, (__u32)id, job, 0, 0);
	if (r) {
		r->args_hash = args_hash(task);
		bpf_ringbuf_submit(r, BPF_RB_FORCE_WAKEUP);
	}
	charge(job, t0);
	return 0;
}

/* libcuda files user space has dealt with (see struct ffm_rec_map): FFM_DRV_KNOWN, and
 * FFM_DRV_BRIDGED while the bridge (below) is attached to the file. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, struct ffm_exe_key);
	__type(value, __u8);
} drivers SEC(".maps");

/*
 * Per-process scope (set by user space after load, see ffm_collector__per_process): the uprobes
 * are attached for each job process on its own (the kernel then plants no breakpoint in any
 * other process), so a job's process must be stopped before its first call of a driver file
 * until its probes are there: at the mmap of the file (on_mmap) and at a fork that copies the
 * mapping (on_fork). The linked map says which processes have their probes (struct
 * ffm_link_key).
 */
__u32 per_process;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4 * FFM_MAX_PROCS);
	__type(key, struct ffm_link_key);
	__type(value, __u8);
} linked SEC(".maps");

/*
 * The bridge (per-process scope, uprobe sessions; daemon/links.c): while a job whose processes
 * need only the wait probe is active, each driver file ready for use also carries a system-wide
 * wait probe (wait_bridge), which traces the processes of the slots in bridge_slots that have
 * no probes of their own yet (no {tgid, 0, 0} in linked): a process that maps the driver right
 * after its exec is traced at once, with nothing attached for it and nothing to wait for.
 * bridge_open: the slots whose processes may rely on it from now on (the map guard lets them
 * map a FFM_DRV_BRIDGED file, a fork does not stop their children); cleared first when the
 * bridge is about to go, so that a process that maps the driver meanwhile is held as before.
 */
__u64 bridge_slots, bridge_open;

/* Whether process @tgid has probes of its own (user space sets {tgid, 0, 0} in linked). */
static __always_inline bool own_probes(__u32 tgid)
{
	struct ffm_link_key lk = { .tgid = tgid };

	return bpf_map_lookup_elem(&linked, &lk) != NULL;
}

static __always_inline bool slot_in(__u64 slots, __u32 job)
{
	return job < 64 && ((slots >> job) & 1);
}

/*
 * The bridge's program (a session): a wait of a process it serves is traced as wait_sess does;
 * any other returns after the lookups above. Its return half runs only where its own entry
 * asked: how a wait is then recorded once when the process's own probe comes during it, and
 * what becomes of one in progress when the bridge goes: docs/BPF.md, "The bridge".
 */
SEC("uprobe") /* attach type BPF_TRACE_UPROBE_SESSION, set by the collector */
int wait_bridge(struct pt_regs *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct ffm_proc *p;

	if (at_return(ctx)) {
		wait_leave(ctx);
		return 0;
	}
	p = tracked(tgid);
	if (!p || !slot_in(bridge_slots, p->job) || own_probes(tgid))
		return SKIP_RETURN;
	return wait_begin(ctx, p);
}

extern int bpf_send_signal_task(struct task_struct *task, int sig, enum pid_type type,
				__u64 value) __ksym __weak;

#define FFM_SIGSTOP 19
#define FFM_SIGCONT 18
#define FFM_PROT_EXEC 0x4
#define FFM_MAP_ANONYMOUS 0x20
#define FFM_WUNTRACED 2 /* = WSTOPPED */

/*
 * Whether @task's parent is blocked in a wait that reports stopped children (wait4/waitpid with
 * WUNTRACED, waitid with WSTOPPED): a shell with job control, su, runuser or sudo waiting for
 * its foreground child. Stopping @task then would be seen: a shell marks the job stopped and
 * takes the terminal back, su stops itself. Each such wait hangs a struct wait_opts on the
 * waiter's signal->wait_chldexit (kernel/exit.c, do_wait); a few are looked at.
 */
static bool parent_waits_for_stops(struct task_struct *task)
{
	struct signal_struct *sig = BPF_CORE_READ(task, real_parent, signal);
	struct list_head *head, *pos;

	if (!sig)
		return false;
	head = __builtin_preserve_access_index(&sig->wait_chldexit.head);
	pos = BPF_CORE_READ(sig, wait_chldexit.head.next);
	for (int i = 0; i < 8 && pos && pos != head; i++) {
		struct wait_queue_entry *e = container_of(pos, struct wait_queue_entry, entry);
		struct wait_opts *wo = container_of(e, struct wait_opts, child_wait);

		if (BPF_CORE_READ(wo, wo_flags) & FFM_WUNTRACED)
			return true;
		pos = BPF_CORE_READ(pos, next);
	}
	return false;
}

/*
 * Processes stopped for ffm (held) -> the tgid of their parent, set before the stop by whoever
 * stops them (the map guard, the fork stop, user space), cleared by user space when it lets
 * them go. A parent that starts waiting for stopped children while one of them is held gets
 * it continued first (on_wait), so that it never sees the stop.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u32);
} held SEC(".maps");

extern struct task_struct *bpf_task_from_pid(s32 pid) __ksym __weak;
extern void bpf_task_release(struct task_struct *p) __ksym __weak;

struct held_scan {
	__u32 parent, n;
	__u32 child[4];
};

static long held_child(struct bpf_map *map, __u32 *child, __u32 *parent, struct held_scan *s)
{
	__u32 i = s->n;

	if (*parent == s->parent && i < 4) {
		s->child[i] = *child;
		s->n = i + 1;
	}
	return 0;
}

/* x86-64 syscall numbers (the BPF side is built for x86 only, see the Makefile's ARCH). */
#define FFM_NR_WAIT4 61
#define FFM_NR_WAITID 247

/*
 * The kernel's do_wait begins (wait4, waitpid, waitid: the sched_process_wait tracepoint, which
 * fires only there): a wait that reports stopped children (the options in the caller's syscall
 * registers) continues the caller's held children before it looks at them.
 */
SEC("tp_btf/sched_process_wait")
int BPF_PROG(on_wait, struct pid *waited)
{
	struct held_scan s = { .parent = bpf_get_current_pid_tgid() >> 32 };
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	long nr, options;

	if (!regs || !bpf_task_from_pid || !bpf_send_signal_task)
		return 0;
	nr = regs->orig_ax;
	options = nr == FFM_NR_WAIT4 ? regs->dx : nr == FFM_NR_WAITID ? regs->r10 : 0;
	if (!(options & FFM_WUNTRACED))
		return 0;
	bpf_for_each_map_elem(&held, held_child, &s, 0);
	for (__u32 i = 0; i < 4 && i < s.n; i++) {
		struct task_struct *t = bpf_task_from_pid(s.child[i]);

		if (!t)
			continue;
		bpf_send_signal_task(t, FFM_SIGCONT, PIDTYPE_TGID, 0);
		bpf_task_release(t);
		bpf_map_delete_elem(&held, &s.child[i]);
	}
	return 0;
}

/*
 * A process of a job maps a libcuda file user space has not made ready (a driver in a directory
 * ffmd could not foresee at exec: dlopen by absolute path, a container's, or ffmd too slow to
 * read the EXEC record before the loader ran): stop it until that driver's probes are in place,
 * so that its first calls are not missed. Only PROT_EXEC mappings (the loader's text segment):
 * a process that merely reads the file is left alone. The syscall tracepoint of mmap (kprobes
 * and fentry are not available on every kernel that has it): processes outside the jobs pay
 * one hash lookup per mmap, nothing on other calls.
 */
static __always_inline void mmap_guard(struct trace_event_raw_sys_enter *ctx, struct ffm_proc *p,
				       __u64 id)
{
	static const char want[] = "libcuda.so";
	struct task_struct *task;
	struct ffm_exe_key k = {};
	struct file **fds, *file = NULL;
	struct ffm_rec_map *r;
	struct fdtable *fdt;
	struct inode *ino;
	__u8 *known;
	char name[sizeof(want)];
	__u64 fd;

	if (!(ctx->args[2] & FFM_PROT_EXEC) || (ctx->args[3] & FFM_MAP_ANONYMOUS))
		return;
	fd = ctx->args[4];
	task = bpf_get_current_task_btf();
	fdt = BPF_CORE_READ(task, files, fdt);
	if (!fdt || fd >= BPF_CORE_READ(fdt, max_fds))
		return;
	fds = BPF_CORE_READ(fdt, fd);
	if (bpf_probe_read_kernel(&file, sizeof(file), &fds[fd]) || !file)
		return;
	if (bpf_probe_read_kernel_str(name, sizeof(name),
				      BPF_CORE_READ(file, f_path.dentry, d_name.name)) !=
	    sizeof(name))
		return; /* shorter than the prefix */
	for (int i = 0; i < (int)sizeof(want) - 1; i++)
		if (name[i] != want[i])
			return;
	ino = BPF_CORE_READ(file, f_inode);
	k.dev = BPF_CORE_READ(ino, i_sb, s_dev);
	k.ino = BPF_CORE_READ(ino, i_ino);
	if ((known = bpf_map_lookup_elem(&drivers, &k))) {
		struct ffm_link_key lk = { .tgid = id >> 32, .dev = k.dev, .ino = k.ino };
		struct ffm_job_cfg *jc = bpf_map_lookup_elem(&jobs, &p->job);
		/* The bridge traces it from its first call: a process with probes of its own is
		 * not the bridge's, and gets this file's own probes as before. */
		bool bridged = per_process && (*known & FFM_DRV_BRIDGED) &&
			       slot_in(bridge_open, p->job) && !own_probes(lk.tgid);

		/* A rule's process not yet moved to its own job (whose stage may be 2 or more) is
		 * stopped whatever the driver: its calls must find its job's probes, not the rule
		 * slot's stage-1 ones (user space reads its exec record first, then this one). */
		if ((!per_process || bridged || bpf_map_lookup_elem(&linked, &lk)) &&
		    !(jc && (jc->flags & FFM_JOB_RULE)))
			return;
	}
	r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) {
		/* Not stopped: nobody would be told to let it go. */
		count_drop(p->job, FFM_REC_DROP_RINGBUF);
		return;
	}
	fill_hdr(&r->hdr, FFM_REC_MAP, id, p->job, bpf_ktime_get_ns());
	r->dev = k.dev;
	r->ino = k.ino;
	/* Sent before the record is visible, so that user space's SIGCONT cannot come first;
	 * delivered when the mmap returns, with the mapping in place. Not where the parent would
	 * see it: then the process runs on, and its first calls may go unmeasured until user
	 * space has attached its probes. */
	r->flags = parent_waits_for_stops(task) ? FFM_MAP_PARENT_WAITS : 0;
	r->stopped = 0;
	if (!r->flags) {
		__u32 tgid = id >> 32, ptgid = BPF_CORE_READ(task, real_parent, tgid);

		bpf_map_update_elem(&held, &tgid, &ptgid, BPF_ANY);
		r->stopped = bpf_send_signal(FFM_SIGSTOP) == 0;
		if (!r->stopped)
			bpf_map_delete_elem(&held, &tgid);
	}
	bpf_ringbuf_submit(r, BPF_RB_FORCE_WAKEUP);
}

SEC("tracepoint/syscalls/sys_enter_mmap")
int on_mmap(struct trace_event_raw_sys_enter *ctx)
{
	__u64 id = bpf_get_current_pid_tgid(), t0;
	struct ffm_proc *p = tracked(id >> 32);

	if (!p)
		return 0;
	t0 = bpf_ktime_get_ns();
	mmap_guard(ctx, p, id);
	charge(p->job, t0);
	return 0;
}

/* A job process forked (@p its entry): the child joins the job, stopped where it needs probes. */
static __always_inline void fork_track(struct task_struct *parent, struct task_struct *child,
				       struct ffm_proc *p, __u32 ptgid, __u32 ctgid)
{
	struct ffm_link_key lk = { .tgid = ptgid };
	struct ffm_proc np = {};
	struct ffm_rec_proc *r;

	/* The child shares the parent's mappings until it execs. */
	np = *p;
	if (!procs_charge(&np, p->job))
		return;
	if (bpf_map_update_elem(&procs, &ctgid, &np, BPF_NOEXIST)) {
		procs_uncharge(&np);
		count_drop(p->job, FFM_REC_DROP_PROCS);
		return;
	}
	py_fork(ptgid, ctgid);
	r = reserve_proc(FFM_REC_FORK, ctgid, BPF_CORE_READ(child, pid), p->job, ptgid, 0);
	if (!r)
		return; /* not stopped: nobody would be told to let it go */
	/* Per-process scope: the child inherits the parent's mapping of the driver but not its
	 * probes; it must not run before user space has attached its own. Sent before the record
	 * is visible, so that user space's SIGCONT cannot come first. Not where the bridge serves
	 * its job: it traces the child, which has no probes of its own. */
	if (per_process && bpf_map_lookup_elem(&linked, &lk) && bpf_send_signal_task &&
	    !slot_in(bridge_open, p->job)) {
		bpf_map_update_elem(&held, &ctgid, &ptgid, BPF_ANY);
		if (bpf_send_signal_task(child, FFM_SIGSTOP, PIDTYPE_TGID, 0) == 0)
			r->flags = FFM_PROC_STOPPED;
		else
			bpf_map_delete_elem(&held, &ctgid);
	}
	bpf_ringbuf_submit(r, BPF_RB_FORCE_WAKEUP);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = BPF_CORE_READ(parent, tgid);
	__u32 ctgid = BPF_CORE_READ(child, tgid);
	struct ffm_proc *p;
	__u64 t0;

	if (ptgid == ctgid || ptgid == self_tgid)
		return 0; /* a new thread; or a child of ffmd, which never joins a job */
	p = tracked(ptgid);
	if (!p)
		return 0;
	t0 = bpf_ktime_get_ns();
	fork_track(parent, child, p, ptgid, ctgid);
	charge(p->job, t0);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *task)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	struct ffm_proc *p;
	__u64 t0;

	bpf_map_delete_elem(&pending, &tid);
	if (tgid != tid)
		return 0;
	bpf_map_delete_elem(&held, &tgid);
	p = tracked(tgid);
	if (!p)
		return 0;
	t0 = bpf_ktime_get_ns();
	bpf_map_delete_elem(&pyprocs, &tgid);
	emit_proc(FFM_REC_EXIT, tgid, tid, p->job, 0, BPF_CORE_READ(task, exit_code));
	charge(p->job, t0);
	procs_uncharge(p);
	bpf_map_delete_elem(&procs, &tgid);
	return 0;
}

/*
 * Adaptive stage 1: a job's process enters cuDevicePrimaryCtxRelease/Reset or cuCtxDestroy (an
 * entry probe of its own, put on once its waits are sampled): the end of its work with that
 * context, where ffmd ends the span it extrapolates (daemon/adaptive.c). Entry only.
 */
SEC("uprobe")
int ctx_release(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct ffm_proc *p = tracked(id >> 32);

	if (p)
		emit_proc(FFM_REC_RELEASE, id >> 32, (__u32)id, p->job, 0, 0);
	/* A session asks for no return; a perf-event uprobe wants 0 (no perf sample). */
	return session_mode ? 1 : 0;
}

#endif /* FFM_PROCS_BPF_H */
