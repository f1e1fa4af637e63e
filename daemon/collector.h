/* SPDX-License-Identifier: MIT */
/*
 * The collector: ffm's BPF programs and maps behind a small API, used by ffmd and by the
 * embedded collector of `ffmctl profile`. Lifecycle: open (open, configure, load, attach the
 * process tracepoints) -> attach drivers -> consume records -> free (detach in reverse).
 *
 * Uprobes are attached to a libcuda file by file offset, either for one process (per-process
 * scope, the default where the kernel allows it: processes outside the jobs get no breakpoint
 * at all) or system-wide (every process that maps the inode traps; the BPF side returns at once
 * for those outside every job, and on Linux 6.12+ (uprobe sessions) spares them the return
 * probe). docs/OVERHEAD.md says what each costs. A process joins a job through a rule checked in
 * BPF at exec (uid, cgroup and its ancestors, executable inode), by pid (ffm_collector__track_pid),
 * or by being forked from a member: none of these has a window in which a call could be missed.
 */
#ifndef FFM_COLLECTOR_H
#define FFM_COLLECTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/capability.h>
#include <sys/types.h>

#include "bpf/ffm.h"
#include "common/caps.h"

struct ffm_collector;
struct ffm_attachment;

/* Called for every record, in ring-buffer order; a negative return stops consumption. */
typedef int (*ffm_record_fn)(void *ctx, const void *rec, size_t size);

struct ffm_collector_opts {
	size_t sz;
	ffm_record_fn on_record;
	void *ctx;
	/* Wake the consumer when this many bytes are pending (0: default, 1/8 of the buffer). */
	uint32_t wakeup_bytes;
	/* Ring buffer size in bytes: a power of two, at least FFM_RINGBUF_MIN_BYTES (one stack
	 * record must fit); 0 = FFM_RINGBUF_BYTES. Small buffers exist for tests of drop
	 * accounting. */
	uint32_t ringbuf_bytes;
	/* Attach the map guard (see ffm_collector__map_guard): the consumer must then handle
	 * FFM_REC_MAP records, or the processes they name stay stopped. */
	bool map_guard;
	/* Ask for per-process scope (see ffm_collector__per_process); needs map_guard. */
	bool per_process;
	/* Load the benchmark's do-nothing program, for probes with .bare set. */
	bool bare_probes;
	/* This process (ffmd) and the programs it runs never join a job, whatever the rules
	 * and selectors say: BPF skips them at exec and fork, ffm_collector__track_pid refuses
	 * this process (-EPERM; the caller skips its children in /proc scans). Not for ffmctl
	 * profile, which tracks its own child. */
	bool exclude_self;
	/* A consume call returns after this many milliseconds, so that a flood of records never
	 * holds the caller's loop (ffmd: consume_ms, FFM_CONSUME_MS); the rest stays for the
	 * next call. 0: no bound (ffmctl profile, whose loop serves its own program only). */
	uint32_t consume_ms;
	/* Tracked processes one user may have in all jobs together (bpf/procs.bpf.h); 0: the
	 * default, FFM_USER_PROCS_DEFAULT; FFM_MAX_PROCS or more: no quota but the map's size. */
	uint32_t procs_per_user;
};

#define FFM_CONSUME_MS 50
/* Half of what ffmd can give probes of their own (daemon/links.c, 1024 processes), so that
 * one user's processes never take them all; a 32nd of the procs map. */
#define FFM_USER_PROCS_DEFAULT 512

#define FFM_RINGBUF_MIN_BYTES (64u << 10)

int ffm_collector__open(const struct ffm_collector_opts *opts, struct ffm_collector **ret);
/* The capabilities (common/caps.h masks) loading the collector needs: CAP_BPF for the programs
 * and maps, CAP_PERFMON for tracing programs and their tracepoints (measured on Linux 6.18:
 * without either, the load is refused). */
#define FFM_COLLECTOR_OPEN_CAPS (FFM_CAP(CAP_BPF) | FFM_CAP(CAP_PERFMON))
/* What attaching uprobes needs in @c's probe mode: a BPF link (session, multi) needs CAP_BPF
 * and CAP_PERFMON; a perf-event uprobe (single) needs CAP_SYS_ADMIN (the kernel's uprobe PMU
 * refuses CAP_PERFMON alone; measured on Linux 6.18). */
