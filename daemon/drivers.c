/* SPDX-License-Identifier: MIT */
/*
 * The libcuda files in use (struct drv), and getting each job process the probes of its own.
 *
 * Driver discovery: the system's libcuda at start, and for every process that joins a job the
 * libcuda its loader will pick (LD_LIBRARY_PATH, its root's ld.so.cache), looked up when its
 * exec is reported, mostly before it has loaded the driver. A new build-id is calibrated on the
 * spot (the calibration is cached per build-id). While a driver file not seen before is made
 * ready (calibration: about a second; attaching: milliseconds) the process that brought it is
 * held with SIGSTOP, so that its first calls are not missed; a process that was stopped
 * already is left as it is. "Before it can have loaded the driver" is a race ffmd can lose (a
 * loaded node, a preload, a dlopen by path): the map guard closes it, BPF stopping a job's
 * process at the mmap of a libcuda file not declared ready (on_driver_mapped).
 *
 * Owns the driver table (entries, per-user limits, forgetting), the processes waiting for a
 * pending driver, and marking a job's run partial when one of its processes could not be
 * measured. Not the probes themselves (links.c attaches them), nor the stops (holds.c).
 *
 * Nothing here waits on the loop. Which driver a process uses is looked up by the lookups'
 * thread (lookups.c: its environment and LD_LIBRARY_PATH are its user's files, a process the
 * map guard stopped is waited for there); the answers come back through drivers_found, and a
 * process held meanwhile stays held until its answer (at most HOLD_MAX_S, holds.c). Making a
 * driver ready (parsing, calibrating: up to seconds) runs on the readier's thread
 * (daemon/readier.c); its results come back to the loop through drivers_take. Only while ffmd
 * starts, before its loop runs, are drivers made ready in place (driver_get's @sync).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "daemon/ffmd_int.h"
#include "daemon/jobrun.h"
#include "daemon/log.h"
#include "daemon/readier.h"
#include "store/ffm_store.h"
#include "symbols/ffm_driver.h"

#define MAX_DRIVERS_PER_USER 4 /* entries a non-root user's processes may bring (see driver_slot) */
#define FAILED_FORGET_S 60.0   /* an unusable driver is looked at again after this long */

/* Whether a message about @what may be logged now: at most one per 10 s for each @last. */
static bool log_allowed(double *last)
{
	double t = ffm_now_s();

	if (*last && t - *last < 10.0)
		return false;
	*last = t;
	return true;
}

/* What driver @dv holds: its attachments (the bridge's too) and its ready driver. */
static void driver_release(struct drv *dv)
{
	ffm_attachment__free(dv->api_att);
	ffm_attachment__free(dv->wait_att);
	ffm_attachment__free(dv->bridge_att);
	ffm_ready_driver__release(&dv->rd);
}

void drivers_release(struct ffmd *d)
{
	for (int i = 0; i < MAX_DRIVERS; i++)
		driver_release(&d->drvs[i]);
}

static void driver_free(struct ffmd *d, struct drv *dv)
{
	uint32_t gen = dv->gen + 1;

	ffm_collector__driver_forget(d->col, ffm_kernel_dev(dv->dev), dv->ino);
	driver_release(dv);
	memset(dv, 0, sizeof(*dv));
	dv->gen = gen;
}

/*
 * An entry for a driver file owned by @user, or NULL. Unusable entries are forgotten after
 * FAILED_FORGET_S; a non-root user's files take at most MAX_DRIVERS_PER_USER entries (so that
 * one user's many files cannot keep root's next driver out); a full table gives up its oldest
 * unusable entry, else its oldest one that no probe uses (made ready again from the cache
 * when needed).
 */
static struct drv *driver_slot(struct ffmd *d, uid_t user, const char *path)
{
	static double last_user, last_full;
	struct drv *best = NULL;
	double t = ffm_now_s();
	int mine = 0;

