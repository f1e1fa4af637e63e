/* SPDX-License-Identifier: MIT */
/*
 * ffmd's core: setup, the event loop, the records, teardown. One epoll loop over: the
 * collector's ring buffer, the control socket and its connections (control.c), a signalfd,
 * a timer (store flush, rates, watchdog), the readier's results (drivers.c), the lookups'
 * (which driver a process uses, lookups.c) and the unwinder's (stacks stored,
 * daemon/unwinder.c). The records of the ring buffer are dispatched here
 * (on_record) to the parts their type's row in daemon/records.c names: the map guard's and
 * forks' stops to drivers.c and holds.c, releases and waits to the sampler, then each to its
 * job's run, a process a rule matched made a job on its first record (record_job, rules.c).
 * Start-up is a table of steps (STEPS), undone in reverse by ffmd__free.
 * daemon/ffmd_int.h says how the rest of the core is cut.
 *
 * SIGHUP re-reads the config file (systemd's ExecReload): rules are replaced, active jobs go on.
 *
 * What runs where. The loop must go on reading the ring buffer (BPF drops records when it is
 * full) and answering the socket, so work that can take long is kept off it or bounded:
 *   - off the loop: making a driver ready, calibration included (seconds: the readier's
 *     thread, daemon/readier.c); detaching a process's probes (an RCU grace period each: the
 *     detacher thread, links.c); unwinding and symbolizing a new stack, which opens the job
 *     user's binaries and debug files, and a Python process's detection with its first stacks
 *     (each open up to 250 ms: the unwinder's thread, daemon/unwinder.c; the job's later
 *     records wait, in order, in its recorder); a new process's libcuda lookup (its
 *     environment and LD_LIBRARY_PATH entries opened as its user, daemon/resolve.c; a map
 *     guard's stop waited for: the lookups' threads, one user's at a time each, lookups.c; a
 *     process held for it stays held until its answer); the last stacks of a run that ended
 *     (the run is closed once they are stored, jobs.c's run_closed);
 *   - before the loop runs, while ffmd starts: the system's drivers and the journal's made
 *     ready in place, the jobs a crash interrupted resumed (their uid and exe selectors'
 *     processes found by a scan of all of /proc, jobs.c);
 *   - on the loop, bounded: a job started (its store opened, at most MAX_TRACK_SCAN of its
 *     processes that run already tracked, jobs.c), a rule's match made a job (a store opened),
 *     a rule removed at SIGHUP (its waiting processes adopted, at most one job per free slot),
 *     a forked child's stop looked for (once a round, 2 ms apart: holds.c), the journal and the
 *     holds file rewritten (a few lines), the stores flushed (tick), probes attached
 *     (milliseconds, links.c; adaptive stage 1 puts a sampled process's wait probe back at
 *     the start of each window, and its detach goes to the detacher thread); a run's end (what
 *     its slot counted, its store closed once its stacks are stored);
 *   - as ffmd stops: the runs still ending wait for their last stacks (each open up to 250 ms,
 *     each user's slow ones 1 s in 10 s);
 *   - on the loop, as long as the system takes: detaching a driver's system-wide probes
 *     (probe_scope = system only; tens of ms, seconds for a stage-2 set on a busy machine).
 *     They go when no job needs them any more, and a new job may need them at once: detached
 *     later, off the loop, they would overlap the set attached for it (each call recorded
 *     twice) or stay in stage-1 jobs' stacks (see update_attachments). Also the store reads
 *     of a run's start (the key's stage history, the last stage-1 run's waits), and the admin
 *     group's lookup at SIGHUP when it changed (NSS).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "daemon/analyzer.h"
#include "daemon/apis.h"
#include "daemon/driver_setup.h"
#include "daemon/ffmd_int.h"
#include "daemon/jobrun.h"
#include "daemon/log.h"
#include "daemon/metrics.h"
#include "daemon/readier.h"
#include "daemon/records.h"
#include "daemon/server.h"
#include "daemon/unwinder.h"
#include "store/ffm_store.h"
#include "symbols/ffm_driver.h"
#include "symbols/ffm_stack.h"

/*
 * The gid of group @name: 0 or -ENOENT. The dynamic build asks NSS (getgrnam), so groups from
 * LDAP/SSSD work. A static build cannot load the NSS modules of another glibc than its own, so
 * it reads /etc/group itself: on a node whose groups live elsewhere, give admin_group by
 * number ("admin_group = 1234").
 */
static int group_gid(const char *name, gid_t *gid)
{
	char *end;
	unsigned long n = strtoul(name, &end, 10);

	if (*name && !*end) {
		*gid = (gid_t)n;
		return 0;
	}
#ifdef FFM_STATIC
	{
		FILE *f = fopen("/etc/group", "re");
		struct group *g = NULL;

		while (f && (g = fgetgrent(f)) && strcmp(g->gr_name, name))
			;
		if (g)
			*gid = g->gr_gid;
		if (f)
			fclose(f);
		return g ? 0 : -ENOENT;
	}
#else
	{
		struct group *g = getgrnam(name);

		if (!g)
			return -ENOENT;
		*gid = g->gr_gid;
		return 0;
	}
#endif
}

