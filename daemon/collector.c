/* SPDX-License-Identifier: MIT */
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <linux/hw_breakpoint.h>
#include <pthread.h>
#include <signal.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/util.h"
#include "bpf/ffm.skel.h"
#include "daemon/collector.h"
#include "daemon/records.h"

_Static_assert(sizeof(struct ffm_rec_hdr) == 32, "ffm_rec_hdr layout");
_Static_assert(sizeof(struct ffm_rec_wait) == 32 + 32, "ffm_rec_wait layout");
_Static_assert(sizeof(struct ffm_rec_call) == 32 + 96, "ffm_rec_call layout");
_Static_assert(sizeof(struct ffm_rec_stack) == 32 + 56 + 8 * FFM_LIB_FRAMES + 8 +
			       sizeof(struct ffm_py_frame) * FFM_PY_FRAMES + FFM_STACK_BYTES,
	       "ffm_rec_stack layout");
_Static_assert(sizeof(struct ffm_rec_proc) == 32 + 48, "ffm_rec_proc layout");
_Static_assert(sizeof(struct ffm_slots) == 8 + 4 * FFM_LEARNED_SLOTS, "ffm_slots layout");
_Static_assert(sizeof(struct ffm_rec_xfer) == 32 + 48, "ffm_rec_xfer layout");
_Static_assert(sizeof(struct ffm_rec_range) == 32 + 40, "ffm_rec_range layout");
_Static_assert(sizeof(struct ffm_rec_hit) == 32 + 32, "ffm_rec_hit layout");
_Static_assert(sizeof(struct ffm_rec_fault) == 32 + 16, "ffm_rec_fault layout");
_Static_assert(sizeof(struct ffm_rec_map) == 32 + 24, "ffm_rec_map layout");
_Static_assert(sizeof(struct ffm_py_layout) == 80, "ffm_py_layout layout");
_Static_assert(sizeof(struct ffm_rec_pycode) == 32 + 32 + FFM_PY_FILE_BYTES + FFM_PY_QUAL_BYTES +
			       FFM_PY_TABLE_BYTES, "ffm_rec_pycode layout");

struct ffm_collector {
	struct ffm_bpf *skel;
	struct ring_buffer *rb;
	ffm_record_fn on_record;
	void *ctx;
	int ncpus;
	bool memtrace; /* the stage 3-4 programs loaded */
	bool multi;    /* uprobes attach as uprobe_multi links */
	bool session;  /* ... as uprobe sessions: one program for entry and return */
	bool map_guard; /* on_mmap is attached (see ffm_collector__map_guard) */
	bool wait_guard; /* on_wait is attached (see ffm_collector__set_held) */
	bool per_process; /* probes attach per process (see ffm_collector__per_process) */
	bool bare;     /* the benchmark's do-nothing program loaded */
	uint32_t job_gen; /* last struct ffm_job_cfg.gen given */
	/* A consume call's bounds (ffm_collector__consume, __drain): the ring's positions,
	 * mapped read-only, the records taken so far, the deadline or the drain's target. */
	const volatile uint64_t *cons_pos, *prod_pos;
	size_t page;
	uint32_t consume_ms;
	uint64_t taken, deadline_ns, drain_to;
	bool bounded; /* a bound was reached: on_sample stopped the consumption */
};

/* What on_sample returns to stop ring_buffer__consume once a bound is reached (libbpf 1.1:
 * a negative return stops it after that record, which counts as consumed). */
#define FFM_CONSUME_BOUND (-ECANCELED)

/*
 * uprobe_multi links (Linux 6.6): one link holds every offset of one program in one file, and
 * is removed with one wait for the kernel; a perf-event uprobe per offset costs ~0.1 s each to
 * remove, serialized (a stage-2 probe set took >10 s to detach). libbpf 1.1 predates them, so
 * the link is made with the bpf() syscall; the values are the kernel's UAPI.
 */
#define FFM_BPF_TRACE_UPROBE_MULTI 48
#define FFM_BPF_F_UPROBE_MULTI_RETURN 1u
/*
 * Uprobe sessions (Linux 6.12) are uprobe_multi links whose program runs at the entry and, if
 * it asks, at the return (bpf/ffm.bpf.c, wait_sess). A process outside every job then costs one
 * breakpoint per probed call instead of a breakpoint plus a hijacked return.
 */
#define FFM_BPF_TRACE_UPROBE_SESSION 57

struct uprobe_multi_attr { /* union bpf_attr's link_create, uprobe_multi member */
	uint32_t prog_fd, target_fd, attach_type, flags;
	uint64_t path, offsets, ref_ctr_offsets, cookies;
	uint32_t cnt, um_flags, pid, pad;
};
_Static_assert(sizeof(struct uprobe_multi_attr) == 64, "uprobe_multi attr layout");

#define FFM_MAX_MULTI_LINKS 8

struct ffm_watch {
	struct bpf_link *link; /* owns the perf event fd */
	int pfd;
	uint64_t addr;
};

struct ffm_attachment {
	size_t n;                         /* links[]: 2 per probe (entry, return); 0 with multi */
	size_t nprobes;
	size_t nfds;                      /* uprobe_multi links, return links first */
	int fds[FFM_MAX_MULTI_LINKS];
	struct bpf_link *links[];
};

/* Whether the consume call in progress stops after this record of @size bytes. */
static bool consume_bounded(struct ffm_collector *c, size_t size)
{
	c->taken++;
	if (c->drain_to) {
		/* the consumer position after this record: its header and data, 8-aligned */
		uint64_t end = *c->cons_pos + ((size + BPF_RINGBUF_HDR_SZ + 7) & ~7ull);

		c->bounded = end >= c->drain_to;
	} else if (c->deadline_ns && !(c->taken & 15)) {
		c->bounded = ffm_now_ns() >= c->deadline_ns;
	}
	return c->bounded;
}

static int on_sample(void *ctx, void *data, size_t size)
{
	struct ffm_collector *c = ctx;
	const struct ffm_rec_hdr *h = data;
	const struct ffm_rec_kind *kind;
	size_t want;

	if (size < sizeof(*h))
		return 0;
	kind = ffm_rec_kind(h->type); /* daemon/records.c: each type's size */
	want = kind ? kind->size : 0;
	if (!want || size < want)
		return 0; /* not ours or truncated: ignore rather than misread */
	if (c->on_record) {
		int err = c->on_record(c->ctx, data, size);

		if (err < 0)
			return err;
	}
	return consume_bounded(c, size) ? FFM_CONSUME_BOUND : 0;
}

