/* SPDX-License-Identifier: MIT */
/*
 * Holds: job processes kept stopped (SIGSTOP, or stopped by BPF's map guard or at a fork) until
 * their probes are in place, so that their first driver calls are measured. Owns the list of
 * holds, the holds file that lets a later ffmd continue them should this one die (holds_write),
 * the SIGCONT at release, and the watch over parents that stop themselves on seeing a child
 * stop (parents_check). What a hold waits for is the drivers' business (drivers.c releases the
 * holds waiting for a driver once it is ready); a child stopped at its fork is given its
 * parent's probes here (on_fork_stopped, with links.c), then let go.
 *
 * Runs on the loop, which waits for nothing here: no hold outlasts HOLD_MAX_S (holds_expire,
 * each round of the loop); a fork's stop not yet seen is looked for at each round, for
 * FORK_STOP_S at most (forks_check; a process that is continued before it stops costs the loop
 * nothing).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "daemon/ffmd_int.h"
#include "daemon/jobrun.h"
#include "daemon/log.h"
#include "store/ffm_store.h"

#define HOLD_MAX_S 30.0        /* no process stays held longer, whatever ffmd waits for */
#define PARENT_WATCH_S 2.0     /* how long a held process's parent is watched after the hold */
#define FORK_STOP_S 0.5        /* how long a forked child's stop is looked for */

/*
 * Holds. A process ffmd keeps stopped while its driver is made ready must not stay stopped if
 * ffmd dies meanwhile: each hold is listed in <state_dir>/ffmd-held ("PID STARTTIME" lines),
 * and a starting ffmd sends SIGCONT to every process listed there that is still the same one
 * (start time) and still stopped. No fsync: the list has to outlive ffmd, not the machine,
 * whose crash takes the process along. A process the map guard stopped is listed once ffmd
 * reads its EXEC or MAP record; a crash in the milliseconds before that leaves it stopped.
 */
