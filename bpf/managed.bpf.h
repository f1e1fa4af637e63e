// SPDX-License-Identifier: GPL-2.0
/*
 * ffm's collector, its managed-memory part (included once, at the end of bpf/ffm.bpf.c, whose
 * maps and helpers it uses: one BPF object, one skeleton): stage 4's count of the host's page
 * faults in a process's managed memory (docs/STAGES.md; analysis/managed.c prices them).
 */
#ifndef FFM_MANAGED_BPF_H
#define FFM_MANAGED_BPF_H

/* Stage 4: each process's managed ranges, whose page faults fault_hit reports (user space). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FFM_MAX_PROCS);
	__type(key, __u32);
	__type(value, struct ffm_managed);
} managed SEC(".maps");

/*
 * Stage 4: the page faults of the threads user space samples them on (ffm_collector__faults: a
 * software event of period 1 per thread, opened only in a process that allocated managed
 * memory), in the process's managed ranges (the managed map, user space's). A fault inside the
 * driver is its own (it fills or moves pages): not reported. User space gives each to the
 * thread's last probed call.
 */
SEC("perf_event")
int fault_hit(struct bpf_perf_event_data *ctx)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 id = bpf_get_current_pid_tgid();
	struct pt_regs *regs = (struct pt_regs *)&ctx->regs;
	__u32 job, tgid = id >> 32;
	struct ffm_job_cfg *jc = job_with(tgid, FFM_JOB_MEMTRACE, &job);
	struct ffm_managed *mr;
	struct ffm_rec_fault *r;
	struct thr *t;
	bool in = false;

	if (!jc)
		return 0;
	mr = bpf_map_lookup_elem(&managed, &tgid);
	if (!mr)
		return 0;
	for (int i = 0; i < FFM_MANAGED_RANGES; i++)
		in |= ctx->addr >= mr->lo[i] && ctx->addr < mr->hi[i];
	if (!in)
		return 0;
	t = thread_state(false);
	if (t && (t->call_depth || t->wait_depth))
		return 0;
	r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) {
		count_drop(job, FFM_REC_DROP_RINGBUF);
		return 0;
	}
	fill_hdr(&r->hdr, FFM_REC_FAULT, id, job, now);
	r->ip = PT_REGS_IP(regs);
	r->addr = ctx->addr;
	bpf_ringbuf_submit(r, rb_flags());
	return 0;
}

#endif