/* FFM_PROBE_MODE=session|multi|single: the first attempt of ffm_collector__open (a
 * workaround for a kernel whose newer uprobe kind misbehaves; tests cover each path). */
static const char *const PROBE_MODES[] = { "session", "multi", "single" }; /* = attempts 0-2 */

static int probe_mode_start(void)
{
	const char *m = getenv("FFM_PROBE_MODE");

	for (int i = 0; m && i < 3; i++)
		if (!strcmp(m, PROBE_MODES[i]))
			return i;
	return 0;
}

/* Which programs load, and as what, for the mode chosen in c. */
static void configure_progs(struct ffm_collector *c)
{
	struct bpf_program *sess[] = { c->skel->progs.wait_sess, c->skel->progs.api_sess,
				       c->skel->progs.api_sess_h, c->skel->progs.wait_bridge };
	struct bpf_program *pair[] = {
		c->skel->progs.wait_entry, c->skel->progs.wait_exit,     c->skel->progs.api_entry,
		c->skel->progs.api_exit,   c->skel->progs.api_entry_h, c->skel->progs.api_exit_h,
	};

	for (size_t i = 0; i < sizeof(sess) / sizeof(sess[0]); i++) {
		bpf_program__set_autoload(sess[i], c->session);
		bpf_program__set_expected_attach_type(sess[i], FFM_BPF_TRACE_UPROBE_SESSION);
	}
	for (size_t i = 0; i < sizeof(pair) / sizeof(pair[0]); i++) {
		bpf_program__set_autoload(pair[i], !c->session);
		if (c->multi)
			bpf_program__set_expected_attach_type(pair[i], FFM_BPF_TRACE_UPROBE_MULTI);
	}
	bpf_program__set_autoload(c->skel->progs.bare, c->bare);
	if (c->multi)
		bpf_program__set_expected_attach_type(c->skel->progs.bare, c->session ?
						      FFM_BPF_TRACE_UPROBE_SESSION : FFM_BPF_TRACE_UPROBE_MULTI);
	if (c->multi)
		bpf_program__set_expected_attach_type(c->skel->progs.ctx_release, c->session ?
						      FFM_BPF_TRACE_UPROBE_SESSION : FFM_BPF_TRACE_UPROBE_MULTI);
	c->skel->rodata->session_mode = c->session;
	bpf_program__set_autoload(c->skel->progs.on_wait, c->wait_guard);
	if (!c->memtrace) {
		bpf_program__set_autoload(c->skel->progs.api_entry_h, false);
		bpf_program__set_autoload(c->skel->progs.api_exit_h, false);
		bpf_program__set_autoload(c->skel->progs.watch_hit, false);
		bpf_program__set_autoload(c->skel->progs.fault_hit, false);
		bpf_program__set_autoload(c->skel->progs.calib_hit, false);
	}
}

const char *ffm_collector__probe_mode(const struct ffm_collector *c)
{
	return PROBE_MODES[c->session ? 0 : c->multi ? 1 : 2];
}

uint64_t ffm_collector__attach_caps(const struct ffm_collector *c)
{
	return c->session || c->multi ? FFM_COLLECTOR_OPEN_CAPS : FFM_CAP(CAP_SYS_ADMIN);
}

bool ffm_collector__map_guard(const struct ffm_collector *c)
{
	return c->map_guard;
}

bool ffm_collector__per_process(const struct ffm_collector *c)
{
	return c->per_process;
}

/* Whether the running kernel has kfunc @name (a weak __ksym in the programs resolves to 0
 * otherwise, and the program must not depend on it). */
static bool kernel_has_kfunc(const char *name)
{
	struct btf *vb = btf__load_vmlinux_btf();
	bool has = vb && btf__find_by_name_kind(vb, name, BTF_KIND_FUNC) > 0;

	btf__free(vb);
	return has;
}

/*
 * A syscall tracepoint is attached by its id, read from tracefs. systemd mounts tracefs at
 * boot; a minimal system (a VM's init, a container host without systemd) may not have: mount
 * it where libbpf looks first. 0 if it is mounted now, -errno if it could not be.
 */
static int mount_tracefs(void)
{
	static const char *const dirs[] = { "/sys/kernel/tracing", "/sys/kernel/debug/tracing" };

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		char p[64];

		snprintf(p, sizeof(p), "%s/events", dirs[i]);
		if (access(p, F_OK) == 0)
			return -EEXIST; /* mounted: the failure was something else */
	}
	return mount("tracefs", dirs[0], "tracefs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) ? -errno : 0;
}

static void calib_trap(struct ffm_collector *c);

/* The ring's consumer and producer positions, read-only, for ffm_collector__drain (without
 * them a drain is one bounded consume). */
static void map_positions(struct ffm_collector *c)
{
	int fd = bpf_map__fd(c->skel->maps.events);
	void *cp, *pp;

	c->page = (size_t)sysconf(_SC_PAGESIZE);
	cp = mmap(NULL, c->page, PROT_READ, MAP_SHARED, fd, 0);
	pp = mmap(NULL, c->page, PROT_READ, MAP_SHARED, fd, (off_t)c->page);
	if (cp == MAP_FAILED || pp == MAP_FAILED) {
		if (cp != MAP_FAILED)
			munmap(cp, c->page);
		if (pp != MAP_FAILED)
			munmap(pp, c->page);
		return;
	}
	c->cons_pos = cp;
	c->prod_pos = pp;
}

/* c->skel opened, with what @opts sets in its read-only data and the ring buffer's size: 0 or
 * an error (c->skel, when set, is the caller's to destroy). */
static int open_skel(struct ffm_collector *c, const struct ffm_collector_opts *opts)
{
	c->skel = ffm_bpf__open();
	if (!c->skel)
		return errno ? -errno : -EINVAL;
	if (opts && opts->wakeup_bytes)
		c->skel->rodata->ringbuf_wakeup_bytes = opts->wakeup_bytes;
	if (opts && opts->exclude_self)
		c->skel->rodata->self_tgid = (uint32_t)getpid();
	if (opts && opts->procs_per_user)
		c->skel->rodata->procs_per_user = opts->procs_per_user < FFM_MAX_PROCS ?
						   opts->procs_per_user : 0;
	if (opts && opts->ringbuf_bytes) {
		uint32_t b = opts->ringbuf_bytes;

		if (b < FFM_RINGBUF_MIN_BYTES || (b & (b - 1)))
			return -EINVAL;
		/* A wake-up threshold at or above this size never fires: the consumer then
		 * relies on its own polling (ffmd: every 100 ms). */
		return bpf_map__set_max_entries(c->skel->maps.events, b);
	}
	return 0;
}