static void holds_write(struct ffmd *d)
{
	char tmp[sizeof(d->hl.path) + 8];
	FILE *f;

	d->hl.dirty = false;
	if (!d->hl.path[0])
		return;
	if (!d->hl.n) {
		unlink(d->hl.path);
		return;
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp", d->hl.path);
	f = fopen(tmp, "we");
	if (!f) {
		log_err("cannot write %s: %s; a process held now stays stopped if ffmd dies", tmp,
			strerror(errno));
		return;
	}
	for (int i = 0; i < d->hl.n; i++)
		fprintf(f, "%d %llu\n", d->hl.list[i].pid, d->hl.list[i].start);
	if (fclose(f) != 0 || rename(tmp, d->hl.path) < 0)
		log_err("cannot replace %s: %s", d->hl.path, strerror(errno));
}

struct hold *hold_find(struct ffmd *d, pid_t pid)
{
	for (int i = 0; i < d->hl.n; i++)
		if (d->hl.list[i].pid == pid)
			return &d->hl.list[i];
	return NULL;
}

/*
 * Hold @pid: list it, and stop it unless it is stopped already (@bpf_stopped: BPF stopped it,
 * so it gets SIGCONT at release; stopped by someone else, it is left stopped). NULL when it is
 * not held: the list is full (a process BPF stopped is then let go at once: unmeasured beats
 * stuck), or its parent waits for stopped children and would see the stop.
 */
struct hold *hold(struct ffmd *d, pid_t pid, bool bpf_stopped)
{
	struct hold *h = hold_find(d, pid);

	if (!h) {
		unsigned long long t = 0;
		pid_t ppid = 0;
		char st = 0;
		int j;

		if (proc_stat(pid, &st, &ppid, &t) < 0)
			t = 0; /* gone: ppid stays 0 */
		if (!bpf_stopped && ppid && st != 'T' && st != 't' && waits_for_stops(ppid))
			return NULL;

		if (d->hl.n == MAX_HOLDS) {
			log_warn("more than %d processes held; process %d is not (its first calls may go "
				 "unmeasured)", MAX_HOLDS, pid);
			if (bpf_stopped)
				kill(pid, SIGCONT);
			return NULL;
		}
		h = &d->hl.list[d->hl.n++];
		*h = (struct hold){ .pid = pid, .start = t, .ppid = ppid, .since = ffm_now_s() };
		d->hl.total++;
		if ((j = job_of_pid(d, pid)) >= 0)
			d->jobs[j].held++;
		/* A process BPF stopped is stopped already, and most are let go within this round of
		 * records: written at the round's end (holds_expire) if still held, not while it
		 * waits (0.3-0.6 ms a write on the development VM, most of ffmd's share of a hold). */
		if (bpf_stopped)
			d->hl.dirty = true;
		else
			holds_write(d);
	}
	if (bpf_stopped) {
		h->cont = true;
	} else if (!h->cont) {
		char st = proc_state(pid);

		/* Listed for the wait guard before the stop, as BPF's own stops are. */
		if (st && st != 'T' && st != 't') {
			ffm_collector__set_held(d->col, pid, h->ppid, true);
			h->cont = kill(pid, SIGSTOP) == 0;
			if (!h->cont)
				ffm_collector__set_held(d->col, pid, 0, false);
		}
	}
	return h;
}

/* Watch @h's parent for a while: it may stop itself on seeing the hold (parents_check). */
static void parent_watch(struct ffmd *d, const struct hold *h)
{
	unsigned long long start;
	char st;

	if (h->ppid <= 1 || proc_stat(h->ppid, &st, NULL, &start) < 0)
		return;
	for (int i = 0; i < MAX_HOLDS; i++)
		if (!d->hl.parents[i].pid || d->hl.parents[i].pid == h->ppid) {
			d->hl.parents[i] = (struct parent_watch){ h->ppid, start, ffm_now_s() + PARENT_WATCH_S };
			return;
		}
}

/*
 * A parent that waits for its children with WUNTRACED sees a held child stop. su, runuser and
 * sudo then stop themselves until their own parent continues them, which in a batch job nobody
 * does: so a watched parent found stopped within PARENT_WATCH_S of the hold's end is continued
 * (it then continues its child, already running, and waits again). Whether it was stopped
 * before the hold cannot be told apart (it may have stopped before ffmd read the record of
 * the stop): a parent someone else stopped in those seconds is continued too, the lesser harm.
 */
void parents_check(struct ffmd *d)
{
	double t = ffm_now_s();

	for (int i = 0; i < MAX_HOLDS; i++) {
		struct parent_watch *w = &d->hl.parents[i];
		unsigned long long start;
		char st;

		if (!w->pid)
			continue;
		if (proc_stat(w->pid, &st, NULL, &start) < 0 || start != w->start) {
			w->pid = 0;
		} else if (st == 'T' || st == 't') {
			if (st == 'T' && kill(w->pid, SIGCONT) == 0)
				log_info("process %d stopped itself when ffm held its child: continued", w->pid);
			w->pid = 0;
		} else if (t > w->until) {
			w->pid = 0;
		}
	}
}

/* End the hold of @pid: off the list, SIGCONT if one of ffm's stopped it. */
void hold_release(struct ffmd *d, pid_t pid)
{
	struct hold *h = hold_find(d, pid);
	int j;

	if (!h)
		return;
	if (h->cont && ffm_collector__set_held(d->col, pid, 0, false) == 0 &&
	    ffm_collector__wait_guard(d->col) && (j = job_of_pid(d, pid)) >= 0) {
		/* Its parent started waiting for stopped children, and the wait guard let it go
		 * before the parent could see it: it ran on before its probes were there. */
		log_info("process %d was let go early: its parent waited for stopped children", pid);
		d->jobs[j].not_held++;
		if (h->wait)
			ffm_jobrun__set_interrupted(d->jobs[j].jr);
	}
	if (h->cont) {
		uint64_t t = ffm_now_ns(), from = h->stop_ns ? h->stop_ns : (uint64_t)(h->since * 1e9);

		kill(pid, SIGCONT);
		/* Its price: from its stop (BPF's, or ffmd's) to the SIGCONT. */
		overhead_charge(d, pid, FFM_OVERHEAD_HELD, t > from ? t - from : 0);
		parent_watch(d, h);
	}
	*h = d->hl.list[--d->hl.n];
	d->hl.dirty = true; /* after its SIGCONT: at the round's end */
}

static void fork_finish(struct ffmd *d, pid_t pid, pid_t ppid);

static bool stopped_or_gone(pid_t pid)
{
	char st = proc_state(pid);

	return st == 'T' || st == 't' || !alive(pid);
}

/* The forked children whose stop was not seen yet (on_fork_stopped): stopped now, gone, or
 * looked for long enough, each gets its probes and is let go. */
static void forks_check(struct ffmd *d)
{
	double t = ffm_now_s();

	/* Downwards: a release moves the last hold, one already looked at, into its place. */
	for (int i = d->hl.n - 1; i >= 0; i--) {
		struct hold *h = &d->hl.list[i];
		pid_t pid = h->pid, ppid = h->fork_parent;

		if (!ppid || (!stopped_or_gone(pid) && t < h->fork_until))
			continue;
		h->fork_parent = 0;
		if (!stopped_or_gone(pid))
			log_warn("process %d did not stop at its fork; its first calls may go unmeasured",
				 pid);
		fork_finish(d, pid, ppid);
	}
}

bool forks_waiting(const struct ffmd *d)
{
	for (int i = 0; i < d->hl.n; i++)
		if (d->hl.list[i].fork_parent)
			return true;
	return false;
}

/* Whatever a hold waits for, it ends after HOLD_MAX_S: no process stays stopped for ffm. Then
 * the holds file, if the round's holds changed it. */
void holds_expire(struct ffmd *d)
{
	double t = ffm_now_s();

	forks_check(d);
	for (int i = d->hl.n - 1; i >= 0; i--)
		if (t - d->hl.list[i].since > HOLD_MAX_S) {
			log_warn("process %d held for %.0f s%s: let go (its calls may go unmeasured)",
				 d->hl.list[i].pid, t - d->hl.list[i].since,
				 d->hl.list[i].wait ? " waiting for its driver" : "");
			hold_release(d, d->hl.list[i].pid);
		}
	if (d->hl.dirty)
		holds_write(d);
}

/* At start: let go the processes a previous ffmd held when it died. */
void holds_resume(struct ffmd *d)
{
	unsigned long long start;
	FILE *f = fopen(d->hl.path, "re");
	int pid;

	if (!f)
		return;
	while (fscanf(f, "%d %llu", &pid, &start) == 2) {
		char st = proc_state(pid);

		if (pid <= 0 || !start || proc_start_time(pid) != start || (st != 'T' && st != 't'))
			continue;
		kill(pid, SIGCONT);
		log_warn("process %d was held by an ffmd that died: let go (its first driver calls may "
			 "go unmeasured)", pid);
	}
	fclose(f);
	unlink(d->hl.path);
}

/* A child stopped at its fork (or not, or gone): its parent's probes, then let go. */
static void fork_finish(struct ffmd *d, pid_t pid, pid_t ppid)
{
	for (int i = 0; i < MAX_PLINKS; i++) {
		struct plink *parent = &d->plinks[i], *pl;

		if (parent->pid != ppid || !(pl = link_process(d, pid, parent->dv)))
			continue;
		for (int k = 0; k < parent->nkeys; k++)
			plink_key(d, pl, parent->keys[k].dev, parent->keys[k].ino);
	}
	hold_release(d, pid);
}

/*
 * Per-process scope: a process with probes forked, and BPF stopped the child before it ran (see
 * FFM_PROC_STOPPED): it shares the parent's driver mappings, not its probes. Give it its own,
 * then let it go, whatever became of its job. Its probes are attached once its stop is seen,
 * mostly at once; else it stays held and the loop looks again at its next rounds
 * (forks_check), never waits for it.
 */
void on_fork_stopped(struct ffmd *d, const struct ffm_rec_proc *p)
{
	pid_t pid = (pid_t)p->hdr.tgid;
	struct hold *h = hold(d, pid, true);

	if (h && !h->stop_ns)
		h->stop_ns = p->hdr.ts_ns;
	if (h && !stopped_or_gone(pid)) {
		h->fork_parent = (pid_t)p->ppid;
		h->fork_until = ffm_now_s() + FORK_STOP_S;
		return;
	}
	fork_finish(d, pid, (pid_t)p->ppid);
}

/* The holds file of node @host of @state_dir (before holds_resume): <0 if its path is too long. */
int holds_path_set(struct ffmd *d, const char *state_dir, const char *host)
{
	return ffm_state_path(state_dir, FFM_STATE_HOLDS, host, d->hl.path, sizeof(d->hl.path));
}

/* The last hold (in the list's order) waiting for driver @dv, or NULL. */
struct hold *hold_waiting_for(struct ffmd *d, const struct drv *dv)
{
	for (int i = d->hl.n - 1; i >= 0; i--)
		if (d->hl.list[i].wait == dv)
			return &d->hl.list[i];
	return NULL;
}

uint64_t holds_total(const struct ffmd *d)
{
	return d->hl.total;
}

/* At ffmd's end: every hold let go, and the holds file removed. */
void holds_release_all(struct ffmd *d)
{
	while (d->hl.n)
		hold_release(d, d->hl.list[0].pid);
	holds_expire(d); /* none left: the holds file goes */
}