/* admin_group names no group: say where it is set, where it was looked for, and what to do. */
static void log_no_admin_group(const struct ffmd_config *cfg, const char *then)
{
#ifdef FFM_STATIC
	const char *where = "/etc/group (this static build reads no other group database)";
#else
	const char *where = "the system's group database (NSS)";
#endif

	log_err("%s%sadmin_group = %s: no such group in %s; create it (groupadd %s), name an "
		"existing group or its gid, or remove the setting%s",
		cfg->config_path, cfg->config_path[0] ? ": " : "", cfg->admin_group, where,
		cfg->admin_group, then);
}

/* @st of @path is fit for ffmd (see dir_check); @top: the directory itself, not one above. */
static bool dir_fit(const struct stat *st, bool top)
{
	if (top ? st->st_uid != geteuid() : st->st_uid != geteuid() && st->st_uid != 0)
		return false;
	return !(st->st_mode & (S_IWGRP | S_IWOTH)) || (!top && (st->st_mode & S_ISVTX));
}

/*
 * The state or runtime directory @dir (@what names it) is fit for ffmd: its own (euid),
 * writable by nobody else, and so is each directory above it unless sticky (/tmp), so that no
 * one else can plant a file or a link in it, or rename it away and put theirs in its place.
 * A directory a user made (0777) is refused, saying what to do.
 */
static int dir_check(const char *what, const char *dir)
{
	char real[PATH_MAX], *slash;
	struct stat st;
	bool top = true;

	if (!realpath(dir, real)) {
		log_err("%s directory %s: %s", what, dir, strerror(errno));
		return -errno;
	}
	for (;;) {
		const char *p = real[0] ? real : "/";

		if (stat(p, &st) < 0) {
			log_err("%s directory %s: %s: %s", what, dir, p, strerror(errno));
			return -errno;
		}
		if (!dir_fit(&st, top)) {
			log_err("%s directory %s: %s%s is uid %u's, mode %04o; it must be uid %u's and "
				"writable by nobody else (chown %u %s; chmod go-w %s), or choose another",
				what, dir, top ? "" : "the directory above it, ", p, (unsigned)st.st_uid,
				(unsigned)(st.st_mode & 07777), (unsigned)geteuid(), (unsigned)geteuid(), p, p);
			return -EPERM;
		}
		if (!real[0])
			return 0;
		slash = strrchr(real, '/');
		*slash = 0; /* "" for "/" */
		top = false;
	}
}

/*
 * Lock @dir (ffmd.lock in it, flock) for ffmd's life: one ffmd per runtime directory (its
 * socket) and per node of a state directory (its journal, holds and stores). Another ffmd
 * holding it (for 2 s: one that is going away lets go): -EBUSY, saying its pid (written in
 * the file by whoever holds the lock).
 */
static int dir_lock(const char *what, const char *dir, int *fdp)
{
	char path[PATH_MAX], pid[32] = "";
	ssize_t n;
	int fd;

	if (snprintf(path, sizeof(path), "%s/ffmd.lock", dir) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0644);
	if (fd < 0) {
		log_err("cannot open the lock file %s: %s", path, strerror(errno));
		return -errno;
	}
	/* An ffmd killed a moment ago lets go once the kernel has closed its files: 2 s. */
	for (int i = 0; flock(fd, LOCK_EX | LOCK_NB) < 0; i++) {
		int err = errno;

		if (err == EWOULDBLOCK && i < 40) {
			usleep(50 * 1000);
			continue;
		}

		n = pread(fd, pid, sizeof(pid) - 1, 0);
		pid[n > 0 ? n : 0] = 0;
		pid[strcspn(pid, "\n")] = 0;
		close(fd);
		if (err != EWOULDBLOCK) {
			log_err("cannot lock %s: %s", path, strerror(err));
			return -err;
		}
		log_err("another ffmd (pid %s) runs on the %s directory %s: stop it first, or give "
			"this one other directories", pid[0] ? pid : "unknown", what, dir);
		return -EBUSY;
	}
	n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)n, 0) != n)
		log_warn("cannot write ffmd's pid into %s: %s", path, strerror(errno));
	*fdp = fd;
	return 0;
}

/*
 * The state and runtime directories, checked and locked. A missing state directory is made
 * only when it is the default one (the unit's StateDirectory= makes it anyway) or with
 * --create: a typo in --state-dir must not make a fresh, empty state somewhere.
 */