/* c->skel loaded in the first probe mode the kernel takes: 0 or an error. Newer kernels get
 * more: attempt 0 loads uprobe sessions, 1 uprobe_multi links, 2 per-offset uprobes; 0-2 the
 * stage 3-4 programs (sleepable uprobes, a perf_event program), 3 neither (stages 1-2 still
 * work). FFM_PROBE_MODE starts lower. */
static int load_skel(struct ffm_collector *c, const struct ffm_collector_opts *opts)
{
	int err = -EINVAL;

	for (int attempt = probe_mode_start(); attempt < 4; attempt++) {
		err = open_skel(c, opts);
		if (err)
			return err;
		c->session = attempt == 0;
		c->multi = attempt <= 1;
		c->memtrace = attempt <= 2;
		configure_progs(c);
		err = ffm_bpf__load(c->skel);
		if (!err)
			return 0;
		ffm_bpf__destroy(c->skel);
		c->skel = NULL;
		/* The wait guard is optional (kfuncs of 6.13+): try without it before giving up
		 * a probe mode. */
		if (c->wait_guard) {
			c->wait_guard = false;
			attempt--;
		}
	}
	return err;
}

/* The process tracepoints attached (exec, fork, exit), and the map and wait guards where @opts
 * asks for them and the kernel has them: 0 or an error. Uprobes go per driver file. */
static int attach_tracepoints(struct ffm_collector *c, const struct ffm_collector_opts *opts)
{
	struct {
		struct bpf_link **link;
		struct bpf_program *prog;
	} tp[] = {
		{ &c->skel->links.on_exec, c->skel->progs.on_exec },
		{ &c->skel->links.on_fork, c->skel->progs.on_fork },
		{ &c->skel->links.on_exit, c->skel->progs.on_exit },
	};

	for (size_t i = 0; i < sizeof(tp) / sizeof(tp[0]); i++) {
		*tp[i].link = bpf_program__attach(tp[i].prog);
		if (!*tp[i].link)
			return errno ? -errno : -EINVAL;
	}
	/* Optional (a kernel without syscall tracepoints): without it a driver ffmd could not
	 * foresee is caught only if ffmd reads the process's EXEC record before the loader maps
	 * the file. */
	if (opts && opts->map_guard) {
		c->skel->links.on_mmap = bpf_program__attach(c->skel->progs.on_mmap);
		if (!c->skel->links.on_mmap && mount_tracefs() == 0)
			c->skel->links.on_mmap = bpf_program__attach(c->skel->progs.on_mmap);
		c->map_guard = c->skel->links.on_mmap != NULL;
	}
	if (c->wait_guard) {
		c->skel->links.on_wait = bpf_program__attach(c->skel->progs.on_wait);
		c->wait_guard = c->skel->links.on_wait != NULL;
	}
	return 0;
}

int ffm_collector__open(const struct ffm_collector_opts *opts, struct ffm_collector **ret)
{
	struct ffm_collector *c;
	int err;

	*ret = NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->on_record = opts ? opts->on_record : NULL;
	c->bare = opts && opts->bare_probes;
	c->ctx = opts ? opts->ctx : NULL;
	c->consume_ms = opts ? opts->consume_ms : 0;
	c->ncpus = libbpf_num_possible_cpus();
	if (c->ncpus <= 0) {
		err = c->ncpus ? c->ncpus : -EINVAL;
		goto fail;
	}
	/* FFM_WAIT_GUARD=0 in the environment leaves it out (tests of the older kernels' way). */
	c->wait_guard = opts && opts->map_guard && kernel_has_kfunc("bpf_task_from_pid") &&
			kernel_has_kfunc("bpf_send_signal_task") &&
			!(getenv("FFM_WAIT_GUARD") && !strcmp(getenv("FFM_WAIT_GUARD"), "0"));
	err = load_skel(c, opts);
	if (!err)
		err = attach_tracepoints(c, opts);
	if (err)
		goto fail;
	/* Per-process scope needs both stops: the map guard's, and the one at a fork that
	 * copies a probed process (bpf_send_signal_task, Linux 6.13+). FFM_PROBE_SCOPE=system
	 * keeps the system-wide uprobes (a workaround, and how tests cover that path). */
	if (opts && opts->per_process && c->map_guard && kernel_has_kfunc("bpf_send_signal_task")) {
		const char *sc = getenv("FFM_PROBE_SCOPE");

		c->per_process = !sc || strcmp(sc, "system");
		c->skel->bss->per_process = c->per_process;
	}
	c->rb = ring_buffer__new(bpf_map__fd(c->skel->maps.events), on_sample, c, NULL);
	if (!c->rb) {
		err = -errno;
		goto fail;
	}
	map_positions(c);
	/* Not fatal: without it a call's probe cost is its programs' run time only. */
	calib_trap(c);
	*ret = c;
	return 0;
fail:
	ffm_collector__free(c);
	return err < 0 ? err : -EINVAL;
}

/*
 * Processes stopped for this collector are let go as it goes: the held map lists each one the
 * map guard or the fork stop stopped (and each the consumer holds) until it is let go, and once
 * the collector is gone nobody would send the SIGCONT. A consumer that stops between a stop and
 * the reading of its record (ffmd told to stop, a second ffmd on the machine taking a process
 * of the first's job) left that process stopped for good. The two stops are detached first, so
 * that no stop comes after the list is read.
 */
static void release_held(struct ffm_collector *c)
{
	uint32_t key, next, *prev = NULL;
	int fd;

	bpf_link__destroy(c->skel->links.on_mmap);
	c->skel->links.on_mmap = NULL;
	bpf_link__destroy(c->skel->links.on_fork);
	c->skel->links.on_fork = NULL;
	fd = bpf_map__fd(c->skel->maps.held);
	while (fd >= 0 && bpf_map_get_next_key(fd, prev, &next) == 0) {
		key = next;
		prev = &key;
		kill((pid_t)key, SIGCONT);
	}
}

struct ffm_collector *ffm_collector__free(struct ffm_collector *c)
{
	if (!c)
		return NULL;
	if (c->skel)
		release_held(c);
	ring_buffer__free(c->rb);
	if (c->cons_pos)
		munmap((void *)c->cons_pos, c->page);
	if (c->prod_pos)
		munmap((void *)c->prod_pos, c->page);
	ffm_bpf__destroy(c->skel);
	free(c);
	return NULL;
}