	for (int i = 0; i < MAX_DRIVERS; i++) {
		struct drv *dv = &d->drvs[i];

		if (dv->used && dv->state == DRV_FAILED && t - dv->since >= FAILED_FORGET_S)
			driver_free(d, dv);
		if (dv->used && user && dv->user == user)
			mine++;
	}
	if (user && mine >= MAX_DRIVERS_PER_USER) {
		if (log_allowed(&last_user))
			log_warn("uid %u already owns %d of the libcuda files in use; ignoring %s (the "
				 "processes using it are not measured)", (unsigned)user, mine, path);
		return NULL;
	}
	for (int i = 0; i < MAX_DRIVERS; i++)
		if (!d->drvs[i].used)
			return &d->drvs[i];
	for (int i = 0; i < MAX_DRIVERS; i++) {
		struct drv *dv = &d->drvs[i];

		if (dv->system || dv->state == DRV_PENDING || driver_in_use(d, dv))
			continue;
		if (!best || (dv->state == DRV_FAILED) > (best->state == DRV_FAILED) ||
		    ((dv->state == DRV_FAILED) == (best->state == DRV_FAILED) && dv->since < best->since))
			best = dv;
	}
	if (best) {
		log_info("forgetting driver %s to make room for %s", best->path, path);
		driver_free(d, best);
		return best;
	}
	if (log_allowed(&last_full))
		log_warn("more than %d libcuda files in use; ignoring %s", MAX_DRIVERS, path);
	return NULL;
}

/* @pid runs unmeasured for a while through no fault of the stage (a new driver being made
 * ready, and it could not be held): its job's run is partial, and the stage is done again. */
static void job_interrupted(struct ffmd *d, pid_t pid)
{
	int idx = job_of_pid(d, pid);

	if (idx >= 0 && d->jobs[idx].jr)
		ffm_jobrun__set_interrupted(d->jobs[idx].jr);
}

/* Remember that @pid's calls go unmeasured (its driver cannot be used): its job's run is
 * partial (job_end). Its job: the one record @h is for, else (NULL) the pid's now. */
static void job_unmeasured(struct ffmd *d, pid_t pid, const struct ffm_rec_hdr *h)
{
	int idx = h ? job_of_rec(d, h) : job_of_pid(d, pid);
	struct job *j;

	if (idx < 0)
		return;
	j = &d->jobs[idx];
	for (uint32_t i = 0; i < j->nunmeasured && i < MAX_UNMEASURED; i++)
		if (j->unmeasured[i] == pid)
			return;
	if (j->nunmeasured < MAX_UNMEASURED)
		j->unmeasured[j->nunmeasured] = pid;
	j->nunmeasured++;
}

/*
 * Process @pid will use (or uses) driver @dv, which is no longer pending: give it its probes.
 * Per-process scope: attached now, whether or not it has mapped the file yet, so that its mmap
 * finds them and the map guard does not stop it (@kkey: the file as BPF saw it at that mmap).
 */
static void driver_use(struct ffmd *d, pid_t pid, struct drv *dv, const uint64_t *kkey)
{
	if (dv->state != DRV_READY) {
		job_unmeasured(d, pid, NULL);
		return;
	}
	if (ffm_collector__per_process(d->col)) {
		struct plink *pl = link_process(d, pid, dv);

		if (!pl && alive(pid))
			job_unmeasured(d, pid, NULL); /* its probes could not be attached */
		else if (pl && kkey)
			plink_key(d, pl, kkey[0], kkey[1]);
	} else if (!dv->wait_att) {
		update_attachments(d);
	}
}

/* @dv is ready or failed: every process held for it goes on, and those that will load it
 * get their probes before they do. */
static void drivers_release_waiters(struct ffmd *d, struct drv *dv)
{
	/* What making it ready took (its calibration cache lookup, or a calibration), charged to
	 * each process that waited for it, held or not. */
	uint64_t took = (uint64_t)((ffm_now_s() - dv->since) * 1e9);

	for (int i = 0; i < MAX_HOLDS; i++)
		if (d->waiters[i].pid && d->waiters[i].dv == dv) {
			pid_t pid = d->waiters[i].pid;

			overhead_charge(d, pid, FFM_OVERHEAD_DRIVER, took);
			d->waiters[i].pid = 0;
			if (proc_start_time(pid) == d->waiters[i].start)
				driver_use(d, pid, dv, NULL);
		}
	for (struct hold *h; (h = hold_waiting_for(d, dv));) {
		pid_t pid = h->pid;

		overhead_charge(d, pid, FFM_OVERHEAD_DRIVER, took);
		h->wait = NULL;
		driver_use(d, pid, dv, h->mapped ? (const uint64_t[]){ h->kdev, h->kino } : NULL);
		hold_release(d, pid);
	}
}

