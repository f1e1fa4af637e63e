/* SPDX-License-Identifier: MIT */
/*
 * Uprobe attachments: which probes sit on which libcuda file, for whom.
 *
 * Attach policy (what a process outside every job pays): no uprobe exists while no job is
 * active. With a job active, each known libcuda carries its wait-function probe; its API
 * probes (stage 2) only while some active job is at stage >= 2. Every probe returns after one
 * hash lookup for a process outside the jobs.
 *
 * Two scopes (ffm_collector__per_process): system-wide, a driver's sets (struct drv's wait_att
 * and api_att, update_attachments); or per process, each job process's own probes on each
 * driver file it maps (struct plink), declared to BPF so that the map guard lets it map the
 * file. Per process, a stage-1 job's processes are first traced by the bridge (a system-wide
 * wait probe that only they pass; struct drv's bridge_att, bridges_update) and get probes of
 * their own only if they live on: no attach on a short process's path.
 *
 * Owns the attachments and the detacher thread, not the drivers (drivers.c makes them ready and
 * says which process uses which) nor the jobs (their stages are read here, never changed).
 * Attaching runs on the loop (milliseconds). Detaching waits for the kernel (an RCU grace
 * period each): a process's own probes are detached by the detacher thread, which touches
 * nothing but the queue it is handed; a driver's system-wide sets go on the loop, after
 * LINGER_S without a job (the wait probe) or with their last stage-2 job (the API probes, whose
 * lingering would spoil other jobs' stacks, see update_attachments); the bridge goes to the
 * detacher too.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "daemon/ffmd_int.h"
#include "daemon/jobrun.h"
#include "daemon/log.h"
#include "daemon/probes.h"
#include "store/ffm_store.h"
#include "symbols/ffm_driver.h"

/* The stage-2 set: what a job at stage >= 2 needs besides the wait function. */
#define API_PROBES                                                                                 \
	(FFM_PROBE_SYNC_FUNCS | FFM_PROBE_SYNC_STATIC | FFM_PROBE_TRANSFER | FFM_PROBE_ALLOC |     \
	 FFM_PROBE_FREE | FFM_PROBE_MEMSET | FFM_PROBE_LAUNCH |                                    \
	 FFM_PROBE_HASH /* sleepable twins: they hash for stage-3 jobs only */)

/* The API probes job @job's own processes need: the stage-2 set at stage 2 and above, and at
 * stage 1 what its plan adds (a monitoring run that times copies, stages/ffm_plan.h). The
 * system-wide sets serve stage >= 2 only: there a monitoring run times no copies. */
static uint32_t job_api_probes(const struct ffmd *d, int job)
{
	if (job < 0 || !d->jobs[job].used)
		return 0;
	if (d->jobs[job].stage >= 2)
		return API_PROBES;
	return d->jobs[job].jr ? ffm_jobrun__plan(d->jobs[job].jr)->probes & API_PROBES : 0;
}

static uint64_t detail_slots(const struct ffmd *d)
{
	uint64_t m = 0;

	for (int i = 0; i < FFM_MAX_JOBS; i++)
		if (d->jobs[i].used && d->jobs[i].stage >= 2)
			m |= 1ull << i;
	return m;
}

/* The union of the stage-1 lists of the jobs at stage >= 2. */
static size_t sync_union(struct ffmd *d, const char **out, size_t max)
{
	size_t n = 0;

	for (int i = 0; i < FFM_MAX_JOBS; i++) {
		const char *const *names;
		size_t nn;

		if (!d->jobs[i].used || d->jobs[i].stage < 2 || !d->jobs[i].jr)
			continue;
		names = ffm_jobrun__sync_names(d->jobs[i].jr, &nn);
		for (size_t k = 0; k < nn; k++) {
			size_t j;

			for (j = 0; j < n && strcmp(out[j], names[k]); j++)
				;
			if (j == n && n < max)
				out[n++] = names[k];
		}
	}
	return n;
}

/* Attach @probes of @dv (by @path, NULL: its own) system-wide (@pid -1: the sync functions of
 * every stage-2 job) or for process @pid of job @job (its own sync functions). */