uint64_t ffm_collector__attach_caps(const struct ffm_collector *c);
/* How uprobes attach on this kernel: "session" (Linux 6.12+: a process outside every job pays
 * one breakpoint per probed call), "multi" (6.6+) or "single" (per-offset perf-event uprobes);
 * the last two also install a return probe per call. */
const char *ffm_collector__probe_mode(const struct ffm_collector *c);
struct ffm_collector *ffm_collector__free(struct ffm_collector *c);

/* What the wait function's programs have cost so far, summed over entry and return runs, from
 * the kernel's BPF statistics (counted only while something holds them on: bpf_enable_stats
 * or the kernel.bpf_stats_enabled sysctl). 0, or -errno. */
int ffm_collector__wait_prog_stats(const struct ffm_collector *c, uint64_t *run_ns, uint64_t *runs);

/* The ring buffer's epoll fd (readable when records are pending). */
int ffm_collector__fd(const struct ffm_collector *c);
/* Consume pending records, for at most opts.consume_ms if set: returns how many, or -errno.
 * The ring buffer's fd stays readable while records remain. */
int ffm_collector__consume(struct ffm_collector *c);
/* Consume every record sent before this call, however long it takes (the end of a job: its
 * last records are in the buffer, behind any other job's); records sent meanwhile are left.
 * Returns how many, or -errno. */
int ffm_collector__drain(struct ffm_collector *c);

/* One probe point in a driver file. Return probes are attached only to true function entries:
 * exported symbols and a verified wait function (a return probe elsewhere corrupts the traced
 * process: docs/DESIGN.md, "Facts measured on the real GPU machine"). */
struct ffm_probe {
	uint64_t offset; /* file offset */
	uint64_t cookie; /* FFM_COOKIE(...) */
	bool wait;       /* the internal wait function (else an API entry point) */
	bool hash;       /* API point: the sleepable twins that hash transfers (stage 3) */
	bool bare;       /* benchmark only: a program that does nothing (needs opts.bare_probes) */
	bool release;    /* entry only: a context release (FFM_REC_RELEASE, adaptive stage 1) */
	bool bridge;     /* the wait function, as the bridge (see ffm_collector__bridge_ok) */
};

/* Attach @probes (entry + return each) to @path, for process @pid only (> 0) or system-wide
 * (-1); on error nothing stays attached. A process's probes follow it through exec. */
int ffm_collector__attach(struct ffm_collector *c, const char *path, pid_t pid,
			  const struct ffm_probe *probes, size_t n, struct ffm_attachment **ret);
struct ffm_attachment *ffm_attachment__free(struct ffm_attachment *a);
size_t ffm_attachment__count(const struct ffm_attachment *a);

/* Jobs: slot 0..FFM_MAX_JOBS-1. */
int ffm_collector__set_job(struct ffm_collector *c, uint32_t slot, const struct ffm_job_cfg *cfg);
int ffm_collector__track_pid(struct ffm_collector *c, pid_t pid, uint32_t slot);
int ffm_collector__untrack_pid(struct ffm_collector *c, pid_t pid);
/* The slot @pid is tracked in, or -ENOENT. */
int ffm_collector__pid_slot(struct ffm_collector *c, pid_t pid);
/* Move a tracked process to @slot, keeping what BPF learned about it. -ENOENT when @pid is not
 * tracked (any more): unlike track_pid, this never re-adds a process that has just exited. */
int ffm_collector__move_pid(struct ffm_collector *c, pid_t pid, uint32_t slot);
/* @pid's wait probe was put back: a wait it entered under the link before is forgotten by BPF
 * (struct ffm_proc.link_epoch). -ENOENT when @pid is not tracked. */
int ffm_collector__link_epoch(struct ffm_collector *c, pid_t pid);
/* Every tracked pid of @slot into @pids (up to @max); returns the count. */
int ffm_collector__job_pids(struct ffm_collector *c, uint32_t slot, pid_t *pids, int max);