/* A readier result: the entry it is for becomes READY or FAILED, its waiters go on. */
static void driver_done(struct ffmd *d, struct ffm_readier_result *res)
{
	uint32_t idx = (uint32_t)(res->cookie >> 32), gen = (uint32_t)res->cookie;
	struct drv *dv = idx < MAX_DRIVERS ? &d->drvs[idx] : NULL;

	if (!dv || !dv->used || dv->gen != gen || dv->state != DRV_PENDING) {
		ffm_ready_driver__release(&res->rd);
		return;
	}
	if (res->err < 0) {
		dv->state = DRV_FAILED;
		dv->since = ffm_now_s();
		snprintf(dv->why, sizeof(dv->why), "%s", res->why[0] ? res->why : strerror(-res->err));
		log_err("cannot use driver %s: %s; processes using it are not measured", dv->path, dv->why);
	} else {
		dv->rd = res->rd;
		dv->state = DRV_READY;
		log_info("driver %s: build-id %s, version %s, wait function at %#" PRIx64 "%s%s", dv->path,
			 ffm_driver__build_id(dv->rd.drv), ffm_driver__version(dv->rd.drv), dv->rd.wait_off,
			 dv->rd.calibrated_now ? " (calibrated now)" : "",
			 dv->rd.trusted ? "" : " (not root's file: the calibration of its build-id)");
		/* Remembered, so that after a crash its probes are back before the resumed jobs'
		 * processes can call it (the journal is not open yet while ffmd starts). */
		if (d->node.journal[0] && !d->node.resuming)
			journal_write(d);
	}
	/* Ready or unusable, it is dealt with: the map guard no longer stops its users. */
	ffm_collector__driver_known(d->col, ffm_kernel_dev(dv->dev), dv->ino);
	drivers_release_waiters(d, dv);
}

/* Results of the readier, as they come (the loop's TAG_READY). */
void drivers_take(struct ffmd *d)
{
	struct ffm_readier_result res;

	while (ffm_readier__take(d->readier, &res) == 0)
		driver_done(d, &res);
}

/* The entry of the driver file @path (@st: its stat), made if new: see driver_get. */
static struct drv *driver_entry(struct ffmd *d, const char *path, const struct stat *st, bool sync)
{
	struct ffm_readier_result res = {};
	struct drv *dv;

	if ((dv = driver_find(d, st->st_dev, st->st_ino)))
		return dv;
	/* Whose it is: the file's owner (a user can make no file that another user owns). */
	if (!(dv = driver_slot(d, st->st_uid, path)))
		return NULL;
	dv->used = true;
	dv->state = DRV_PENDING;
	dv->dev = st->st_dev;
	dv->ino = st->st_ino;
	dv->user = st->st_uid;
	dv->since = ffm_now_s();
	snprintf(dv->path, sizeof(dv->path), "%s", path);
	res.cookie = (uint64_t)(dv - d->drvs) << 32 | dv->gen;
	if (!sync) {
		res.err = ffm_readier__submit(d->readier, path, res.cookie);
		if (res.err == 0) {
			log_info("driver %s: being made ready; processes that need it wait", path);
			return dv;
		}
		snprintf(res.why, sizeof(res.why), "too many drivers being made ready at once");
	} else {
		res.err = ffm_driver_ready(path, d->cfg.state_dir, 0, &res.rd, res.why, sizeof(res.why));
	}
	driver_done(d, &res);
	return dv;
}

/*
 * The entry of the driver file @path, made if new: pending (the readier makes it ready off the
 * loop), or, with @sync (while ffmd starts, before its loop runs), made ready here. NULL when
 * the file is gone or the table refuses it.
 */
struct drv *driver_get(struct ffmd *d, const char *path, bool sync)
{
	struct stat st;