static int dirs_setup(struct ffmd *d, const struct ffmd_config *cfg)
{
	struct stat st;
	int err;

	if (stat(cfg->state_dir, &st) < 0 && errno == ENOENT && !cfg->create_state_dir &&
	    strcmp(cfg->state_dir, FFMD_DEFAULT_STATE_DIR)) {
		log_err("state directory %s does not exist: create it (mkdir -m 0751 %s), or start "
			"ffmd with --create", cfg->state_dir, cfg->state_dir);
		return -ENOENT;
	}
	/* 0751: the owners of jobs go through to their stores' copies (done/<uid>/, an ACL). */
	if ((err = ffm_mkdir_p(cfg->state_dir, 0751)) < 0 ||
	    (err = ffm_mkdir_p(cfg->runtime_dir, 0755)) < 0) {
		log_err("cannot create %s or %s: %s", cfg->state_dir, cfg->runtime_dir, strerror(-err));
		return err;
	}
	if ((err = dir_check("state", cfg->state_dir)) < 0 ||
	    (err = dir_check("runtime", cfg->runtime_dir)) < 0)
		return err;
	return dir_lock("runtime", cfg->runtime_dir, &d->lp.lock_fds[0]);
}

/* The job a record (@core: its row's, daemon/records.h) belongs to (index in jobs[]), or -1. */
static int record_job(struct ffmd *d, const struct ffm_rec_hdr *h, enum ffm_rec_core core)
{
	struct rule *ru;
	int job;

	if (h->job < FFM_MAX_JOBS && d->jobs[h->job].used)
		return (int)h->job;
	ru = rule_of_slot(d, h->job);
	if (!ru)
		return -1; /* a job that has ended: its late records are dropped */
	/* Written before the process was moved out of the rule's slot: route by tgid. */
	job = route_find(d, h->tgid);
	if (job >= 0)
		return d->jobs[job].used ? job : -1;
	if (core == FFM_CORE_FORK) {
		const struct ffm_rec_proc *p = (const void *)h;

		job = route_find(d, p->ppid);
	} else if (core == FFM_CORE_EXEC) {
		const struct ffm_rec_proc *p = (const void *)h;
		/* Held while its job is made (a store to open: milliseconds): a stage-2 job's probes
		 * are attached only then, and its first calls must find them. Not where its parent
		 * waits for stopped children (hold() says no; the wait guard lets it go should the
		 * parent start such a wait): it then runs on, its wait probe already there. */
		bool held = !hold_find(d, (pid_t)h->tgid) && hold(d, (pid_t)h->tgid, false);

		job = rule_adopt(d, ru, h->tgid, p->uid, p);
		if (job >= 0) {
			route_add(d, h->tgid, job);
			ffm_collector__move_pid(d->col, (pid_t)h->tgid, d->jobs[job].slot);
			/* Its job's probes (a stage-2 job's API probes) before it goes on: the
			 * process may have mapped its driver already (a loaded machine reads the
			 * exec record late), and let go here it made its first calls with the
			 * rule slot's wait probe only, recorded as stage-1 waits. */
			if (held)
				ensure_driver_for_pid(d, (pid_t)h->tgid);
		}
		if (held) {
			struct hold *hh = hold_find(d, (pid_t)h->tgid);

			/* Unless it now waits for its driver's lookup (let go at its answer,
			 * drivers_found) or for its driver (let go with the driver's waiters). */
			if (hh && !hh->wait && !hh->looking)
				hold_release(d, (pid_t)h->tgid);
		}
		return job;
	}
	if (job < 0)
		return -1;
	route_add(d, h->tgid, job);
	/* -ENOENT: it exited already; its records still come routed. */
	ffm_collector__move_pid(d->col, (pid_t)h->tgid, d->jobs[job].slot);
	return job;
}

/* Record @rec of job @idx's processes: to its run, and what its job counts of it. */
static void record_run(struct ffmd *d, int idx, enum ffm_rec_core core, bool fork_stopped,
		       const void *rec, size_t size)
{
	const struct ffm_rec_hdr *h = rec;
	struct job *j = &d->jobs[idx];
	int err;

	j->events++;
	if (core == FFM_CORE_EXEC || core == FFM_CORE_FORK) {
		j->procs++;
		d->procs_total++;
	}
	/* A child stopped at its fork got its parent's drivers above: no second look at its maps. */
	if (core == FFM_CORE_EXEC || (core == FFM_CORE_FORK && !fork_stopped))
		ensure_driver_for_pid(d, h->tgid);
	err = ffm_jobrun__record(j->jr, rec, size);
	if (core == FFM_CORE_WAIT && size >= sizeof(struct ffm_rec_wait)) {
		sample_on_wait(d, idx, rec);
		sample_overhead_wait(d, idx, h->tgid);
	}
	if (err < 0) {
		static double last;

		if (ffm_now_s() - last > 10) {
			log_err("job %s: writing its store failed: %s", j->id, strerror(-err));
			last = ffm_now_s();
		}
	}
	if (core == FFM_CORE_EXIT && j->rule[0]) {
		const struct ffm_rec_proc *p = rec;
		pid_t left[1];

		if (h->tgid == (uint32_t)j->root) {
			int st = (int)p->exit_code;

			j->exit_status = (st & 0x7f) ? 128 + (st & 0x7f) : (st >> 8) & 0xff;
		}
		/* A rule's job lasts as long as its process tree; ended outside this callback. */
		if (ffm_collector__job_pids(d->col, j->slot, left, 1) == 0)
			j->ending = true;
	}
}