int ffm_collector__wait_prog_stats(const struct ffm_collector *c, uint64_t *run_ns, uint64_t *runs)
{
	const struct bpf_program *progs[] = { c->skel->progs.wait_sess, c->skel->progs.wait_entry,
					      c->skel->progs.wait_exit };

	*run_ns = *runs = 0;
	for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++) {
		struct bpf_prog_info info = {};
		uint32_t len = sizeof(info);
		int fd = bpf_program__fd(progs[i]);

		if (fd < 0)
			continue; /* not loaded in this probe mode */
		if (bpf_obj_get_info_by_fd(fd, &info, &len))
			return -errno;
		*run_ns += info.run_time_ns;
		*runs += info.run_cnt;
	}
	return 0;
}

int ffm_collector__fd(const struct ffm_collector *c)
{
	return ring_buffer__epoll_fd(c->rb);
}

/* One ring_buffer__consume under the bounds set: the records taken, or -errno. */
static int consume_once(struct ffm_collector *c)
{
	int n;

	c->taken = 0;
	c->bounded = false;
	n = ring_buffer__consume(c->rb);
	if (n == FFM_CONSUME_BOUND && c->bounded)
		n = 0;
	return n < 0 ? n : (int)c->taken;
}

int ffm_collector__consume(struct ffm_collector *c)
{
	c->drain_to = 0;
	c->deadline_ns = c->consume_ms ? ffm_now_ns() + (uint64_t)c->consume_ms * 1000000 : 0;
	return consume_once(c);
}

int ffm_collector__drain(struct ffm_collector *c)
{
	uint64_t target;
	int n, total = 0;

	if (!c->prod_pos) /* not mapped: as much as a consume call takes */
		return ffm_collector__consume(c);
	target = __atomic_load_n(c->prod_pos, __ATOMIC_ACQUIRE);
	while (__atomic_load_n(c->cons_pos, __ATOMIC_ACQUIRE) < target) {
		c->drain_to = target;
		n = consume_once(c);
		if (n <= 0) { /* an error, or a record reserved and not yet submitted */
			total = n < 0 ? n : total;
			break;
		}
		total += n;
	}
	c->drain_to = 0;
	return total;
}

/* The program for @p's entry (@ret false) or return; a session program is both. NULL: an
 * entry-only probe's return. */
static struct bpf_program *probe_prog(struct ffm_collector *c, const struct ffm_probe *p, bool ret)
{
	if (p->release)
		return ret && !c->session ? NULL : c->skel->progs.ctx_release;
	if (p->bare)
		return c->skel->progs.bare;
	if (p->bridge)
		return c->session ? c->skel->progs.wait_bridge : NULL;
	if (c->session) {
		if (p->wait)
			return c->skel->progs.wait_sess;
		return p->hash ? c->skel->progs.api_sess_h : c->skel->progs.api_sess;
	}
	if (p->wait)
		return ret ? c->skel->progs.wait_exit : c->skel->progs.wait_entry;
	if (p->hash && c->memtrace)
		return ret ? c->skel->progs.api_exit_h : c->skel->progs.api_entry_h;
	return ret ? c->skel->progs.api_exit : c->skel->progs.api_entry;
}

/* Attaching a uprobe waits for the kernel (~0.1 s each on 6.18, 41 probes: 9 s); threads
 * attaching at once overlap those waits (41 probes: 0.14 s). */
struct attach_job {
	struct ffm_collector *c;
	const char *path;
	const struct ffm_probe *probes;
	pid_t pid;
	struct ffm_attachment *a;
	/* links[first], links[first + step], ...: link k is probe k/2, return if odd */
	size_t first, step;
	int err;
};

static void *attach_some(void *arg)
{
	struct attach_job *j = arg;
	struct ffm_collector *c = j->c;

	for (size_t k = j->first; k < j->a->n && !j->err; k += j->step) {
		const struct ffm_probe *p = &j->probes[k / 2];
		bool r = k & 1;
		LIBBPF_OPTS(bpf_uprobe_opts, uo, .bpf_cookie = p->cookie, .retprobe = r);
		struct bpf_program *prog = probe_prog(c, p, r);

		if (!prog)
			continue; /* an entry-only probe's return */
		j->a->links[k] = bpf_program__attach_uprobe_opts(prog, j->pid, j->path, p->offset, &uo);
		if (!j->a->links[k])
			j->err = errno ? -errno : -EINVAL;
	}
	return NULL;
}

#define LINK_THREADS 32

/* Run fn over links[parity], links[parity + 2], ... with up to LINK_THREADS threads. */
static int for_links_parallel(struct attach_job *proto, size_t parity, void *(*fn)(void *))
{
	struct attach_job jobs[LINK_THREADS];
	pthread_t th[LINK_THREADS];
	bool started[LINK_THREADS] = { false };
	size_t nth = (proto->a->n / 2 + 3) / 4; /* about 4 links per thread */
	int err = 0;

	if (nth > LINK_THREADS)
		nth = LINK_THREADS;
	if (nth < 1)
		nth = 1;
	for (size_t t = 0; t < nth; t++) {
		jobs[t] = *proto;
		jobs[t].first = parity + 2 * t;
		jobs[t].step = 2 * nth;
		jobs[t].err = 0;
		started[t] = nth > 1 && pthread_create(&th[t], NULL, fn, &jobs[t]) == 0;
	}
	for (size_t t = 0; t < nth; t++) {
		if (started[t])
			pthread_join(th[t], NULL);
		else
			fn(&jobs[t]);
		if (jobs[t].err && !err)
			err = jobs[t].err;
	}
	return err;
}

/* One uprobe_multi link of @prog over the probes of @probes that use it. */
static int attach_multi_one(struct ffm_collector *c, struct ffm_attachment *a, const char *path,
			    pid_t pid, const struct ffm_probe *probes, size_t n, struct bpf_program *prog,
			    bool ret)
{
	uint64_t *offs = calloc(n, sizeof(*offs)), *cookies = calloc(n, sizeof(*cookies));
	struct uprobe_multi_attr attr = {};
	uint32_t cnt = 0;
	int fd, err = 0;

	if (!offs || !cookies) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		if (probe_prog(c, &probes[i], ret) != prog)
			continue;
		offs[cnt] = probes[i].offset;
		cookies[cnt] = probes[i].cookie;
		cnt++;
	}
	if (!cnt)
		goto out;
	if (a->nfds == FFM_MAX_MULTI_LINKS) {
		err = -E2BIG;
		goto out;
	}
	attr = (struct uprobe_multi_attr){
		.prog_fd = bpf_program__fd(prog), .path = (uintptr_t)path, .offsets = (uintptr_t)offs,
		.attach_type = c->session ? FFM_BPF_TRACE_UPROBE_SESSION : FFM_BPF_TRACE_UPROBE_MULTI,
		.cookies = (uintptr_t)cookies, .cnt = cnt, .pid = pid > 0 ? (uint32_t)pid : 0,
		.um_flags = ret ? FFM_BPF_F_UPROBE_MULTI_RETURN : 0,
	};
	fd = syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
	if (fd < 0) {
		err = -errno;
		goto out;
	}
	a->fds[a->nfds++] = fd;