	if (stat(path, &st) < 0)
		return NULL;
	return driver_entry(d, path, &st, sync);
}

/*
 * The driver of looked-up process @l (still the process asked for): made ready if new (the
 * readier, off the loop), the process's probes given now if it is ready, else once it is; a
 * process that maps the file already is held until then.
 */
static struct drv *driver_of(struct ffmd *d, const struct lookup *l)
{
	pid_t pid = l->pid;
	struct drv *dv;

	if (!l->found) {
		/* No libcuda for it (a non-CUDA process of the job) is normal; being refused
		 * its environment or root is not, and must not go unnoticed. */
		if (l->err == -EACCES || l->err == -EPERM)
			log_warn("cannot tell which libcuda process %d will load: %s (ffmd needs "
				 "CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH), its calls may go unmeasured",
				 pid, strerror(-l->err));
		return NULL;
	}
	if (!(dv = driver_entry(d, l->path, &l->st, false))) {
		job_unmeasured(d, pid, NULL);
		return NULL;
	}
	if (dv->state == DRV_PENDING && l->err == 1) {
		/* It may be calling it now: held until its probes are there. */
		struct hold *h = hold(d, pid, false);

		if (h) {
			h->wait = dv;
			log_info("holding process %d while its driver %s is made ready", pid, l->path);
			return dv;
		}
		job_interrupted(d, pid); /* it runs on, unmeasured until the driver is ready */
	}
	if (dv->state == DRV_PENDING) {
		/* Not loaded yet: it runs on. Its probes come when the driver is ready; should it
		 * map the file before, the map guard stops it there (the file is not yet declared). */
		int free_w = -1;

		for (int i = 0; i < MAX_HOLDS; i++) {
			if (d->waiters[i].pid == pid)
				free_w = i;
			else if (!d->waiters[i].pid && free_w < 0)
				free_w = i;
		}
		if (free_w >= 0)
			d->waiters[free_w] = (typeof(d->waiters[0])){ pid, l->start, dv };
		return dv;
	}
	driver_use(d, pid, dv, NULL);
	return dv;
}

/*
 * The process of map record @m, its driver @dv known (NULL: none found, or the process gone):
 * the file declared to BPF (as BPF saw it: a file reached through an overlay may not stat to
 * the same device), the process given its probes and let go, once the driver is ready.
 */
static void driver_mapped_done(struct ffmd *d, const struct ffm_rec_map *m, struct drv *dv)
{
	pid_t pid = (pid_t)m->hdr.tgid;
	struct hold *h = m->stopped ? hold_find(d, pid) : NULL;

	if (dv && dv->state == DRV_PENDING) {
		if (h)
			h->wait = dv; /* released by drivers_release_waiters */
		else
			job_interrupted(d, pid);
		return;
	}
	ffm_collector__driver_known(d->col, m->dev, m->ino);
	if (dv)
		driver_use(d, pid, dv, (const uint64_t[]){ m->dev, m->ino });
	/* Not held and gone before its probes came: it ran unmeasured (a short program whose
	 * parent waits for stopped children). Its run must not look complete. */
	if (!m->stopped && dv && dv->state == DRV_READY && ffm_collector__per_process(d->col) &&
	    (!alive(pid) || !plink_find(d, pid, dv)))
		job_unmeasured(d, pid, &m->hdr);
	if (h)
		hold_release(d, pid);
}

/* Ask which driver @pid maps or will load (@m: the map guard's record), off the loop: the
 * answer comes to driver_found. A hold of @pid is kept until then. */
static void driver_ask(struct ffmd *d, pid_t pid, const struct ffm_rec_map *m)
{
	static double last;
	struct hold *h = hold_find(d, pid);
	int err = lookup_ask(d, pid, m);

	if (err == 0 || err == -EALREADY) {
		if (h)
			h->looking = true;
		return;
	}
	if (log_allowed(&last))
		log_warn("cannot look up the libcuda of process %d: %s; its calls may go unmeasured",
			 pid, err == -ENOSPC ? "too many lookups at once" : strerror(-err));
	job_unmeasured(d, pid, m ? &m->hdr : NULL);
	if (m && h && !h->wait && !h->looking)
		hold_release(d, pid); /* unmeasured beats stuck */
}