enum ffm_rule_type { FFM_RULE_UID, FFM_RULE_CGROUP, FFM_RULE_EXE };
struct ffm_rule {
	enum ffm_rule_type type;
	uint64_t id;  /* uid, cgroup id */
	uint64_t dev; /* EXE: st_dev of the executable (user-space encoding) */
	uint64_t ino; /* EXE: st_ino */
};
int ffm_collector__add_rule(struct ffm_collector *c, const struct ffm_rule *r, uint32_t slot);
int ffm_collector__del_rule(struct ffm_collector *c, const struct ffm_rule *r);
/* The slot @r maps to now, or -ENOENT. */
int ffm_collector__rule_slot(struct ffm_collector *c, const struct ffm_rule *r);

/*
 * The map guard (bpf/ffm.bpf.c, on_mmap: the mmap syscall tracepoint): a tracked
 * process that maps a libcuda file not yet declared known is stopped and reported by a
 * FFM_REC_MAP record; the consumer makes the driver ready, declares the file known and sends
 * SIGCONT. Declare every driver file as soon as it is dealt with (ready or unusable), by the
 * kernel's device number (ffm_kernel_dev of st_dev) and inode.
 */
bool ffm_collector__map_guard(const struct ffm_collector *c);
int ffm_collector__driver_known(struct ffm_collector *c, uint64_t kdev, uint64_t ino);
/*
 * The wait guard (bpf/ffm.bpf.c, on_wait: the sched_process_wait tracepoint, Linux 6.13+): a
 * process stopped for ffm is listed with its parent (set_held @on, before the stop; BPF's own stops
 * list themselves); when that parent starts a wait that reports stopped children, the process is
 * continued first and unlisted, so that the parent never sees the stop. set_held(@on false)
 * unlists: 1 if it was listed, 0 if the guard had let it go already.
 */
bool ffm_collector__wait_guard(const struct ffm_collector *c);
int ffm_collector__set_held(struct ffm_collector *c, pid_t pid, pid_t ppid, bool on);
/* Undo driver_known (a forgotten unusable driver: its next user is stopped and looked at again). */
int ffm_collector__driver_forget(struct ffm_collector *c, uint64_t kdev, uint64_t ino);
uint64_t ffm_kernel_dev(dev_t dev);

/*
 * Per-process scope: granted when asked for, the map guard is attached and the kernel can stop
 * a forked child (bpf_send_signal_task), unless FFM_PROBE_SCOPE=system. Then the consumer
 * attaches each job process's probes with its pid, declares them with set_linked (@on, per
 * driver file, and {0, 0} while the process has any), and the map guard also stops a job's
 * process at the mmap of a declared driver it has no probes for yet; a fork of a process with
 * probes comes as a FFM_REC_FORK with FFM_PROC_STOPPED: attach the child's, then SIGCONT.
 */
bool ffm_collector__per_process(const struct ffm_collector *c);
int ffm_collector__set_linked(struct ffm_collector *c, pid_t pid, uint64_t kdev, uint64_t ino,
			      bool on);

/*
 * The bridge (per-process scope with uprobe sessions; bpf/procs.bpf.h, wait_bridge): a probe
 * with .bridge set, attached system-wide (pid -1) to a driver file, traces the waits of the
 * processes of the slots in @slots (bit per slot) that have no {pid, 0, 0} declared with
 * set_linked. bridge_set says which slots it serves (@slots) and which may rely on it from now
 * on (@open: the map guard lets their processes map a file declared with driver_bridged, a
 * fork of theirs is not stopped). driver_bridged (@on) declares a file the bridge is attached
 * to (the file as driver_known has it). bridge_ok: whether this collector can have it.
 */
bool ffm_collector__bridge_ok(const struct ffm_collector *c);
void ffm_collector__bridge_set(struct ffm_collector *c, uint64_t slots, uint64_t open);
int ffm_collector__driver_bridged(struct ffm_collector *c, uint64_t kdev, uint64_t ino, bool on);

/* Drops of @slot (FFM_MAX_JOBS: records of no job), summed over CPUs. */
int ffm_collector__drops(struct ffm_collector *c, uint32_t slot, struct ffm_rec_drops *out);
/* Clears the slot's drops and its BPF price (a new run of the slot). */
int ffm_collector__clear_drops(struct ffm_collector *c, uint32_t slot);
/* What ffm's programs at exec, mmap, fork and exit cost @slot's processes (struct
 * ffm_bpf_overhead), summed over CPUs, since the slot was last cleared. */