static int attach_set(struct ffmd *d, struct drv *dv, const char *path, uint32_t probes, pid_t pid,
		      int job, struct ffm_attachment **att, bool quiet)
{
	const char *names[256];
	const char *const *jn = names;
	size_t nn = 0;
	uint64_t t0 = ffm_now_ns();
	struct ffm_probe_set ps;
	int err;

	if (pid <= 0)
		nn = sync_union(d, names, 256);
	else if (job >= 0 && d->jobs[job].jr)
		jn = ffm_jobrun__sync_names(d->jobs[job].jr, &nn);
	err = ffm_probe_set__build(&ps, dv->rd.drv, d->apis, probes, dv->rd.wait_off, jn, nn);
	if (err < 0)
		return err;
	err = ffm_collector__attach(d->col, path ? path : dv->path, pid, ps.p, ps.n, att);
	if (!err && pid > 0 && !quiet)
		log_info("attached %zu probes to %s for process %d", ps.n, dv->path, pid);
	else if (!err && pid <= 0)
		log_info("attached %zu probes to %s", ps.n, dv->path);
	ffm_probe_set__release(&ps);
	if (pid > 0)
		overhead_charge(d, pid, FFM_OVERHEAD_ATTACH, ffm_now_ns() - t0);
	return err;
}

/* Whether every public sync function the stage-2 jobs need has an attached API probe. */
static bool names_covered(struct ffmd *d)
{
	const char *names[256];
	size_t nn = sync_union(d, names, 256);

	for (size_t k = 0; k < nn; k++) {
		int i;

		for (i = 0; i < d->att.n && strcmp(d->att.names[i], names[k]); i++)
			;
		if (i == d->att.n)
			return false;
	}
	return true;
}

static void remember_names(struct ffmd *d)
{
	const char *names[256];
	size_t nn = sync_union(d, names, 256);

	for (int i = 0; i < d->att.n; i++)
		free(d->att.names[i]);
	d->att.n = 0;
	for (size_t k = 0; k < nn; k++)
		if ((d->att.names[d->att.n] = strdup(names[k])))
			d->att.n++;
}

/*
 * Detaching a uprobe link waits for the kernel (an RCU grace period, tens of ms). Per-process
 * probes go at every exit of a process that had them: a thread detaches them, so that ffmd's
 * loop does not stall on a job's processes ending together.
 */
static void *detacher(void *arg)
{
	struct ffmd *d = arg;
	double t, job_start;
	int job;

	pthread_mutex_lock(&d->det.mu);
	for (;;) {
		struct ffm_attachment *a;

		while (!d->det.n && !d->det.stop)
			pthread_cond_wait(&d->det.cv, &d->det.mu);
		if (!d->det.n)
			break;
		job = d->det.q[--d->det.n].job;
		job_start = d->det.q[d->det.n].job_start;
		a = d->det.q[d->det.n].a;
		pthread_mutex_unlock(&d->det.mu);
		t = ffm_now_s();
		ffm_attachment__free(a);
		t = ffm_now_s() - t;
		pthread_mutex_lock(&d->det.mu);
		d->det.sum_s += t;
		d->det.count++;
		if (job >= 0 && job < FFM_MAX_JOBS) {
			if (d->det.acc[job].job_start != job_start) {
				d->det.acc[job].job_start = job_start;
				d->det.acc[job].ns = d->det.acc[job].n = 0;
			}
			d->det.acc[job].ns += (uint64_t)(t * 1e9);
			d->det.acc[job].n++;
		}
	}
	pthread_mutex_unlock(&d->det.mu);
	return NULL;
}

double detach_mean_s(struct ffmd *d)
{
	double m = 0;

	if (!d->det.started)
		return 0;
	pthread_mutex_lock(&d->det.mu);
	if (d->det.count)
		m = d->det.sum_s / (double)d->det.count;
	pthread_mutex_unlock(&d->det.mu);
	return m;
}