/*
 * A job process's driver, for an exec, a fork or a job's start: looked up off the loop, its
 * probes given when the answer comes (drivers_found). The process runs on meanwhile, unless
 * it is held already (record_job's hold keeps it until the answer).
 */
void ensure_driver_for_pid(struct ffmd *d, pid_t pid)
{
	driver_ask(d, pid, NULL);
}

/* A lookup's answer: acted on if it is still for the process asked about (one that exited, or
 * whose pid another process has now, is dropped), and a hold that waited for it let go. */
static void driver_found(struct ffmd *d, const struct lookup *l)
{
	pid_t pid = l->pid;
	struct drv *dv = NULL;
	struct hold *h;

	overhead_charge(d, pid, FFM_OVERHEAD_PROCFS, l->ns);
	if (l->map && l->m.stopped && !l->stopped && alive(pid))
		log_warn("process %d did not stop at its libcuda mmap; its first calls may go unmeasured",
			 pid);
	if (l->start && proc_start_time(pid) == l->start)
		dv = driver_of(d, l);
	/* Its exec's lookup failed for another reason than "no libcuda" (its user's open budget
	 * spent, a deadline): should it map a driver the bridge is on, no one would know. */
	if (!dv && !l->map && l->err < 0 && l->err != -ENOENT && l->start &&
	    proc_start_time(pid) == l->start)
		bridge_refuse(d, pid);
	if (l->map)
		driver_mapped_done(d, &l->m, dv);
	h = hold_find(d, pid);
	if (h && h->looking && !lookup_pending(d, pid)) {
		h->looking = false;
		if (!h->wait)
			hold_release(d, pid);
	}
}

/* The lookups' answers, as they come (the loop's TAG_LOOKED). */
void drivers_found(struct ffmd *d)
{
	struct lookup *l;

	while ((l = lookup_take(d))) {
		driver_found(d, l);
		free(l);
	}
}

/*
 * A job's process maps a libcuda file it has no probes for (a driver not seen before, or ffmd
 * late to give it its probes), and BPF stopped it there (see struct ffm_rec_map). The stop
 * lands when its mmap returns, and only then do its maps show the file. A file ffmd knows is
 * dealt with at once; another is looked up as for an exec (off the loop, the process held
 * meanwhile), then made ready. Done whatever became of its job: nobody else would send the
 * SIGCONT.
 */
void on_driver_mapped(struct ffmd *d, const struct ffm_rec_map *m)
{
	pid_t pid = (pid_t)m->hdr.tgid;
	struct drv *dv = NULL;
	struct hold *h;
	int j;

	/* The file BPF saw, if it is a driver ffmd has: a process may map more than one. */
	for (int i = 0; i < MAX_DRIVERS && !dv; i++)
		if (d->drvs[i].used && ffm_kernel_dev(d->drvs[i].dev) == m->dev && d->drvs[i].ino == m->ino)
			dv = &d->drvs[i];
	if (!m->stopped && (m->flags & FFM_MAP_PARENT_WAITS)) {
		log_info("process %d maps a libcuda it has no probes on: not held, its parent waits "
			 "for stopped children (its first calls may go unmeasured)", pid);
		if ((j = job_of_pid(d, pid)) >= 0)
			d->jobs[j].not_held++;
	}
	if (m->stopped && (h = hold(d, pid, true))) {
		if (!h->stop_ns)
			h->stop_ns = m->hdr.ts_ns;
		h->mapped = true;
		h->kdev = m->dev;
		h->kino = m->ino;
		log_info("process %d maps a libcuda %s (device %#" PRIx64 ", inode %" PRIu64
			 "): held at its mmap until its probes are there", pid,
			 dv && ffm_collector__per_process(d->col) ? "it has no probes on" : "not seen before",
			 (uint64_t)m->dev, (uint64_t)m->ino);
	}
	/* A known driver's stop may have been let go already (the adoption of a rule's process,
	 * read first, attached its probes and continued it): nothing to wait for. */
	if (dv)
		driver_mapped_done(d, m, dv);
	else
		driver_ask(d, pid, m);
}