int ffm_collector__bpf_overhead(struct ffm_collector *c, uint32_t slot,
				struct ffm_bpf_overhead *out);

/* Learned slots of a call site (see bpf/ffm.h). */
/* The Python layout BPF walks for process @tgid (bpf/python.bpf.h); NULL: none. */
struct ffm_py_layout;
int ffm_collector__set_python(struct ffm_collector *c, uint32_t tgid,
			       const struct ffm_py_layout *l);
int ffm_collector__learn_slots(struct ffm_collector *c, uint32_t tgid, uint64_t callsite,
			       const int32_t *off, uint32_t n);
/* Forget per-process state of @tgid (slots, seen stacks) after it exited. */
void ffm_collector__forget_process(struct ffm_collector *c, uint32_t tgid);

/*
 * Hardware watchpoints (stages 3-4): an 8-byte read/write breakpoint on @addr (aligned down to
 * 8) in thread @tid, with the collector's watch_hit program attached: each access outside the
 * driver, first after a sync of the thread, becomes a FFM_REC_HIT record. x86 has 4 debug
 * registers per thread: the 5th watch of a thread fails with -ENOSPC.
 */
struct ffm_watch;
/* Whether the loaded programs include the stage 3-4 ones (hashing twins, watch_hit). */
bool ffm_collector__has_memtrace(const struct ffm_collector *c);
int ffm_collector__watch(struct ffm_collector *c, pid_t tid, uint64_t addr, struct ffm_watch **ret);
/* Stage 4: thread @tid's page faults, each one a FFM_REC_FAULT (see bpf/ffm.bpf.c, fault_hit);
 * -EOPNOTSUPP without the stage 3-4 programs. */
int ffm_collector__faults(struct ffm_collector *c, pid_t tid, struct ffm_watch **ret);
/* The managed ranges [lo[i], hi[i]) of process @tgid whose faults are reported, at most
 * FFM_MANAGED_RANGES (the last ones of the arrays); n = 0 forgets the process. */
int ffm_collector__set_managed(struct ffm_collector *c, uint32_t tgid, const uint64_t *lo,
			       const uint64_t *hi, size_t n);
/*
 * What timing a first use costs on this machine: the median, over FFM_USE_LATENCY_ROUNDS, of
 * the time from a return probe's program to the program of a watchpoint hit by the first read
 * after that return, in the calling thread (a probe on a function of this binary, a watch on a
 * word of it). A first use's measured delay (sync return to hit) holds this much that the
 * application does not spend: the return path after the probe and the trap before the watch's
 * program. Under a hypervisor that traps debug-register accesses it is tens of microseconds,
 * and it moves between runs. -EOPNOTSUPP without the stage 3-4 programs; -EIO when the
 * programs did not run.
 */
#define FFM_USE_LATENCY_ROUNDS 15
/* What one probed call's traps cost a thread of this machine (entry breakpoint and return
 * trampoline), measured at open; BPF adds it to each call's ffm_rec_call.probe_ns. 0 when the
 * measurement failed. */
uint64_t ffm_collector__probe_trap_ns(const struct ffm_collector *c);
int ffm_collector__use_latency(struct ffm_collector *c, uint64_t *ns);
/* Point an existing watch at another address (cheaper than free + watch). */
int ffm_watch__move(struct ffm_watch *w, uint64_t addr);
/* The 8-byte word a watch is on (0: none). */
uint64_t ffm_watch__addr(const struct ffm_watch *w);
struct ffm_watch *ffm_watch__free(struct ffm_watch *w);
/*
 * CPU samples (stage 2, Python threads): a task-clock event at @hz on thread @tid with the
 * collector's cpu_sample program attached; each sample of a process in a job with
 * FFM_JOB_CPU_SAMPLE becomes a FFM_REC_SAMPLE record. Freed with ffm_watch__free.
 */
int ffm_collector__sample(struct ffm_collector *c, pid_t tid, unsigned hz, struct ffm_watch **ret);

#endif