void detacher_start(struct ffmd *d)
{
	sigset_t all, old;

	pthread_mutex_init(&d->det.mu, NULL);
	pthread_cond_init(&d->det.cv, NULL);
	/* Signals are the loop's (signalfd): the thread starts with every one blocked. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	d->det.started = pthread_create(&d->det.th, NULL, detacher, d) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* Wait until everything queued is detached. */
void detacher_stop(struct ffmd *d)
{
	if (!d->det.started)
		return;
	pthread_mutex_lock(&d->det.mu);
	d->det.stop = true;
	pthread_cond_signal(&d->det.cv);
	pthread_mutex_unlock(&d->det.mu);
	pthread_join(d->det.th, NULL);
	d->det.started = false;
}

void detach_overhead_take(struct ffmd *d, int job)
{
	struct ffm_overhead *p = job_overhead(d, job);

	if (!d->det.started || !p)
		return;
	pthread_mutex_lock(&d->det.mu);
	if (d->det.acc[job].job_start == d->jobs[job].start) {
		p->ns[FFM_OVERHEAD_DETACH] += d->det.acc[job].ns;
		p->n[FFM_OVERHEAD_DETACH] += d->det.acc[job].n;
	}
	d->det.acc[job].ns = d->det.acc[job].n = 0;
	pthread_mutex_unlock(&d->det.mu);
}

/* Detach *@a in the background (at once when the queue is full) and clear it. @pid: the
 * process it is for (its job pays the detach, if it is still in one), 0: none. */
static void detach_later(struct ffmd *d, struct ffm_attachment **a, pid_t pid)
{
	int job = pid > 0 ? job_of_pid(d, pid) : -1;
	bool queued = false;

	if (!*a)
		return;
	if (d->det.started) {
		pthread_mutex_lock(&d->det.mu);
		if (d->det.n < MAX_DETACH) {
			d->det.q[d->det.n].a = *a;
			d->det.q[d->det.n].job = job;
			d->det.q[d->det.n++].job_start = job >= 0 ? d->jobs[job].start : 0;
			queued = true;
			pthread_cond_signal(&d->det.cv);
		}
		pthread_mutex_unlock(&d->det.mu);
	}
	if (!queued) {
		uint64_t t0 = ffm_now_ns();

		ffm_attachment__free(*a);
		ffm_overhead_add(job_overhead(d, job), FFM_OVERHEAD_DETACH, ffm_now_ns() - t0);
	}
	*a = NULL;
}

/* Declare to BPF that @pl's process has the probes of the file BPF knows as {kdev, ino}. */
void plink_key(struct ffmd *d, struct plink *pl, uint64_t kdev, uint64_t ino)
{
	for (int i = 0; i < pl->nkeys; i++)
		if (pl->keys[i].dev == kdev && pl->keys[i].ino == ino)
			return;
	if (pl->nkeys == 2)
		return;
	pl->keys[pl->nkeys++] =
		(struct ffm_link_key){ .tgid = (uint32_t)pl->pid, .dev = kdev, .ino = ino };
	ffm_collector__set_linked(d->col, pl->pid, kdev, ino, true);
}

/* A path that opens @dv now: its own, else (a container's file, seen through a process that has
 * gone) the one process @pid maps it by. */
static const char *plink_path(const struct drv *dv, pid_t pid, char *buf, size_t len)
{
	struct ffm_driver_list *l = NULL;
	const char *path = dv->path;
	struct stat st;

	if (stat(dv->path, &st) == 0 && st.st_dev == dv->dev && st.st_ino == dv->ino)
		return path;
	if (ffm_driver_find_in_process(pid, NULL, &l) == 0)
		for (size_t i = 0; i < l->n; i++) {
			const char *p = l->locs[i].open_path ? l->locs[i].open_path : l->locs[i].path;

			if (stat(p, &st) == 0 && st.st_dev == dv->dev && st.st_ino == dv->ino) {
				snprintf(buf, len, "%s", p);
				path = buf;
				break;
			}
		}
	ffm_driver_list__free(l);
	return path;
}

/* Attach what @pl's process needs now: the wait function, and the stage-2 set while its job is
 * at stage 2 or above; the stage-2 set goes when it is no longer needed. */
/* An attach of @what to @dv (for process @pid, or system-wide: -1) failed: say so, and on a
 * refusal which capabilities the probe mode needs and which ffmd lacks. */
static void log_attach_err(struct ffmd *d, const char *what, const struct drv *dv, pid_t pid,
			   int err)
{
	char caps[256] = "", hint[200], proc[48] = "";

	if (err == -EPERM || err == -EACCES)
		snprintf(caps, sizeof(caps), " (attaching uprobes in %s mode %s)",
			 ffm_collector__probe_mode(d->col),
			 ffm_caps_hint(ffm_collector__attach_caps(d->col), UINT64_MAX, hint,
				       sizeof(hint)));
	if (pid > 0)
		snprintf(proc, sizeof(proc), " for process %d", pid);
	log_err("failed to attach %s to %s%s: %s%s", what, dv->path, proc, strerror(-err), caps);
}

static void plink_sync(struct ffmd *d, struct plink *pl)
{
	int job = job_of_pid(d, pl->pid), err;
	uint32_t api_probes = job_api_probes(d, job);
	bool api = api_probes != 0;
	char buf[PATH_MAX];
	bool done = pl->wait_att && (!api || pl->api_att);
	const char *path = done ? NULL : plink_path(pl->dv, pl->pid, buf, sizeof(buf));

	if (pl->bridged)
		return; /* the bridge traces it: nothing of its own (bridges_update) */
	if (!pl->wait_att && !pl->wait_paused) {
		err = attach_set(d, pl->dv, path, FFM_PROBE_WAIT, pl->pid, job, &pl->wait_att, false);
		if (err < 0 && alive(pl->pid))
			log_attach_err(d, "the wait probe", pl->dv, pl->pid, err);
	}
	if (api && !pl->api_att) {
		err = attach_set(d, pl->dv, path, api_probes, pl->pid, job, &pl->api_att, false);
		if (err < 0 && alive(pl->pid))
			log_attach_err(d, "API probes", pl->dv, pl->pid, err);
	}
	if (!api && pl->api_att)
		detach_later(d, &pl->api_att, pl->pid);
}

void plink_free(struct ffmd *d, struct plink *pl)
{
	pid_t pid = pl->pid;
	bool others = false;

	sample_end(d, pl);
	for (int i = 0; i < pl->nkeys; i++)
		ffm_collector__set_linked(d->col, pid, pl->keys[i].dev, pl->keys[i].ino, false);
	detach_later(d, &pl->wait_att, pl->pid);
	detach_later(d, &pl->api_att, pl->pid);
	detach_later(d, &pl->rel_att, pl->pid);
	memset(pl, 0, sizeof(*pl));
	for (int i = 0; i < MAX_PLINKS && !others; i++)
		others = d->plinks[i].pid == pid;
	if (!others)
		ffm_collector__set_linked(d->col, pid, 0, 0, false);
}

/*
 * The bridge (per-process scope with uprobe sessions; measured in docs/OVERHEAD.md, "The
 * bridge"). An attach waits for an RCU grace period (5-8 ms, the kernel's registration of the
 * first uprobe after a quiet spell), and a process that maps its driver sooner than that after
 * its exec, or whose exec record waits behind other attaches, was held at its mmap until its
 * own probe was in. So while a job whose processes need the wait probe only is active, each
 * ready driver also carries a system-wide wait probe whose program (bpf/procs.bpf.h,
 * wait_bridge) traces the job processes that have no probes of their own: such a process is
 * traced from its first call, nothing attached for it, never held for it. A process gets probes
 * of its own only when it lives on: when adaptive stage 1 first takes its probe off (nothing to
 * detach: it is declared as having its own, and its next window attaches them), or when the
 * bridge goes; a short process never gets any. The bridge goes BRIDGE_S after the last job start
 * or process younger than BRIDGE_S (while it is on, every process that maps the driver takes a
 * breakpoint at each wait, the sampled processes' included): first closed (BPF no longer lets a
 * process rely on it: the map guard holds a new one as before, a new process of its jobs opens
 * it again), then, once every record sent before that is read, the processes it still traces
 * get their own probes (back to back), and BRIDGE_S later (the waits it saw begin return under
 * it: one in progress when it goes is lost) it is detached; at once where it traced none.
 */

/* Whether job @job's processes may be left to the bridge: they need the wait probe only. */
static bool job_bridgeable(const struct ffmd *d, int job)
{
	return job >= 0 && d->jobs[job].used && d->jobs[job].jr && d->jobs[job].stage == 1 &&
	       job_api_probes(d, job) == 0 && ffm_collector__bridge_ok(d->col);
}

static uint64_t bridge_want(const struct ffmd *d)
{
	uint64_t m = 0;

	for (int i = 0; i < FFM_MAX_JOBS; i++)
		if (job_bridgeable(d, i))
			m |= 1ull << d->jobs[i].slot;
	return m;
}

/* Whether process @pid has probes of its own (a plink the bridge does not trace). */
static bool own_probes(const struct ffmd *d, pid_t pid)
{
	for (int i = 0; i < MAX_PLINKS; i++)
		if (d->plinks[i].pid == pid && !d->plinks[i].bridged)
			return true;
	return false;
}

/* The bridge on driver @dv (one uprobe_multi link of wait_bridge), declared to BPF. */
static int bridge_attach_one(struct ffmd *d, struct drv *dv)
{
	struct ffm_probe_set ps;
	int err = ffm_probe_set__build(&ps, dv->rd.drv, d->apis, FFM_PROBE_WAIT, dv->rd.wait_off,
				       NULL, 0);

	if (err < 0)
		return err;
	for (size_t k = 0; k < ps.n; k++)
		ps.p[k].bridge = true;
	err = ps.n ? ffm_collector__attach(d->col, dv->path, -1, ps.p, ps.n, &dv->bridge_att) :
		     -ENOENT;
	ffm_probe_set__release(&ps);
	if (!err)
		err = ffm_collector__driver_bridged(d->col, ffm_kernel_dev(dv->dev), dv->ino, true);
	if (err < 0)
		dv->bridge_att = ffm_attachment__free(dv->bridge_att);
	return err;
}

/* Attach the bridge to each ready driver without it, back to back (an attach right after
 * another shares its grace period: tens of us, not ms); job @job pays the time. True when every
 * ready driver has it. */
static bool bridges_attach(struct ffmd *d, int job)
{
	uint64_t t0 = ffm_now_ns();
	bool all = true, any = false;

	for (int i = 0; i < MAX_DRIVERS; i++) {
		struct drv *dv = &d->drvs[i];
		int err;

		if (!dv->used || dv->state != DRV_READY || dv->bridge_att)
			continue;
		if ((err = bridge_attach_one(d, dv)) < 0) {
			log_attach_err(d, "the bridge", dv, -1, err);
			all = false;
			continue;
		}
		any = true;
		d->bridge.attaches++;
		log_info("bridge attached to %s", dv->path);
	}
	if (any)
		ffm_overhead_add(job_overhead(d, job), FFM_OVERHEAD_ATTACH, ffm_now_ns() - t0);
	if (!all)
		d->bridge.failed = ffm_now_s();
	return all;
}

/* The bridge on every ready driver, serving the jobs that want it (@job: the one that asked,
 * which pays the attach). A refused attach is not tried again for LINGER_S. */
static void bridges_open(struct ffmd *d, int job)
{
	bool all;

	if (d->bridge.failed && ffm_now_s() - d->bridge.failed < LINGER_S) {
		/* Not on every driver: nothing may rely on it (a fork's child, a new mapper). */
		if (d->bridge.open)
			ffm_collector__bridge_set(d->col, d->bridge.slots, d->bridge.open = 0);
		return;
	}
	d->bridge.failed = 0;
	all = bridges_attach(d, job);
	d->bridge.slots = bridge_want(d);
	d->bridge.open = all ? d->bridge.slots : 0;
	d->bridge.closing = d->bridge.draining = 0;
	ffm_collector__bridge_set(d->col, d->bridge.slots, d->bridge.open);
}

/* Where @pid is in the bridge's refused processes (bridge_refuse), -1: not there. */
static int refused_at(const struct ffmd *d, pid_t pid)
{
	for (unsigned i = 0; pid && i < (sizeof(d->bridge.refused) / sizeof(d->bridge.refused[0])); i++)
		if (d->bridge.refused[i] == pid)
			return (int)i;
	return -1;
}

/* Refused process @k goes (it exited, or a newer one takes its place): its {pid, 0, 0} in BPF
 * with it, unless probes of its own hold it (their end clears it). */
static void forget_refused(struct ffmd *d, int k)
{
	pid_t pid = d->bridge.refused[k];

	d->bridge.refused[k] = 0;
	for (int i = 0; i < MAX_PLINKS; i++)
		if (d->plinks[i].pid == pid)
			return;
	ffm_collector__set_linked(d->col, pid, 0, 0, false);
}

/* Whether process @pid of job @job, which maps or will map @dv, is left to the bridge: its job
 * needs the wait probe only, it has no probes of its own, and the bridge is (now) open. */
static bool bridge_takes(struct ffmd *d, pid_t pid, int job, const struct drv *dv)
{
	uint64_t bit;

	if (!job_bridgeable(d, job) || own_probes(d, pid) || refused_at(d, pid) >= 0)
		return false;
	bit = 1ull << d->jobs[job].slot;
	d->bridge.busy = ffm_now_s();
	if (!(d->bridge.open & bit) || !dv->bridge_att)
		bridges_open(d, job);
	return (d->bridge.open & bit) && dv->bridge_att;
}

/*
 * Bridged process @pl gets probes of its own: its wait probe (@attach; else none yet, as if the
 * sampler had just taken it off), and what its job needs; then {pid, 0, 0}, after which the
 * bridge leaves it alone. A wait it is inside meanwhile is recorded once (docs/BPF.md, "The
 * bridge"); link_epoch makes BPF forget one whose return goes with the bridge. On a refused
 * attach it stays the bridge's. True once it has its own.
 */
static bool plink_own(struct ffmd *d, struct plink *pl, bool attach)
{
	if (!pl->bridged)
		return true;
	pl->bridged = false;
	pl->wait_paused = !attach;
	plink_sync(d, pl);
	if (!pl->wait_att && !pl->wait_paused) {
		pl->bridged = true;
		return false;
	}
	ffm_collector__set_linked(d->col, pl->pid, 0, 0, true);
	plink_key(d, pl, ffm_kernel_dev(pl->dv->dev), pl->dv->ino);
	ffm_collector__link_epoch(d->col, pl->pid);
	return true;
}

/* Give process @pid (mapping usable driver @dv) its own probes, if it has none there yet; or,
 * where the bridge serves its job, leave it to the bridge (bridge_takes). */
struct plink *link_process(struct ffmd *d, pid_t pid, struct drv *dv)
{
	struct plink *pl = plink_find(d, pid, dv);
	int job = job_of_pid(d, pid);
	bool bridged;

	if (pl) {
		/* Linked before its job was made (a rule's process): what its stage needs now. */
		plink_sync(d, pl);
		return pl;
	}
	for (int i = 0; i < MAX_PLINKS && !pl; i++)
		if (!d->plinks[i].pid)
			pl = &d->plinks[i];
	if (!pl) {
		log_warn("more than %d processes with probes; process %d is not measured", MAX_PLINKS, pid);
		return NULL;
	}
	bridged = bridge_takes(d, pid, job, dv); /* before @pl is its: it has none of its own */
	pl->pid = pid;
	pl->start = proc_start_time(pid);
	pl->dv = dv;
	pl->since = ffm_now_s();
	if (bridged) {
		pl->bridged = true;
		d->jobs[job].bridged++;
		return pl;
	}
	plink_sync(d, pl);
	if (!pl->wait_att) {
		plink_free(d, pl);
		return NULL;
	}
	ffm_collector__set_linked(d->col, pid, 0, 0, true);
	plink_key(d, pl, ffm_kernel_dev(dv->dev), dv->ino);
	return pl;
}

void bridge_refuse(struct ffmd *d, pid_t pid)
{
	int job = job_of_pid(d, pid);
	unsigned k;

	if (job < 0 || !job_bridgeable(d, job) || refused_at(d, pid) >= 0)
		return;
	k = d->bridge.refused_next++ % (sizeof(d->bridge.refused) / sizeof(d->bridge.refused[0]));
	if (d->bridge.refused[k])
		forget_refused(d, (int)k);
	d->bridge.refused[k] = pid;
	/* as if it had probes of its own: the bridge skips it, the map guard stops it */
	ffm_collector__set_linked(d->col, pid, 0, 0, true);
	log_info("process %d: its driver could not be looked up now; it is held at its mmap of a "
		 "driver as without the bridge", pid);
}

void plinks_drop_pid(struct ffmd *d, pid_t pid)
{
	int k = refused_at(d, pid);

	if (k >= 0)
		forget_refused(d, k);
	for (int i = 0; i < MAX_PLINKS; i++)
		if (d->plinks[i].pid == pid)
			plink_free(d, &d->plinks[i]);
}

/* A sampled process's context-release probes (once): where its work ends, the span's end
 * (adaptive.c, sample_release). Without them the span runs to the process's exit. */
static void release_probes(struct ffmd *d, struct plink *pl)
{
	char buf[PATH_MAX];
	int err;

	if (pl->rel_att || pl->rel_tried)
		return;
	pl->rel_tried = true;
	err = attach_set(d, pl->dv, plink_path(pl->dv, pl->pid, buf, sizeof(buf)), FFM_PROBE_CTX_END,
			 pl->pid, -1, &pl->rel_att, true);
	if (err < 0 && err != -ENOENT && alive(pl->pid))
		log_attach_err(d, "the context-release probes", pl->dv, pl->pid, err);
}

/*
 * Adaptive stage 1 (adaptive.c decides): a window ends, the probe goes to the detacher (the
 * process runs on meanwhile, and BPF forgets a wait it was inside, see ffm_proc.link_epoch); a
 * window begins, the probe is attached here, on the loop (milliseconds, as for a new process).
 */
int plinks_sample_tick(struct ffmd *d)
{
	double now = ffm_now_s();
	int n = 0;

	for (int i = 0; i < MAX_PLINKS; i++) {
		struct plink *pl = &d->plinks[i];
		char buf[PATH_MAX];
		int job, err;
		double t;

		if (!pl->pid || !pl->smp)
			continue;
		n++;
		switch (sample_tick(d, pl, now)) {
		case FFM_SAMPLER_DETACH:
			/* Traced by the bridge: its probe is "taken off" by declaring it has
			 * probes of its own (none yet: the next window attaches them). */
			if (pl->bridged)
				plink_own(d, pl, false);
			detach_later(d, &pl->wait_att, pl->pid);
			pl->wait_paused = true;
			release_probes(d, pl);
			break;
		case FFM_SAMPLER_ATTACH:
			job = job_of_pid(d, pl->pid);
			t = ffm_now_s();
			err = pl->wait_att ? 0 :
			      attach_set(d, pl->dv, plink_path(pl->dv, pl->pid, buf, sizeof(buf)),
					 FFM_PROBE_WAIT, pl->pid, job, &pl->wait_att, true);
			if (err < 0 && alive(pl->pid))
				log_err("failed to put the wait probe back on %s for process %d: %s",
					pl->dv->path, pl->pid, strerror(-err));
			d->att.sum_s += ffm_now_s() - t;
			d->att.count++;
			pl->wait_paused = err < 0;
			sample_attached(d, pl, err == 0);
			break;
		default:
			break;
		}
	}
	return n;
}

/* After jobs changed: processes that left their jobs (or are gone) lose their probes; the
 * others get what their job's stage needs. */
static void plinks_update(struct ffmd *d)
{
	for (int i = 0; i < MAX_PLINKS; i++) {
		struct plink *pl = &d->plinks[i];

		if (!pl->pid)
			continue;
		if (job_of_pid(d, pl->pid) == -2 || proc_start_time(pl->pid) != pl->start)
			plink_free(d, pl);
		else if (pl->bridged && !job_bridgeable(d, job_of_pid(d, pl->pid)))
			plink_own(d, pl, true); /* its job needs more than the bridge gives */
		else
			plink_sync(d, pl);
	}
}

/* The bridge goes: cleared in BPF (nothing relies on it: bridges_update closed it first),
 * each driver's link to the detacher. */
static void bridges_detach(struct ffmd *d)
{
	d->bridge.slots = d->bridge.open = 0;
	d->bridge.closing = d->bridge.draining = 0;
	ffm_collector__bridge_set(d->col, 0, 0);
	for (int i = 0; i < MAX_DRIVERS; i++) {
		struct drv *dv = &d->drvs[i];

		if (!dv->bridge_att)
			continue;
		ffm_collector__driver_bridged(d->col, ffm_kernel_dev(dv->dev), dv->ino, false);
		detach_later(d, &dv->bridge_att, 0);
		d->bridge.detaches++;
		log_info("bridge taken off %s", dv->path);
	}
}

/* Whether a bridged process is younger than BRIDGE_S (the bridge stays for it); with @own,
 * every bridged process gets probes of its own first (back to back: one grace period for all),
 * and the answer is whether some could not. */
static bool bridged_left(struct ffmd *d, double t, bool own)
{
	bool left = false;

	for (int i = 0; i < MAX_PLINKS; i++) {
		struct plink *pl = &d->plinks[i];

		if (!pl->pid || !pl->bridged)
			continue;
		if (own ? !plink_own(d, pl, true) : t - pl->since < BRIDGE_S)
			left = true;
	}
	return left;
}

static bool any_bridged(const struct ffmd *d)
{
	for (int i = 0; i < MAX_PLINKS; i++)
		if (d->plinks[i].pid && d->plinks[i].bridged)
			return true;
	return false;
}

void bridges_update(struct ffmd *d, bool loop)
{
	uint64_t want;
	double t = ffm_now_s();
	bool up = false, missing = false;

	if (!ffm_collector__bridge_ok(d->col))
		return;
	want = bridge_want(d);
	if (bridged_left(d, t, false))
		d->bridge.busy = t;
	for (int i = 0; i < FFM_MAX_JOBS; i++)
		if (job_bridgeable(d, i) && !d->jobs[i].bridge_seen) {
			d->jobs[i].bridge_seen = true;
			d->bridge.busy = t; /* a job starts: opened for it (its processes come) */
			bridges_open(d, i);
		}
	for (int i = 0; i < MAX_DRIVERS; i++) {
		up |= d->drvs[i].bridge_att != NULL;
		missing |= d->drvs[i].used && d->drvs[i].state == DRV_READY && !d->drvs[i].bridge_att;
	}
	if (want && t - d->bridge.busy < BRIDGE_S) {
		if (up && (d->bridge.open != want || missing))
			bridges_open(d, -1); /* a job ended, or a new driver is ready */
		return;
	}
	if (!up) {
		d->bridge.slots = d->bridge.open = 0;
		return;
	}
	if (!d->bridge.closing) {
		d->bridge.open = 0;
		d->bridge.closing = t;
		ffm_collector__bridge_set(d->col, d->bridge.slots, 0);
		return;
	}
	if (!loop)
		return; /* maybe inside a record's handling: no drain from there */
	if (d->bridge.draining) {
		/* The waits the bridge saw begin return under it: BRIDGE_S for them to end. */
		if (t - d->bridge.draining >= BRIDGE_S)
			bridges_detach(d);
		return;
	}
	/* Closed: every record sent before is read (a process that mapped the driver while it was
	 * open and is seen only now opens it again), the processes it still traces get probes of
	 * their own; it goes once their waits in progress are over. */
	ffm_collector__drain(d->col);
	if (!d->bridge.closing)
		return; /* opened again by a process seen late */
	if (!any_bridged(d))
		bridges_detach(d); /* its processes had their own long ago: no wait of its open */
	else if (!bridged_left(d, t, true))
		d->bridge.draining = t;
}

/*
 * Bring every driver's attachments in line with the active jobs. Probes are attached as soon
 * as a job needs them. The wait probe is released only after LINGER_S without a job: every
 * uprobe detach waits for an RCU grace period in the kernel (tens of ms each, seconds for a
 * stage-2 set on a busy machine), which a scheduler starting job after job would pay each
 * time; a probe whose job has gone costs other processes one hash lookup per call. The
 * stage-2 set goes with its last job (see release_api).
 */
void update_attachments(struct ffmd *d)
{
	bool jobs = any_job(d);
	uint64_t detail = detail_slots(d);
	double t = ffm_now_s();
	bool release_all = !jobs && d->att.idle_since && t - d->att.idle_since >= LINGER_S;
	/* API probes do not linger: with entry/return pairs (kernels before uprobe sessions)
	 * their return probes put the kernel's trampoline address into the stacks that stage-1
	 * jobs walk (bpf/ffm.bpf.c reads it as the call site). */
	bool release_api = !detail;
	bool reattach = detail && !names_covered(d);

	if (ffm_collector__per_process(d->col)) {
		plinks_update(d);
		bridges_update(d, false);
		return;
	}
	d->att.idle_since = jobs ? 0 : d->att.idle_since ? d->att.idle_since : t;
	d->att.detail_idle_since = detail ? 0 : d->att.detail_idle_since ? d->att.detail_idle_since : t;
	for (int i = 0; i < MAX_DRIVERS; i++) {
		struct drv *dv = &d->drvs[i];
		int err;

		if (!dv->used || dv->state != DRV_READY)
			continue;
		if (release_all) {
			dv->api_att = ffm_attachment__free(dv->api_att);
			dv->wait_att = ffm_attachment__free(dv->wait_att);
			continue;
		}
		if (release_api)
			dv->api_att = ffm_attachment__free(dv->api_att);
		if (jobs && !dv->wait_att) {
			err = attach_set(d, dv, NULL, FFM_PROBE_WAIT, -1, -1, &dv->wait_att, false);
			if (err < 0)
				log_attach_err(d, "the wait probe", dv, -1, err);
		}
		/* A job that needs stage-2 probes not attached (none yet, or a stage-1 list with
		 * other functions): attach the new set before dropping the old. */
		if (detail && (!dv->api_att || reattach)) {
			struct ffm_attachment *n = NULL;

			err = attach_set(d, dv, NULL, API_PROBES, -1, -1, &n, false);
			if (err < 0) {
				log_attach_err(d, "API probes", dv, -1, err);
			} else {
				ffm_attachment__free(dv->api_att);
				dv->api_att = n;
			}
		}
	}
	if (detail)
		remember_names(d);
}

bool driver_in_use(const struct ffmd *d, const struct drv *dv)
{
	if (dv->wait_att || dv->api_att || dv->bridge_att)
		return true;
	for (int i = 0; i < MAX_PLINKS; i++)
		if (d->plinks[i].pid && d->plinks[i].dv == dv)
			return true;
	return false;
}

/* Each tick: the probes no job has needed for LINGER_S come off (update_attachments). */
void attachments_linger(struct ffmd *d, double t)
{
	if ((d->att.idle_since && t - d->att.idle_since >= LINGER_S) ||
	    (d->att.detail_idle_since && t - d->att.detail_idle_since >= LINGER_S))
		update_attachments(d);
}

/* Adaptive stage 1's attaches: the mean time one took, in ms (0: none yet). */
double attach_mean_ms(const struct ffmd *d)
{
	return d->att.count ? 1e3 * d->att.sum_s / (double)d->att.count : 0;
}

void bridge_counts(const struct ffmd *d, struct bridge_counts *bc)
{
	bc->open = d->bridge.open != 0;
	bc->jobs = __builtin_popcountll(d->bridge.slots);
	bc->attaches = d->bridge.attaches;
	bc->detaches = d->bridge.detaches;
}

/* At ffmd's end, once nothing is attached: what the attachments kept. */
void attachments_free(struct ffmd *d)
{
	for (int i = 0; i < d->att.n; i++)
		free(d->att.names[i]);
	d->att.n = 0;
}