out:
	free(offs);
	free(cookies);
	return err;
}

int ffm_collector__attach(struct ffm_collector *c, const char *path, pid_t pid,
			  const struct ffm_probe *probes, size_t n, struct ffm_attachment **ret)
{
	struct attach_job proto = { .c = c, .path = path, .probes = probes, .pid = pid > 0 ? pid : -1 };
	struct ffm_attachment *a;
	int err = 0;

	*ret = NULL;
	for (size_t i = 0; i < n; i++)
		if (probes[i].bare && !c->bare)
			return -EINVAL;
	a = calloc(1, sizeof(*a) + (c->multi ? 0 : 2 * n * sizeof(a->links[0])));
	if (!a)
		return -ENOMEM;
	a->nprobes = n;
	/* Return probes first: a call already running when its entry probe appears would
	 * otherwise raise the thread's call depth for good; a return without entry is only
	 * counted (FFM_REC_DROP_UNMATCHED). */
	if (c->session) {
		/* A session's return half runs only after its own entry: no order to keep. */
		struct bpf_program *progs[] = { c->skel->progs.wait_sess, c->skel->progs.api_sess,
						c->skel->progs.api_sess_h, c->skel->progs.bare,
						c->skel->progs.ctx_release, c->skel->progs.wait_bridge };

		for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]) && !err; i++)
			err = attach_multi_one(c, a, path, pid, probes, n, progs[i], false);
	} else if (c->multi) {
		struct bpf_program *progs[] = {
			c->skel->progs.wait_exit,  c->skel->progs.api_exit,  c->skel->progs.api_exit_h,
			c->skel->progs.bare,       c->skel->progs.wait_entry, c->skel->progs.api_entry,
			c->skel->progs.api_entry_h, c->skel->progs.bare,   c->skel->progs.ctx_release,
		};

		for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]) && !err; i++)
			err = attach_multi_one(c, a, path, pid, probes, n, progs[i], i < 4);
	} else {
		a->n = 2 * n;
		proto.a = a;
		err = for_links_parallel(&proto, 1, attach_some);
		if (!err)
			err = for_links_parallel(&proto, 0, attach_some);
	}
	if (err) {
		ffm_attachment__free(a);
		return err;
	}
	*ret = a;
	return 0;
}

struct ffm_attachment *ffm_attachment__free(struct ffm_attachment *a)
{
	if (!a)
		return NULL;
	/* Return probes go first: a thread inside a call then finds no return record to make,
	 * rather than an entry without its return being counted as lost. Detaching per-offset
	 * uprobes is serialized in the kernel (~0.1 s each on 6.18); a multi link costs one. */
	for (size_t k = 0; k < a->nfds; k++)
		close(a->fds[k]);
	for (size_t k = 1; k < a->n; k += 2)
		bpf_link__destroy(a->links[k]);
	for (size_t k = 0; k < a->n; k += 2)
		bpf_link__destroy(a->links[k]);
	free(a);
	return NULL;
}

size_t ffm_attachment__count(const struct ffm_attachment *a)
{
	return a ? a->nprobes : 0;
}

int ffm_collector__set_job(struct ffm_collector *c, uint32_t slot, const struct ffm_job_cfg *cfg)
{
	struct ffm_job_cfg v = *cfg;

	if (slot >= FFM_MAX_JOBS)
		return -EINVAL;
	v.gen = ++c->job_gen;
	v._pad = 0;
	return bpf_map_update_elem(bpf_map__fd(c->skel->maps.jobs), &slot, &v, BPF_ANY) ? -errno : 0;
}

int ffm_collector__track_pid(struct ffm_collector *c, pid_t pid, uint32_t slot)
{
	int fd = bpf_map__fd(c->skel->maps.procs);
	struct ffm_proc p = { .job = slot }, old;
	uint32_t tgid = pid;

	if (slot >= FFM_MAX_JOBS || pid <= 0)
		return -EINVAL;
	if (c->skel->rodata->self_tgid && tgid == c->skel->rodata->self_tgid)
		return -EPERM; /* see ffm_collector_opts.exclude_self */
	/* A process ffmd names is not charged to its user's quota; one BPF charged stays so. */
	if (bpf_map_lookup_elem(fd, &tgid, &old) == 0 && old.flags & FFM_PROC_CHARGED) {
		p.flags = FFM_PROC_CHARGED;
		p.quota_uid = old.quota_uid;
	}
	return bpf_map_update_elem(fd, &tgid, &p, BPF_ANY) ? -errno : 0;
}

/* The entry @p left procs: its user's count of tracked processes goes down (as BPF's at exit). */
static void quota_uncharge(struct ffm_collector *c, const struct ffm_proc *p)
{
	int fd = bpf_map__fd(c->skel->maps.user_procs);
	uint32_t uid = p->quota_uid, n;

	if (!(p->flags & FFM_PROC_CHARGED) || bpf_map_lookup_elem(fd, &uid, &n) || !n)
		return;
	n--;
	bpf_map_update_elem(fd, &uid, &n, BPF_EXIST);
}

int ffm_collector__untrack_pid(struct ffm_collector *c, pid_t pid)
{
	int fd = bpf_map__fd(c->skel->maps.procs);
	uint32_t tgid = pid;
	struct ffm_proc p;
	bool had = bpf_map_lookup_elem(fd, &tgid, &p) == 0;

	if (bpf_map_delete_elem(fd, &tgid))
		return -errno;
	if (had)
		quota_uncharge(c, &p);
	return 0;
}

int ffm_collector__pid_slot(struct ffm_collector *c, pid_t pid)
{
	uint32_t tgid = pid;
	struct ffm_proc p;

	return bpf_map_lookup_elem(bpf_map__fd(c->skel->maps.procs), &tgid, &p) ? -errno : (int)p.job;
}

int ffm_collector__move_pid(struct ffm_collector *c, pid_t pid, uint32_t slot)
{
	int fd = bpf_map__fd(c->skel->maps.procs);
	uint32_t tgid = pid;
	struct ffm_proc p;

	if (slot >= FFM_MAX_JOBS || pid <= 0)
		return -EINVAL;
	if (bpf_map_lookup_elem(fd, &tgid, &p))
		return -errno;
	p.job = slot;
	/* BPF_EXIST: if the exit tracepoint deleted the entry meanwhile, fail instead of
	 * leaving an entry no exit will ever remove. */
	return bpf_map_update_elem(fd, &tgid, &p, BPF_EXIST) ? -errno : 0;
}