/* Each record to the parts that handle it (which: its row in daemon/records.c), then to its
 * job's run. */
static int on_record(void *ctx, const void *rec, size_t size)
{
	struct ffmd *d = ctx;
	const struct ffm_rec_hdr *h = rec;
	const struct ffm_rec_kind *k = ffm_rec_kind(h->type);
	enum ffm_rec_core core = k ? k->core : FFM_CORE_RUN;
	bool fork_stopped = false;
	int idx;

	switch (core) {
	case FFM_CORE_DRIVER:
		on_driver_mapped(d, rec);
		return 0;
	case FFM_CORE_SAMPLER:
		sample_release(d, (pid_t)h->tgid, h->ts_ns);
		return 0;
	case FFM_CORE_FORK:
		fork_stopped = ((const struct ffm_rec_proc *)rec)->flags & FFM_PROC_STOPPED;
		if (fork_stopped)
			on_fork_stopped(d, rec);
		break;
	case FFM_CORE_EXIT:
		sample_exit(d, (pid_t)h->tgid, h->ts_ns);
		plinks_drop_pid(d, (pid_t)h->tgid);
		break;
	case FFM_CORE_EXEC:
		/* A process a rule matched: its wait probe first, before its job is made (a store
		 * to open, milliseconds), so that its mmap of the driver finds it; the job's stage
		 * adds the rest (record_run). */
		if (rule_of_slot(d, h->job) && ffm_collector__per_process(d->col))
			ensure_driver_for_pid(d, h->tgid);
		break;
	case FFM_CORE_RUN:
	case FFM_CORE_WAIT:
		break;
	}
	idx = record_job(d, h, core);
	if (idx >= 0)
		record_run(d, idx, core, fork_stopped, rec, size);
	return 0;
}

static void tick(struct ffmd *d)
{
	double t = ffm_now_s(), dt = t - d->lp.last_tick;
	char status[256];
	int njobs = 0;
	double rate = 0;

	for (int i = 0; i < FFM_MAX_JOBS; i++) {
		struct job *j = &d->jobs[i];

		if (!j->used)
			continue;
		njobs++;
		if (dt > 0.5) {
			j->rate = (j->events - j->events_prev) / dt;
			j->events_prev = j->events;
		}
		rate += j->rate;
		ffm_store__flush(ffm_jobrun__store(j->jr));
	}
	if (dt > 0.5)
		d->lp.last_tick = t;
	attachments_linger(d, t);
	answer_waiting(d, false); /* job-ends whose wait for the copy is over */
	conns_expire(d, t);
	if (d->lp.watchdog_usec && (t - d->lp.last_watchdog) * 1e6 > d->lp.watchdog_usec / 3) {
		ffm_notify("WATCHDOG=1");
		d->lp.last_watchdog = t;
	}
	snprintf(status, sizeof(status), "STATUS=%d job%s, %.0f events/s", njobs,
		 njobs == 1 ? "" : "s", rate);
	ffm_notify(status);
}

/* The tick: store flush, rates, watchdog, every @ms (0: 200). */
static int set_timer(struct ffmd *d, long ms)
{
	struct timespec t = { (ms ? ms : 200) / 1000, ((ms ? ms : 200) % 1000) * 1000000 };

	if (timerfd_settime(d->lp.tfd, 0, &(struct itimerspec){ .it_interval = t, .it_value = t },
			    NULL) < 0) {
		log_err("cannot set the flush timer: %s", strerror(errno));
		return -errno;
	}
	return 0;
}

/*
 * Apply @cfg to a running daemon: rules are replaced (an unchanged rule keeps its slot; a
 * removed one stops matching new processes, the jobs it created run on), flush_ms and
 * admin_group take effect; state_dir, runtime_dir and the ring buffer settings need a restart.
 * Active jobs keep running and no record is lost. -errno if a rule cannot be applied (the old
 * rules then stay).
 */
static int apply_config(struct ffmd *d, const struct ffmd_config *cfg)
{
	int err;

	/* state_dir and runtime_dir are read at start only (the command line may override
	 * them, so a difference here is no news). */
	if (cfg->ringbuf_kib != d->cfg.ringbuf_kib || cfg->wakeup_kib != d->cfg.wakeup_kib)
		log_warn("reload: the ring buffer settings change only at a restart, ignoring them");
	if (strcmp(cfg->metrics_dir, d->cfg.metrics_dir))
		log_warn("reload: metrics_dir changes only at a restart, ignoring it");
	if (strcmp(cfg->trusted_driver_dirs, d->cfg.trusted_driver_dirs))
		log_warn("reload: trusted_driver_dirs changes only at a restart, ignoring it");
	if (strcmp(cfg->admin_group, d->cfg.admin_group)) {
		gid_t gid = 0;
		bool found = cfg->admin_group[0] && group_gid(cfg->admin_group, &gid) == 0;

		if (cfg->admin_group[0] && !found) {
			char then[128];

			snprintf(then, sizeof(then), " (reload: keeping %s%s)",
				 d->cfg.admin_group[0] ? "admin_group = " : "no admin group",
				 d->cfg.admin_group);
			log_no_admin_group(cfg, then);
		} else {
			control_admin_set(d, found, gid);
			snprintf(d->cfg.admin_group, sizeof(d->cfg.admin_group), "%s", cfg->admin_group);
		}
	}
	/* Adaptive stage 1: processes that start sampling from now on follow the new values. */
	d->cfg.sample_budget = cfg->sample_budget;
	d->cfg.wait_cost_us = cfg->wait_cost_us;
	d->cfg.analysis_on_read = cfg->analysis_on_read; /* runs that end from now on */
	if (cfg->flush_ms != d->cfg.flush_ms && set_timer(d, cfg->flush_ms) == 0)
		d->cfg.flush_ms = cfg->flush_ms;
	err = rules_reload(d, cfg);
	update_attachments(d);
	return err;
}

static void reload(struct ffmd *d)
{
	static struct ffmd_config cfg;
	char err[512] = "";
	int r;

	if (!d->cfg.config_path[0]) {
		log_info("SIGHUP: ffmd was started without a config file, nothing to reload");
		return;
	}
	ffm_notify("RELOADING=1");
	if (ffmd_config_load(&cfg, d->cfg.config_path, err, sizeof(err)) < 0) {
		log_err("SIGHUP: not reloading, bad configuration: %s", err);
	} else {
		r = apply_config(d, &cfg);
		log_info("SIGHUP: reloaded %s: %d rule%s%s", d->cfg.config_path, d->cfg.nrules,
			 d->cfg.nrules == 1 ? "" : "s", r < 0 ? " (some could not be applied, see above)" : "");
	}
	ffm_notify("READY=1");
}

/* The driver and analysis workers, and the metrics directory when one is set. */
static int workers_start(struct ffmd *d, const struct ffmd_config *cfg)
{
	char why[PATH_MAX + 128];
	int err;

	if ((err = ffm_readier__new(cfg->state_dir, &d->readier)) < 0 ||
	    (err = ffm_analyzer__new(FFM_VERSION, &d->analyzer)) < 0 ||
	    (err = lookups_start(d)) < 0) {
		log_err("cannot start a worker thread: %s", strerror(-err));
		return err;
	}
	if (!cfg->metrics_dir[0])
		return 0;
	if ((err = ffm_metrics__open(cfg->metrics_dir, &d->metrics, why, sizeof(why))) < 0) {
		log_err("metrics_dir: %s", why);
		return err;
	}
	if ((err = ffm_metrics__write(d->metrics)) < 0) {
		log_err("metrics_dir: cannot write %s/%s: %s", cfg->metrics_dir, FFM_METRICS_FILE,
			strerror(-err));
		return err;
	}
	log_info("metrics: %s/%s", cfg->metrics_dir, FFM_METRICS_FILE);
	return 0;
}

/* A struct ffmd with nothing open yet (every descriptor -1), or NULL. */
static struct ffmd *ffmd_alloc(const struct ffmd_config *cfg)
{
	struct ffmd *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	d->cfg = *cfg;
	d->lp.ep = d->lp.sfd = d->lp.tfd = -1;
	d->lp.lock_fds[0] = d->lp.lock_fds[1] = -1;
	control_init(d);
	return d;
}

static int tables_setup(struct ffmd *d, const struct ffmd_config *cfg)
{
	(void)cfg;
	return routes_init(d);
}

static void tables_free(struct ffmd *d)
{
	attachments_free(d);
	routes_free(d);
}

/* The admin group, when one is set: ffmd does not start without it. */
static int admin_setup(struct ffmd *d, const struct ffmd_config *cfg)
{
	gid_t gid;

	if (!cfg->admin_group[0])
		return 0;
	if (group_gid(cfg->admin_group, &gid) < 0) {
		log_no_admin_group(cfg, "; ffmd does not start without it");
		return -ENOENT;
	}
	control_admin_set(d, true, gid);
	return 0;
}

static void lock_close(struct ffmd *d, int i)
{
	if (d->lp.lock_fds[i] >= 0)
		close(d->lp.lock_fds[i]);
	d->lp.lock_fds[i] = -1;
}

/* The runtime directory's lock (dirs_setup), then the node's (node_setup). */
static void dirs_unlock(struct ffmd *d)
{
	lock_close(d, 0);
}

static void node_unlock(struct ffmd *d)
{
	lock_close(d, 1);
}

/* One ffmd per node: its journal and holds beside this node's stores, so that nodes sharing a
 * state directory never share them; the node's directory locked. */