int ffm_collector__link_epoch(struct ffm_collector *c, pid_t pid)
{
	int fd = bpf_map__fd(c->skel->maps.procs);
	uint32_t tgid = pid;
	struct ffm_proc p;

	if (pid <= 0)
		return -EINVAL;
	if (bpf_map_lookup_elem(fd, &tgid, &p))
		return -errno;
	p.link_epoch++;
	return bpf_map_update_elem(fd, &tgid, &p, BPF_EXIST) ? -errno : 0;
}

int ffm_collector__job_pids(struct ffm_collector *c, uint32_t slot, pid_t *pids, int max)
{
	int fd = bpf_map__fd(c->skel->maps.procs), n = 0;
	uint32_t key, next, *prev = NULL;
	struct ffm_proc p;

	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &p) == 0 && p.job == slot && n < max)
			pids[n++] = (pid_t)key;
	}
	return n;
}

/* Add (@on) or remove the entry @k of map @fd; a missing entry is removed already. */
static int map_set(int fd, const void *k, bool on)
{
	static const uint8_t one = 1;

	if (on)
		return bpf_map_update_elem(fd, k, &one, BPF_ANY) ? -errno : 0;
	return bpf_map_delete_elem(fd, k) && errno != ENOENT ? -errno : 0;
}

static int rule_map(struct ffm_collector *c, const struct ffm_rule *r, void *key, size_t keysz)
{
	switch (r->type) {
	case FFM_RULE_UID: {
		uint32_t uid = (uint32_t)r->id;

		memcpy(key, &uid, sizeof(uid));
		return bpf_map__fd(c->skel->maps.uid_rules);
	}
	case FFM_RULE_CGROUP:
		memcpy(key, &r->id, sizeof(r->id));
		return bpf_map__fd(c->skel->maps.cgroup_rules);
	case FFM_RULE_EXE: {
		struct ffm_exe_key ek = {
			.dev = ffm_kernel_dev(r->dev),
			.ino = r->ino,
		};

		memcpy(key, &ek, sizeof(ek));
		return bpf_map__fd(c->skel->maps.exe_rules);
	}
	}
	return -EINVAL;
}

int ffm_collector__add_rule(struct ffm_collector *c, const struct ffm_rule *r, uint32_t slot)
{
	uint8_t key[sizeof(struct ffm_exe_key)] = {};
	int fd = rule_map(c, r, key, sizeof(key));

	if (fd < 0)
		return fd;
	if (slot >= FFM_MAX_JOBS)
		return -EINVAL;
	return bpf_map_update_elem(fd, key, &slot, BPF_ANY) ? -errno : 0;
}

int ffm_collector__del_rule(struct ffm_collector *c, const struct ffm_rule *r)
{
	uint8_t key[sizeof(struct ffm_exe_key)] = {};
	int fd = rule_map(c, r, key, sizeof(key));

	return fd < 0 ? fd : map_set(fd, key, false);
}

int ffm_collector__rule_slot(struct ffm_collector *c, const struct ffm_rule *r)
{
	uint8_t key[sizeof(struct ffm_exe_key)] = {};
	int fd = rule_map(c, r, key, sizeof(key));
	uint32_t slot;

	if (fd < 0)
		return fd;
	return bpf_map_lookup_elem(fd, key, &slot) ? -errno : (int)slot;
}

int ffm_collector__driver_known(struct ffm_collector *c, uint64_t kdev, uint64_t ino)
{
	struct ffm_exe_key k = { .dev = kdev, .ino = ino };
	uint8_t v;

	/* Known already: kept as it is (FFM_DRV_BRIDGED stays). */
	if (bpf_map_lookup_elem(bpf_map__fd(c->skel->maps.drivers), &k, &v) == 0)
		return 0;
	return map_set(bpf_map__fd(c->skel->maps.drivers), &k, true);
}

bool ffm_collector__bridge_ok(const struct ffm_collector *c)
{
	return c->per_process && c->session;
}

void ffm_collector__bridge_set(struct ffm_collector *c, uint64_t slots, uint64_t open)
{
	/* Global data the programs read: a plain store each, seen by the next program run. */
	__atomic_store_n(&c->skel->bss->bridge_slots, slots, __ATOMIC_RELEASE);
	__atomic_store_n(&c->skel->bss->bridge_open, open, __ATOMIC_RELEASE);
}

int ffm_collector__driver_bridged(struct ffm_collector *c, uint64_t kdev, uint64_t ino, bool on)
{
	struct ffm_exe_key k = { .dev = kdev, .ino = ino };
	uint8_t v = FFM_DRV_KNOWN | (on ? FFM_DRV_BRIDGED : 0);

	return bpf_map_update_elem(bpf_map__fd(c->skel->maps.drivers), &k, &v, BPF_ANY) ? -errno : 0;
}

int ffm_collector__set_held(struct ffm_collector *c, pid_t pid, pid_t ppid, bool on)
{
	uint32_t k = (uint32_t)pid, v = (uint32_t)ppid;
	int fd = bpf_map__fd(c->skel->maps.held);

	if (on)
		return bpf_map_update_elem(fd, &k, &v, BPF_ANY) ? -errno : 0;
	if (bpf_map_delete_elem(fd, &k) == 0)
		return 1;
	return errno == ENOENT ? 0 : -errno;
}

bool ffm_collector__wait_guard(const struct ffm_collector *c)
{
	return c->wait_guard;
}

int ffm_collector__driver_forget(struct ffm_collector *c, uint64_t kdev, uint64_t ino)
{
	struct ffm_exe_key k = { .dev = kdev, .ino = ino };

	return map_set(bpf_map__fd(c->skel->maps.drivers), &k, false);
}

int ffm_collector__set_linked(struct ffm_collector *c, pid_t pid, uint64_t kdev, uint64_t ino,
			      bool on)
{
	struct ffm_link_key k = { .tgid = (uint32_t)pid, .dev = kdev, .ino = ino };

	return map_set(bpf_map__fd(c->skel->maps.linked), &k, on);
}

uint64_t ffm_kernel_dev(dev_t dev)
{
	/* The kernel keeps s_dev as MKDEV(major, minor) = major << 20 | minor. */
	return ((uint64_t)major(dev) << 20) | minor(dev);
}

/* Read (@out) or clear (@out NULL) the per-CPU drop counters of @slot; read, they are summed. */
/* Per-CPU array @map's entry @slot (@n u64 counters) summed over CPUs into @out, or, when
 * @out is NULL, cleared. */
static int percpu_slot(struct ffm_collector *c, struct bpf_map *map, uint32_t slot, size_t n,
		       __u64 *out)
{
	int fd = bpf_map__fd(map), err = 0;
	__u64 *percpu;

	if (out)
		memset(out, 0, n * sizeof(*out));
	if (slot > FFM_MAX_JOBS)
		return -EINVAL;
	percpu = calloc((size_t)c->ncpus * n, sizeof(*percpu));
	if (!percpu)
		return -ENOMEM;
	if (out ? bpf_map_lookup_elem(fd, &slot, percpu) : bpf_map_update_elem(fd, &slot, percpu, BPF_ANY))
		err = -errno;
	for (int i = 0; out && !err && i < c->ncpus; i++)
		for (size_t r = 0; r < n; r++)
			out[r] += percpu[(size_t)i * n + r];
	free(percpu);
	return err;
}

#define N_U64(t) (sizeof(t) / sizeof(__u64))
_Static_assert(sizeof(struct ffm_rec_drops) % 8 == 0 && sizeof(struct ffm_bpf_overhead) % 8 == 0,
	       "per-CPU counters are u64 arrays");

int ffm_collector__drops(struct ffm_collector *c, uint32_t slot, struct ffm_rec_drops *out)
{
	return percpu_slot(c, c->skel->maps.drops, slot, N_U64(*out), out->n);
}

int ffm_collector__clear_drops(struct ffm_collector *c, uint32_t slot)
{
	int err = percpu_slot(c, c->skel->maps.drops, slot, N_U64(struct ffm_rec_drops), NULL);
	int err2 = percpu_slot(c, c->skel->maps.bpf_overhead, slot, N_U64(struct ffm_bpf_overhead), NULL);

	return err ? err : err2;
}

int ffm_collector__bpf_overhead(struct ffm_collector *c, uint32_t slot,
				struct ffm_bpf_overhead *out)
{
	return percpu_slot(c, c->skel->maps.bpf_overhead, slot, N_U64(*out), &out->ns);
}

int ffm_collector__learn_slots(struct ffm_collector *c, uint32_t tgid, uint64_t callsite,
			       const int32_t *off, uint32_t n)
{
	struct ffm_slot_key k = { .tgid = tgid, .callsite = callsite };
	struct ffm_slots s = {};

	if (n > FFM_LEARNED_SLOTS)
		n = FFM_LEARNED_SLOTS;
	s.n = n;
	memcpy(s.off, off, n * sizeof(*off));
	return bpf_map_update_elem(bpf_map__fd(c->skel->maps.slots), &k, &s, BPF_NOEXIST) &&
			       errno != EEXIST ?
		       -errno :
		       0;
}

int ffm_collector__set_python(struct ffm_collector *c, uint32_t tgid,
			       const struct ffm_py_layout *l)
{
	int fd = bpf_map__fd(c->skel->maps.pyprocs);

	if (!l)
		return bpf_map_delete_elem(fd, &tgid) && errno != ENOENT ? -errno : 0;
	return bpf_map_update_elem(fd, &tgid, l, BPF_ANY) ? -errno : 0;
}

void ffm_collector__forget_process(struct ffm_collector *c, uint32_t tgid)
{
	int fd = bpf_map__fd(c->skel->maps.slots);
	struct ffm_slot_key key, next, *prev = NULL;

	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		key = next;
		if (key.tgid == tgid) {
			/* Deleting the current key restarts iteration from the start. */
			bpf_map_delete_elem(fd, &key);
			prev = NULL;
			continue;
		}
		prev = &key;
	}
}

/* ---- watchpoints ---------------------------------------------------------------------------- */

bool ffm_collector__has_memtrace(const struct ffm_collector *c)
{
	return c && c->memtrace;
}

static void bp_attr(struct perf_event_attr *a, uint64_t addr)
{
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->type = PERF_TYPE_BREAKPOINT;
	a->bp_type = HW_BREAKPOINT_RW;
	a->bp_addr = addr & ~7ull;
	a->bp_len = HW_BREAKPOINT_LEN_8;
	a->sample_period = 1; /* every access runs the program */
	/* The process's own instructions only: the kernel copying the buffer for write(2) is not
	 * an instruction of the application; the driver's own accesses are filtered in BPF. */
	a->exclude_kernel = 1;
	a->exclude_hv = 1;
}

/* A perf event @a on thread @tid with @prog attached. */
static int perf_attach(const struct perf_event_attr *a, pid_t tid, const struct bpf_program *prog,
		       struct ffm_watch **ret)
{
	struct ffm_watch *w;
	int err;