static int node_setup(struct ffmd *d, const struct ffmd_config *cfg)
{
	char host[256] = "";
	int err;

	if (gethostname(host, sizeof(host) - 1) < 0) {
		log_err("cannot read the host name: %s", strerror(errno));
		return -errno;
	}
	if (ffm_state_path(cfg->state_dir, FFM_STATE_ROOT, host, d->node.root,
			   sizeof(d->node.root)) < 0 ||
	    holds_path_set(d, cfg->state_dir, host) < 0 ||
	    ffm_state_path(cfg->state_dir, FFM_STATE_JOURNAL, host, d->node.journal_at,
			   sizeof(d->node.journal_at)) < 0) {
		log_err("state directory %s: path too long", cfg->state_dir);
		return -ENAMETOOLONG;
	}
	if ((err = ffm_mkdir_p(d->node.root, 0751)) < 0) {
		log_err("cannot create %s: %s", d->node.root, strerror(-err));
		return err;
	}
	/* Before anything of the node's is read or written (the holds, next). */
	return dir_lock("state", d->node.root, &d->lp.lock_fds[1]);
}

static int trust_setup(struct ffmd *d, const struct ffmd_config *cfg)
{
	char why[FFM_TRUSTED_DIRS_MAX + 256];
	int err = ffm_driver_trust_dirs(cfg->trusted_driver_dirs, why, sizeof(why));

	(void)d;
	if (err < 0)
		log_err("%s%s%s", cfg->config_path, cfg->config_path[0] ? ": " : "", why);
	return err;
}

/* The BPF collector loaded, and what this kernel lets it do said. */
static int collector_setup(struct ffmd *d, const struct ffmd_config *cfg)
{
	char caps[256] = "";
	int err = ffm_collector__open(&(struct ffm_collector_opts){
		.sz = sizeof(struct ffm_collector_opts), .on_record = on_record, .ctx = d,
		.wakeup_bytes = cfg->wakeup_kib * 1024, .ringbuf_bytes = cfg->ringbuf_kib * 1024,
		.map_guard = true, .per_process = !cfg->system_scope, .exclude_self = true,
		.consume_ms = cfg->consume_ms,
		.procs_per_user = cfg->user_procs ? cfg->user_procs : FFM_MAX_PROCS }, &d->col);

	if (err < 0) {
		if (err == -EPERM || err == -EACCES)
			ffm_caps_hint(FFM_COLLECTOR_OPEN_CAPS, UINT64_MAX, caps, sizeof(caps));
		log_err("cannot load the BPF collector: %s%s%s", strerror(-err),
			caps[0] ? ": ffmd " : "", caps);
		return err;
	}
	if (!ffm_collector__map_guard(d->col))
		log_warn("no map guard (the kernel's syscalls:sys_enter_mmap tracepoint): a process that "
			 "loads a libcuda ffmd could not foresee may run its first calls unmeasured");
	if (!ffm_collector__wait_guard(d->col))
		log_warn("no wait guard (the sched_process_wait tracepoint with bpf_send_signal_task, "
			 "Linux 6.13+): a parent that starts waiting for stopped children while ffm holds "
			 "one may see it stopped for a moment");
	log_info("uprobes: %s, %s", ffm_collector__probe_mode(d->col),
		 ffm_collector__per_process(d->col)
			 ? "per job process (others get no breakpoint)"
			 : "system-wide (processes outside the jobs trap and return)");
	if (cfg->ringbuf_kib && cfg->wakeup_kib >= cfg->ringbuf_kib)
		log_warn("ringbuf_wakeup_kib (%u) >= ringbuf_kib (%u): BPF never wakes ffmd, which "
			 "reads records every 100 ms only", cfg->wakeup_kib, cfg->ringbuf_kib);
	return 0;
}

/* The system's drivers are made ready (calibrated) now, attached when a job starts. */
static int system_drivers(struct ffmd *d, const struct ffmd_config *cfg)
{
	struct ffm_driver_list *sys = NULL;

	(void)cfg;
	if (ffm_driver_find_system(NULL, &sys) < 0)
		return 0;
	for (size_t i = 0; i < sys->n; i++) {
		const struct ffm_driver_loc *l = &sys->locs[i];
		struct drv *dv = driver_get(d, l->open_path ? l->open_path : l->path, true);

		if (dv)
			dv->system = true;
	}
	ffm_driver_list__free(sys);
	return 0;
}

/* Signals, the flush timer and every descriptor the loop waits on, in one epoll set. */
static int loop_setup(struct ffmd *d, const struct ffmd_config *cfg)
{
	sigset_t mask;
	int err;

	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0 || signal(SIGPIPE, SIG_IGN) == SIG_ERR ||
	    (d->lp.sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK)) < 0 ||
	    (d->lp.tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK)) < 0 ||
	    (d->lp.ep = epoll_create1(EPOLL_CLOEXEC)) < 0) {
		err = -errno;
		log_err("cannot set up the loop's signals, timer or epoll set: %s", strerror(-err));
		return err;
	}
	if ((err = set_timer(d, cfg->flush_ms)) < 0)
		return err;
	if ((err = ep_add(d, ffm_collector__fd(d->col), TAG_RING)) < 0 ||
	    (err = ep_add(d, control_fd(d), TAG_LISTEN)) < 0 ||
	    (err = ep_add(d, d->lp.sfd, TAG_SIGNAL)) < 0 ||
	    (err = ep_add(d, d->lp.tfd, TAG_TIMER)) < 0 ||
	    (err = ep_add(d, ffm_readier__fd(d->readier), TAG_READY)) < 0 ||
	    (err = ep_add(d, ffm_analyzer__fd(d->analyzer), TAG_ANALYSED)) < 0 ||
	    (err = ep_add(d, ffm_unwinder__fd(d->unwinder), TAG_UNWOUND)) < 0 ||
	    (err = ep_add(d, lookups_fd(d), TAG_LOOKED)) < 0)
		return err;
	if (publish_fd() >= 0 && (err = ep_add(d, publish_fd(), TAG_PUBLISHED)) < 0)
		return err;
	d->lp.watchdog_usec = ffm_watchdog_usec();
	d->lp.last_tick = d->lp.last_watchdog = ffm_now_s();
	return 0;
}