	*ret = NULL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->pfd = syscall(SYS_perf_event_open, a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (w->pfd < 0) {
		err = -errno;
		free(w);
		return err;
	}
	w->link = bpf_program__attach_perf_event(prog, w->pfd);
	if (!w->link) {
		err = -errno;
		close(w->pfd);
		free(w);
		return err ? err : -EINVAL;
	}
	w->addr = a->bp_addr;
	*ret = w;
	return 0;
}

int ffm_collector__watch(struct ffm_collector *c, pid_t tid, uint64_t addr, struct ffm_watch **ret)
{
	struct perf_event_attr a;

	*ret = NULL;
	if (!c->memtrace)
		return -EOPNOTSUPP;
	bp_attr(&a, addr);
	return perf_attach(&a, tid, c->skel->progs.watch_hit, ret);
}

int ffm_collector__faults(struct ffm_collector *c, pid_t tid, struct ffm_watch **ret)
{
	struct perf_event_attr a = {
		.size = sizeof(a), .type = PERF_TYPE_SOFTWARE, .config = PERF_COUNT_SW_PAGE_FAULTS,
		.sample_period = 1, .sample_type = PERF_SAMPLE_ADDR, .exclude_kernel = 1,
	};

	*ret = NULL;
	if (!c->memtrace)
		return -EOPNOTSUPP;
	return perf_attach(&a, tid, c->skel->progs.fault_hit, ret);
}

int ffm_collector__set_managed(struct ffm_collector *c, uint32_t tgid, const uint64_t *lo,
			       const uint64_t *hi, size_t n)
{
	int fd = bpf_map__fd(c->skel->maps.managed);
	struct ffm_managed v = { 0 };
	size_t from = n > FFM_MANAGED_RANGES ? n - FFM_MANAGED_RANGES : 0;

	if (!n)
		return bpf_map_delete_elem(fd, &tgid) == 0 || errno == ENOENT ? 0 : -errno;
	for (size_t i = from; i < n; i++) {
		v.lo[i - from] = lo[i];
		v.hi[i - from] = hi[i];
	}
	return bpf_map_update_elem(fd, &tgid, &v, BPF_ANY) ? -errno : 0;
}

int ffm_collector__sample(struct ffm_collector *c, pid_t tid, unsigned hz, struct ffm_watch **ret)
{
	struct perf_event_attr a = {
		.size = sizeof(a), .type = PERF_TYPE_SOFTWARE, .config = PERF_COUNT_SW_TASK_CLOCK,
		.freq = 1, .sample_freq = hz,
	};

	*ret = NULL;
	if (!c || !hz)
		return -EINVAL;
	return perf_attach(&a, tid, c->skel->progs.cpu_sample, ret);
}

/*
 * The word ffm_collector__use_latency watches, and the function whose return it probes, with
 * its unprobed twin for calib_trap. Both are written out so that they start as a driver's
 * functions do, with `push %rbp`, which the kernel emulates at a breakpoint: a compiled empty
 * function starts with `ret`, which the kernel single-steps instead, a debug trap that costs
 * 25 us under some hypervisors and would be measured as every probe's price. The probed one is
 * global, so that libbpf finds it by name in the binary's symbol table.
 */
static volatile uint64_t calib_word;
void ffm_collector_calib_return(void);
void ffm_collector_calib_plain(void);
#define CALIB_FUNC(name)                                                                        \
	".globl " #name "\n.type " #name ",@function\n" #name ":\n"                             \
	"\tpush %rbp\n\tmov %rsp, %rbp\n\tpop %rbp\n\tret\n.size " #name ", . - " #name "\n"
__asm__(".text\n" CALIB_FUNC(ffm_collector_calib_return) CALIB_FUNC(ffm_collector_calib_plain));

/* The return probe on ffm_collector_calib_return. It stays until the collector goes
 * (ffm_bpf__destroy): taking a uprobe off waits for the kernel, ~0.1 s, and our own function
 * is called by nothing else. */
static int calib_probe(struct ffm_collector *c)
{
	LIBBPF_OPTS(bpf_uprobe_opts, uo, .retprobe = true, .func_name = "ffm_collector_calib_return");

	if (!c->skel->links.calib_ret) {
		c->skel->links.calib_ret = bpf_program__attach_uprobe_opts(
			c->skel->progs.calib_ret, getpid(), "/proc/self/exe", 0, &uo);
		if (!c->skel->links.calib_ret)
			return -errno ? -errno : -EINVAL;
	}
	return 0;
}

static uint64_t median_u64(uint64_t *d, size_t n)
{
	for (size_t i = 1; i < n; i++) /* insertion sort: a few values */
		for (size_t j = i; j && d[j - 1] > d[j]; j--) {
			uint64_t x = d[j];

			d[j] = d[j - 1];
			d[j - 1] = x;
		}
	return n ? d[n / 2] : 0;
}

static uint64_t time_calls(void (*fn)(void), int n)
{
	uint64_t t0 = ffm_now_ns();

	for (int i = 0; i < n; i++)
		fn();
	return ffm_now_ns() - t0;
}

/*
 * What a probed call's traps cost its thread (see ffm_rec_call.probe_ns): the probed function
 * against its unprobed twin, side by side, FFM_TRAP_ROUNDS rounds of FFM_TRAP_CALLS calls, the
 * median per call. The probe's program is a map write, about what an API entry program does;
 * a return program's own run time is measured by the program itself. About 0.1 ms.
 */
#define FFM_TRAP_ROUNDS 9
#define FFM_TRAP_CALLS 32
static void calib_trap(struct ffm_collector *c)
{
	uint64_t d[FFM_TRAP_ROUNDS];

	c->skel->bss->probe_trap_ns = 0;
	if (calib_probe(c))
		return;
	for (int i = 0; i < FFM_TRAP_ROUNDS; i++) {
		uint64_t probed = time_calls(ffm_collector_calib_return, FFM_TRAP_CALLS);
		uint64_t plain = time_calls(ffm_collector_calib_plain, FFM_TRAP_CALLS);

		d[i] = probed > plain ? (probed - plain) / FFM_TRAP_CALLS : 0;
	}
	c->skel->bss->probe_trap_ns = median_u64(d, FFM_TRAP_ROUNDS);
}

uint64_t ffm_collector__probe_trap_ns(const struct ffm_collector *c)
{
	return c ? c->skel->bss->probe_trap_ns : 0;
}

int ffm_collector__use_latency(struct ffm_collector *c, uint64_t *ns)
{
	uint64_t d[FFM_USE_LATENCY_ROUNDS];
	struct perf_event_attr a;
	struct ffm_watch *w = NULL;
	size_t n = 0;
	int fd, err;

	*ns = 0;
	if (!c || !c->memtrace)
		return -EOPNOTSUPP;
	err = calib_probe(c);
	if (err)
		return err;
	bp_attr(&a, (uintptr_t)&calib_word);
	err = perf_attach(&a, (pid_t)syscall(SYS_gettid), c->skel->progs.calib_hit, &w);
	fd = bpf_map__fd(c->skel->maps.calib_ts);
	for (int i = 0; !err && i < FFM_USE_LATENCY_ROUNDS; i++) {
		uint64_t t[2] = { 0, 0 };
		uint32_t k;

		for (k = 0; k < 2; k++)
			bpf_map_update_elem(fd, &k, &t[k], BPF_ANY);
		ffm_collector_calib_return();
		(void)calib_word; /* the application's use right after the sync returns */
		for (k = 0; k < 2; k++)
			bpf_map_lookup_elem(fd, &k, &t[k]);
		if (t[0] && t[1] > t[0])
			d[n++] = t[1] - t[0];
	}
	ffm_watch__free(w);
	if (err)
		return err;
	if (n < FFM_USE_LATENCY_ROUNDS / 2)
		return -EIO; /* the programs did not run: nothing measured */
	*ns = median_u64(d, n);
	return 0;
}

int ffm_watch__move(struct ffm_watch *w, uint64_t addr)
{
	struct perf_event_attr a;

	if (!w)
		return -EINVAL;
	if ((addr & ~7ull) == w->addr)
		return 0;
	bp_attr(&a, addr);
	if (ioctl(w->pfd, PERF_EVENT_IOC_MODIFY_ATTRIBUTES, &a) < 0)
		return -errno;
	w->addr = a.bp_addr;
	return 0;
}

uint64_t ffm_watch__addr(const struct ffm_watch *w)
{
	return w ? w->addr : 0;
}

struct ffm_watch *ffm_watch__free(struct ffm_watch *w)
{
	if (!w)
		return NULL;
	bpf_link__destroy(w->link); /* closes pfd too */
	free(w);
	return NULL;
}