static void loop_close(struct ffmd *d)
{
	for (int i = 0, fds[] = { d->lp.sfd, d->lp.tfd, d->lp.ep }; i < 3; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	d->lp.sfd = d->lp.tfd = d->lp.ep = -1;
}

static int holds_step(struct ffmd *d, const struct ffmd_config *cfg)
{
	(void)cfg;
	holds_resume(d); /* the processes a previous ffmd held when it died let go */
	return 0;
}

static void collector_free(struct ffmd *d)
{
	ffm_collector__free(d->col);
	d->col = NULL;
}

static int detacher_step(struct ffmd *d, const struct ffmd_config *cfg)
{
	(void)cfg;
	detacher_start(d);
	return 0;
}

static void workers_stop(struct ffmd *d)
{
	/* Nobody stays stopped for a driver whose result nobody waits for any more (the holds
	 * went at the run's end); the worker ends after its current driver. */
	d->readier = ffm_readier__free(d->readier);
	lookups_stop(d);
	d->analyzer = ffm_analyzer__free(d->analyzer);
	if (d->metrics) {
		ffm_metrics__set_up(d->metrics, false);
		metrics_write(d);
		d->metrics = ffm_metrics__free(d->metrics);
	}
}

static int apis_setup(struct ffmd *d, const struct ffmd_config *cfg)
{
	(void)cfg;
	return ffm_apis__new(&d->apis);
}

static void apis_free(struct ffmd *d)
{
	ffm_apis__free(d->apis);
	d->apis = NULL;
}

static int symbolizer_setup(struct ffmd *d, const struct ffmd_config *cfg)
{
	(void)cfg;
	return ffm_symbolizer__new(NULL, &d->sym);
}

static void symbolizer_free(struct ffmd *d)
{
	ffm_symbolizer__free(d->sym);
	d->sym = NULL;
}

static int unwinder_setup(struct ffmd *d, const struct ffmd_config *cfg)
{
	(void)cfg;
	return ffm_unwinder__new(d->sym, 2 * FFM_MAX_JOBS, &d->unwinder);
}

static void unwinder_free(struct ffmd *d)
{
	d->unwinder = ffm_unwinder__free(d->unwinder); /* the jobs, its submitters, are gone */
}

static void drivers_step_free(struct ffmd *d)
{
	drivers_release(d);
}

static int socket_setup(struct ffmd *d, const struct ffmd_config *cfg)
{
	return control_listen(d, cfg->runtime_dir);
}

/* Rules from the config. */
static int rules_setup(struct ffmd *d, const struct ffmd_config *cfg)
{
	d->cfg.nrules = 0;
	return apply_config(d, cfg);
}

/* The jobs a crash interrupted, then the copies a stop or a crash cut short. */
static int journal_setup(struct ffmd *d, const struct ffmd_config *cfg)
{
	(void)cfg;
	/* Set only now: until the journal is read back, nothing may rewrite it. */
	snprintf(d->node.journal, sizeof(d->node.journal), "%s", d->node.journal_at);
	journal_resume(d);
	publish_stale(d->node.root);
	return 0;
}

/*
 * Start-up, one step a row, in order (systemd's manager_startup shape): each step either
 * succeeds or logs one line saying why not (@logs: the step says it; else ffmd__new does,
 * with the step's name), and ffmd__free undoes the steps begun, the last first, with their
 * @teardown (NULL: nothing to undo). A teardown copes with its step's partial setup.
 */
struct ffmd_step {
	const char *name;
	int (*setup)(struct ffmd *d, const struct ffmd_config *cfg);
	void (*teardown)(struct ffmd *d);
	bool logs;
};

static const struct ffmd_step STEPS[] = {
	{ "the route table", tables_setup, tables_free, false },
	{ "the admin group", admin_setup, NULL, true },
	{ "the state and runtime directories", dirs_setup, dirs_unlock, true },
	{ "the node's directory", node_setup, node_unlock, true },
	{ "the trusted driver directories", trust_setup, NULL, true },
	{ "the holds of a previous ffmd", holds_step, NULL, true },
	{ "the BPF collector", collector_setup, collector_free, true },
	{ "the detacher", detacher_step, detacher_stop, true },
	{ "the worker threads", workers_start, workers_stop, true },
	{ "the API probes' table", apis_setup, apis_free, false },
	{ "the symbolizer", symbolizer_setup, symbolizer_free, false },
	{ "the unwinder", unwinder_setup, unwinder_free, false },
	{ "the system's drivers", system_drivers, drivers_step_free, true },
	{ "the control socket", socket_setup, control_close, true },
	{ "the loop", loop_setup, loop_close, true },
	{ "the rules", rules_setup, NULL, true },
	{ "the journal", journal_setup, NULL, true },
};

int ffmd__new(const struct ffmd_config *cfg, struct ffmd **ret)
{
	struct ffmd *d = ffmd_alloc(cfg);
	int err = 0;

	*ret = NULL;
	if (!d) {
		log_err("cannot start: %s", strerror(ENOMEM));
		return -ENOMEM;
	}
	for (size_t i = 0; i < sizeof(STEPS) / sizeof(STEPS[0]); i++) {
		d->lp.steps = i + 1; /* a step that fails is undone too */
		if ((err = STEPS[i].setup(d, cfg)) < 0) {
			if (!STEPS[i].logs)
				log_err("cannot start: %s: %s", STEPS[i].name, strerror(-err));
			ffmd__free(d);
			return err;
		}
	}
	*ret = d;
	return 0;
}

int ffmd__run(struct ffmd *d)
{
	ffm_notify("READY=1\nSTATUS=waiting for jobs");
	log_info("ffmd ready: control socket %s, state in %s", control_socket(d),
		 d->cfg.state_dir);
	while (!d->stop) {
		struct epoll_event evs[16];
		/* Adaptive stage 1's windows are timed by the rounds: 50 ms while a process has a
		 * sampler (links.c, plinks_sample_tick); 2 ms while a forked child's stop is looked
		 * for (holds.c), which it waits for meanwhile. */
		int n = epoll_wait(d->lp.ep, evs, 16, forks_waiting(d) ? 2 : d->lp.sampling ? 50 : 100);

		if (n < 0 && errno != EINTR)
			return -errno;
		/* Records are polled each round as well: BPF wakes us only when a share of
		 * the buffer is filled (bpf/ffm.bpf.c). */
		ffm_collector__consume(d->col);
		d->lp.sampling = plinks_sample_tick(d) > 0;
		bridges_update(d, true);
		end_finished_jobs(d);
		parents_check(d);
		holds_expire(d);
		for (int i = 0; i < n; i++) {
			uint64_t tag = evs[i].data.u64 & 0xff;

			if (tag == TAG_LISTEN) {
				accept_conn(d);
			} else if (tag == TAG_CONN) {
				conn_ready(d, evs[i].data.u64 >> 8);
			} else if (tag == TAG_READY) {
				drivers_take(d);
			} else if (tag == TAG_ANALYSED) {
				analyses_take(d);
				answer_waiting(d, false); /* a job whose copy will not come */
			} else if (tag == TAG_PUBLISHED) {
				copies_take(d);
			} else if (tag == TAG_UNWOUND) {
				ffm_unwinder__take(d->unwinder);
			} else if (tag == TAG_LOOKED) {
				drivers_found(d);
			} else if (tag == TAG_TIMER) {
				uint64_t x;

				if (read(d->lp.tfd, &x, sizeof(x)) > 0)
					tick(d);
			} else if (tag == TAG_SIGNAL) {
				struct signalfd_siginfo si;

				while (read(d->lp.sfd, &si, sizeof(si)) == sizeof(si)) {
					if (si.ssi_signo == SIGHUP) {
						reload(d);
						continue;
					}
					log_info("signal %d: stopping", si.ssi_signo);
					d->stop = true;
				}
			}
		}
	}
	ffm_notify("STOPPING=1");
	return 0;
}

/* The run's end: what its jobs, processes and clients hold, before any step is undone. */
static void run_end(struct ffmd *d)
{
	/* Jobs still active end as aborted runs: what they recorded is kept. A clean stop
	 * leaves no job to resume. */
	d->stop = true;
	for (int i = 0; i < FFM_MAX_JOBS; i++)
		if (d->jobs[i].used)
			job_end(d, &d->jobs[i], true);
	/* Runs that ended before and wait for their last stacks: waited for now (each of the
	 * unwinder's opens has its deadline, each user's slow ones a budget). */
	ffm_jobrun__finish_ending();
	if (d->node.journal[0])
		journal_write(d);
	publish_wait(); /* the copies of the stores of the jobs just ended */
	copies_take(d);
	answer_waiting(d, true); /* the job-ends still waiting: their copy comes at the next start */
	for (int i = 0; i < MAX_PLINKS; i++)
		if (d->plinks[i].pid)
			plink_free(d, &d->plinks[i]);
	detacher_stop(d);
	holds_release_all(d);
}

struct ffmd *ffmd__free(struct ffmd *d)
{
	if (!d)
		return NULL;
	run_end(d);
	/* Last: the directories' locks (the socket is gone when the next ffmd locks). */
	while (d->lp.steps > 0) {
		const struct ffmd_step *st = &STEPS[--d->lp.steps];

		if (st->teardown)
			st->teardown(d);
	}
	free(d);
	return NULL;
}
