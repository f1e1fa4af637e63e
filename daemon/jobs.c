/* SPDX-License-Identifier: MIT */
/*
 * A job's life: made from a job_spec (a job-start request, a rule's match, a journal line),
 * given a free BPF slot, its selectors put into BPF's rule maps (a job by request wins a
 * selector over a rule, see selectors_resync), its processes that run already found and
 * tracked, its run begun in the key's store (daemon/jobrun.h); ended by request, when a rule's
 * job's last process exits, or at a clean stop.
 *
 * Restarts. Active jobs are journaled (journal.c). After a crash (the journal still lists jobs)
 * the new ffmd marks each interrupted run ABORTED|PARTIAL and resumes the job under the same id
 * as a new run, with the same selectors; a pid selector whose process is gone (or whose pid was
 * reused: checked by start time) is dropped, and a job with no selector left ends as
 * cancelled. A clean stop (SIGTERM) ends active jobs as aborted runs and leaves an empty
 * journal.
 *
 * At its end a job's store is queued for the publisher (publisher.c: the copy that its owner
 * and other hosts read), once its analysis is stored; until the copy is made the job is in
 * d->copies (a job-end request waits for it, the status names it: control.c).
 *
 * Owns the jobs table, the BPF selectors of jobs and rules, and resuming; not the requests
 * (control.c parses them), the rules (rules.c) nor the drivers of the processes it tracks
 * (drivers.c).
 *
 * What runs where: job_create runs on the loop (a store opened, the processes that run already
 * tracked: a pid's tree from /proc/PID/task/PID/children, a cgroup's from its cgroup.procs,
 * MAX_TRACK_SCAN of them at most, each a few reads of /proc); the whole-/proc scan for the uid
 * and exe selectors of resumed jobs runs only while ffmd starts (journal_resume, before the
 * loop), since BPF finds a new process of those selectors at its exec. selectors_resync, at
 * each job's end, is a stat() per selector of the rules and jobs. ffmd never tracks itself
 * nor the programs it runs (track_one).
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "daemon/analyzer.h"
#include "daemon/ffmd_int.h"
#include "daemon/jobrun.h"
#include "daemon/metrics.h"
#include "daemon/log.h"
#include "store/ffm_store.h"
#include "symbols/ffm_driver.h"

/* Processes a job's start finds running in a pid's tree or a cgroup's and tracks, at most:
 * the scan runs on the loop (each process: its /proc entries read, its driver's lookup asked
 * for, which runs off the loop, lookups.c). */
#define MAX_TRACK_SCAN 4096

/* Put process @p into job slot @slot and give it its driver; false when it is gone (its exit
 * came before the tracking and removed nothing, so the entry is removed here). */
static bool track_one(struct ffmd *d, pid_t p, uint32_t slot)
{
	unsigned long long start;
	pid_t ppid = 0;
	char state;

	/* Never ffmd itself nor a program it runs (the calibration probe): a job that holds
	 * them deadlocks the driver it waits for (see ffm_collector_opts.exclude_self). */
	if (p == getpid() || (proc_stat(p, &state, &ppid, &start) == 0 && ppid == getpid()))
		return false;
	ffm_collector__track_pid(d->col, p, slot);
	if (!alive(p)) {
		ffm_collector__untrack_pid(d->col, p);
		return false;
	}
	ensure_driver_for_pid(d, p);
	return true;
}

/* Track @pid and all its descendants (children inherit a job from the moment they fork,
 * but those that exist already must be found in /proc). */
static void track_tree(struct ffmd *d, pid_t root, uint32_t slot)
{
	pid_t queue[MAX_TRACK_SCAN];
	int head = 0, tail = 0;

	queue[tail++] = root;
	while (head < tail) {
		pid_t p = queue[head++];
		char path[64], buf[4096];
		FILE *f;

		if (!track_one(d, p, slot))
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%d/children", p, p);
		f = fopen(path, "re");
		if (!f)
			continue;
		while (fscanf(f, "%4095s", buf) == 1 && tail < MAX_TRACK_SCAN) {
			pid_t c;

			if (parse_pid(buf, &c) == 0)
				queue[tail++] = c;
		}
		fclose(f);
	}
}

/* Track the processes of cgroup @dir and of the cgroups below it (16 levels down at most), at
 * most *@left of them: *@left ends -1 when some were left out. */
static void track_cgroup_procs(struct ffmd *d, const char *dir, uint32_t slot, int depth, int *left)
{
	char path[PATH_MAX], line[64];
	struct dirent *de;
	FILE *f;
	DIR *dh;

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	f = fopen(path, "re");
	if (f) {
		while (*left >= 0 && fgets(line, sizeof(line), f)) {
			pid_t p;

			line[strcspn(line, "\n")] = 0;
			if (parse_pid(line, &p) < 0)
				continue;
			if (!*left) {
				*left = -1;
				break;
			}
			(*left)--;
			track_one(d, p, slot);
		}
		fclose(f);
	}
	if (depth > 16 || *left < 0 || !(dh = opendir(dir)))
		return;
	while (*left >= 0 && (de = readdir(dh))) {
		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		track_cgroup_procs(d, path, slot, depth + 1, left);
	}
	closedir(dh);
}

/*
 * A job resumed after a restart: its processes that match a uid or exe selector run already, and
 * BPF matches only at exec. Find them in /proc (ffmd's own process aside).
 */
static void track_matching_procs(struct ffmd *d, const struct ffm_selector *sel, uint32_t slot)
{
	struct stat want = {}, st;
	struct dirent *de;
	uid_t uid = 0;
	DIR *dh;

	if (sel->type == FFM_SEL_UID)
		uid = (uid_t)strtoul(sel->value, NULL, 10);
	else if (sel->type != FFM_SEL_EXE || stat(sel->value, &want) < 0)
		return;
	if (!(dh = opendir("/proc")))
		return;
	while ((de = readdir(dh))) {
		char path[300];
		pid_t p;

		if (parse_pid(de->d_name, &p) < 0 || p == getpid())
			continue;
		snprintf(path, sizeof(path), "/proc/%d%s", p, sel->type == FFM_SEL_EXE ? "/exe" : "");
		if (stat(path, &st) < 0)
			continue;
		if (sel->type == FFM_SEL_UID ? st.st_uid != uid :
					       st.st_dev != want.st_dev || st.st_ino != want.st_ino)
			continue;
		track_one(d, p, slot);
	}
	closedir(dh);
}

int selector_rule(const struct ffm_selector *s, struct ffm_rule *r)
{
	struct stat st;

	memset(r, 0, sizeof(*r));
	switch (s->type) {
	case FFM_SEL_UID: {
		pid_t u;

		if (parse_pid(s->value, &u) < 0 && strcmp(s->value, "0"))
			return -EINVAL;
		r->type = FFM_RULE_UID;
		r->id = strcmp(s->value, "0") ? (uint64_t)u : 0;
		return 1;
	}
	case FFM_SEL_CGROUP:
		/* The cgroup v2 id is the inode number of its directory. */
		if (stat(s->value, &st) < 0)
			return -errno;
		if (!S_ISDIR(st.st_mode))
			return -ENOTDIR;
		r->type = FFM_RULE_CGROUP;
		r->id = st.st_ino;
		return 1;
	case FFM_SEL_EXE:
		if (stat(s->value, &st) < 0)
			return -errno;
		r->type = FFM_RULE_EXE;
		r->dev = st.st_dev;
		r->ino = st.st_ino;
		return 1;
	case FFM_SEL_PID:
		return 0;
	}
	return -EINVAL;
}

/*
 * BPF has one slot per uid, cgroup and executable. When jobs or rules share a selector, a
 * job started by request wins over a rule (the scheduler named it), and the newest wins among
 * equals; when the winner goes, the selector passes back to the others.
 */
static void selectors_resync(struct ffmd *d)
{
	for (int i = 0; i < FFM_MAX_RULES; i++)
		for (int k = 0; d->rules[i].used && k < d->rules[i].r.nsel; k++) {
			struct ffm_rule r;

			if (selector_rule(&d->rules[i].r.sel[k], &r) > 0 &&
			    ffm_collector__rule_slot(d->col, &r) == -ENOENT)
				ffm_collector__add_rule(d->col, &r, d->rules[i].slot);
		}
	for (int i = 0; i < FFM_MAX_JOBS; i++)
		for (int k = 0; d->jobs[i].used && !d->jobs[i].rule[0] && k < d->jobs[i].nsel; k++) {
			struct ffm_rule r;
			int cur;

			if (selector_rule(&d->jobs[i].sel[k], &r) <= 0)
				continue;
			cur = ffm_collector__rule_slot(d->col, &r);
			if (cur == -ENOENT || (cur >= 0 && !d->jobs[cur].used))
				ffm_collector__add_rule(d->col, &r, d->jobs[i].slot);
		}
}

/* Remove the BPF rules of @sel that still point at @slot, then hand them to whoever else has
 * them. */
void selectors_drop(struct ffmd *d, const struct ffm_selector *sel, int nsel, uint32_t slot)
{
	for (int i = 0; i < nsel; i++) {
		struct ffm_rule r;

		if (selector_rule(&sel[i], &r) > 0 && ffm_collector__rule_slot(d->col, &r) == (int)slot)
			ffm_collector__del_rule(d->col, &r);
	}
	selectors_resync(d);
}

static void job_release(struct ffmd *d, struct job *j)
{
	pid_t pids[1024];
	int n = ffm_collector__job_pids(d->col, j->slot, pids, 1024);

	for (int i = 0; i < n; i++)
		ffm_collector__untrack_pid(d->col, pids[i]);
	/* Out of selectors_resync's sight first: a job still in use would take back the selectors
	 * it just dropped (it wins over a rule), and the rule they pass to never matched again. */
	j->used = false;
	selectors_drop(d, j->sel, j->rule[0] ? 0 : j->nsel, j->slot);
	if (j->jr) /* NULL: its run, ending, is the jobrun's own (job_end) */
		ffm_jobrun__disarm(j->jr);
	routes_drop_job(d, (int)(j - d->jobs));
	j->jr = ffm_jobrun__free(j->jr);
}

int job_slot_free(const struct ffmd *d)
{
	for (int i = 0; i < FFM_MAX_JOBS; i++)
		if (!d->jobs[i].used && !(d->rule_slots & (1ull << i)))
			return i;
	return -1;
}

/* Make @sp a running job: store run, BPF slot, selectors. On failure nothing stays. */
int job_create(struct ffmd *d, const struct job_spec *sp, struct job **ret, const char **msg)
{
	struct ffm_jobrun_opts jo = { .sz = sizeof(jo), .state_dir = d->cfg.state_dir,
				      .override_stage = sp->override_stage, .collector = d->col,
				      .sym = d->sym, .unwinder = d->unwinder, .apis = d->apis,
				      .limits = &d->cfg.limits };
	struct job *j;
	int slot, err;

	*ret = NULL;
	if (job_find(d, sp->id)) {
		*msg = "a job with this id is already active";
		return -EEXIST;
	}
	if (ffm_jobrun__ending(sp->id)) {
		*msg = "a job with this id is still ending: its last stacks are being stored";
		return -EBUSY;
	}
	slot = job_slot_free(d);
	if (slot < 0) {
		*msg = "too many active jobs";
		return -ENOSPC;
	}
	j = &d->jobs[slot];
	memset(j, 0, sizeof(*j));
	j->slot = (uint32_t)slot;
	snprintf(j->id, sizeof(j->id), "%s", sp->id);
	snprintf(j->key, sizeof(j->key), "%s", sp->key);
	snprintf(j->rule, sizeof(j->rule), "%s", sp->rule ? sp->rule : "");
	j->owner = sp->owner;
	j->override_stage = sp->override_stage;
	j->nsel = sp->nsel;
	memcpy(j->sel, sp->sel, sizeof(sp->sel[0]) * (size_t)sp->nsel);
	j->root = sp->root;

	jo.key = j->key;
	jo.job_id = j->id;
	jo.uid = j->owner;
	jo.slot = j->slot;
	/* Running or ending: one connection per store in this process (jobrun.h). */
	jo.store = ffm_jobrun__store_of_key(j->key);
	for (int i = 0; i < MAX_DRIVERS; i++)
		if (d->drvs[i].used && d->drvs[i].state == DRV_READY) {
			jo.driver_path = d->drvs[i].path;
			jo.driver_build_id = ffm_driver__build_id(d->drvs[i].rd.drv);
			jo.wait_off = d->drvs[i].rd.wait_off;
			jo.wait_size = d->drvs[i].rd.wait_size;
			jo.driver_node_model = d->drvs[i].rd.node_model;
			break;
		}
	err = ffm_jobrun__begin(&jo, &j->jr);
	if (err < 0) {
		log_err("job %s: cannot open the store of key %s in %s: %s", j->id, j->key,
			d->cfg.state_dir, ffm_store__strerror(err));
		*msg = "cannot open the job key's store";
		return err;
	}
	j->used = true;
	if (sp->resumed)
		ffm_jobrun__set_interrupted(j->jr); /* it missed what ran while ffmd was down */
	j->stage = ffm_jobrun__plan(j->jr)->stage;
	j->start = ffm_now_s();
	ffm_jobrun__arm(j->jr); /* the stage's flags: stages 3-4 add memory tracing, hashing */
	update_attachments(d);
	for (int i = 0; i < j->nsel; i++) {
		struct ffm_selector *s = &j->sel[i];
		struct ffm_rule r;

		if (s->type == FFM_SEL_PID) {
			pid_t p;

			if (!sp->adopted && parse_pid(s->value, &p) == 0)
				track_tree(d, p, j->slot);
		} else if (!j->rule[0] && selector_rule(s, &r) > 0) {
			ffm_collector__add_rule(d->col, &r, j->slot);
			if (s->type == FFM_SEL_CGROUP) {
				int left = MAX_TRACK_SCAN;

				track_cgroup_procs(d, s->value, j->slot, 0, &left);
				if (left < 0) {
					log_warn("job %s: more than %d processes run in %s already: the others "
						 "are not measured, the run is partial", j->id, MAX_TRACK_SCAN,
						 s->value);
					ffm_jobrun__set_interrupted(j->jr);
				}
			} else if (sp->resumed) {
				track_matching_procs(d, s, j->slot);
			}
		}
	}
	update_attachments(d);
	log_info("job %s started: key %s, stage %d, owner %u, %d selector%s%s%s", j->id, j->key,
		 j->stage, j->owner, j->nsel, j->nsel == 1 ? "" : "s", j->rule[0] ? ", rule " : "", j->rule);
	journal_write(d);
	if (d->metrics) {
		ffm_metrics__job(d->metrics, j->id, j->key, j->owner, j->stage, true);
		metrics_write(d);
	}
	*ret = j;
	return 0;
}

/* The metrics file, rewritten (a failure is logged: the metrics are not the job's data). */
void metrics_write(struct ffmd *d)
{
	int err = d->metrics ? ffm_metrics__write(d->metrics) : 0;

	if (err < 0)
		log_warn("cannot write %s/%s: %s", d->cfg.metrics_dir, FFM_METRICS_FILE, strerror(-err));
}

/* The job's store copied for its readers, by the publisher's thread (publisher.c). */
static uint64_t publish_job(const char *id, const char *path, const char *root)
{
	char why[sizeof(((struct job *)0)->id) + 8];

	snprintf(why, sizeof(why), "job %s", id);
	return publish(path, root, why);
}

static struct pending_copy *copy_find(const struct ffmd *d, const char *id)
{
	for (size_t i = 0; i < sizeof(d->copies) / sizeof(d->copies[0]); i++)
		if (d->copies[i].id[0] && !strcmp(d->copies[i].id, id))
			return (struct pending_copy *)&d->copies[i];
	return NULL;
}

bool copy_pending(const struct ffmd *d, const char *id)
{
	return copy_find(d, id) != NULL;
}

/* Job @id's copy will be made (@ticket: queued; 0: after its analysis). A full table (more
 * jobs ended than analyses and copies can follow) gives an entry up, in turn: that job is then
 * not waited for. */
static void copy_expect(struct ffmd *d, const char *id, uint32_t owner, uint64_t ticket)
{
	static size_t next;
	const size_t n = sizeof(d->copies) / sizeof(d->copies[0]);
	struct pending_copy *c = copy_find(d, id);

	for (size_t i = 0; !c && i < n; i++)
		if (!d->copies[i].id[0])
			c = &d->copies[i];
	if (!c)
		c = &d->copies[next++ % n];
	snprintf(c->id, sizeof(c->id), "%s", id);
	c->owner = owner;
	c->ticket = ticket;
}

const char *copy_at(const struct ffmd *d, size_t i, uint32_t *owner)
{
	if (i >= MAX_COPIES || !d->copies[i].id[0])
		return NULL;
	*owner = d->copies[i].owner;
	return d->copies[i].id;
}

void copies_made(struct ffmd *d, uint64_t ticket)
{
	for (size_t i = 0; i < sizeof(d->copies) / sizeof(d->copies[0]); i++)
		if (d->copies[i].id[0] && d->copies[i].ticket && d->copies[i].ticket <= ticket)
			d->copies[i].id[0] = 0;
}

/* The run's analysis, into the key's store off the loop (daemon/analyzer.h); not as ffmd stops.
 * Whether it was queued: its store is then published once the analysis is in it. */
static bool job_analyse(struct ffmd *d, struct ffm_jobrun *jr)
{
	const char *id = ffm_jobrun__job_id(jr);
	int err;

	if (d->stop || !d->analyzer || d->cfg.analysis_on_read)
		return false; /* analysis = reader: `ffmctl report` computes it on read */
	err = ffm_analyzer__submit(d->analyzer, d->node.root, ffm_jobrun__key(jr),
				   ffm_jobrun__uid(jr), id);
	if (err < 0)
		log_warn("job %s: its analysis is not stored: %s", id,
			 err == -ENOSPC ? "too many analyses wait" : strerror(-err));
	return err >= 0;
}

void analyses_take(struct ffmd *d)
{
	struct ffm_analyzer_result res;
	bool changed = false;

	while (ffm_analyzer__take(d->analyzer, &res) == 0) {
		struct pending_copy *c = copy_find(d, res.job_id);
		uint64_t ticket = 0;

		if (res.path[0]) /* the copy readers open, with the analysis in it */
			ticket = publish_job(res.job_id, res.path, res.root);
		if (c && ticket)
			c->ticket = ticket;
		else if (c) /* no copy comes */
			c->id[0] = 0;
		if (res.err < 0) {
			log_warn("job %s: cannot store its analysis: %s", res.job_id,
				 ffm_store__strerror(res.err));
			continue;
		}
		log_info("job %s: analysis stored in %.3f s (recoverable %s%.3f s of %.3f s)", res.job_id,
			 res.secs, res.head.have_problems ? "" : "not known yet, ",
			 res.head.recoverable_ns / 1e9, res.head.wall_ns / 1e9);
		if (d->metrics) {
			ffm_metrics__analysis(d->metrics, res.job_id, &res.head);
			changed = true;
		}
	}
	if (changed)
		metrics_write(d);
}

/* A run closed in its store (@err: or not): its analysis, else its copy for its readers now;
 * the job-end requests waiting for it are told when its copy is in place (copy_expect). */
static void run_closed(struct ffm_jobrun *jr, int err, void *ctx)
{
	struct ffmd *d = ctx;
	const char *id = ffm_jobrun__job_id(jr);
	struct pending_copy *c;
	uint64_t ticket = 0;
	bool later = false;

	if (err < 0)
		log_err("job %s: its run could not be closed in its store: %s", id,
			ffm_store__strerror(err));
	else if (!(later = job_analyse(d, jr)))
		ticket = publish_job(id, ffm_store__path(ffm_jobrun__store(jr)), ffm_jobrun__root(jr));
	if (later || ticket)
		copy_expect(d, id, ffm_jobrun__uid(jr), ticket);
	else if ((c = copy_find(d, id)))
		c->id[0] = 0; /* no copy comes: a job-end waiting for it is answered */
}

/*
 * Never called from inside the ring buffer callback (it consumes). The run's end does not wait
 * for its stacks still on the unwinder (their opens of the user's files): the run is closed,
 * analysed and published once they are stored (run_closed), the loop goes on meanwhile. As
 * ffmd stops, it waits for them.
 */
int job_end(struct ffmd *d, struct job *j, bool aborted)
{
	struct ffm_jobrun *jr = j->jr;
	double wall = ffm_now_s() - j->start;
	int err;

	/* Records still in the ring buffer belong to this run, however many of another job's
	 * are before them: all that were sent until now. */
	ffm_collector__drain(d->col);
	if (j->nunmeasured)
		ffm_jobrun__set_unmeasured(jr, j->nunmeasured);
	detach_overhead_take(d, (int)(j - d->jobs));
	if (d->cfg.analysis_on_read && !d->stop)
		ffm_jobrun__set_flags(jr, FFM_RUN_NO_ANALYSIS); /* job_analyse leaves it out */
	ffm_jobrun__disarm(jr);
	j->jr = NULL; /* the run's own from here on */
	if (d->stop) {
		err = ffm_jobrun__end(jr, wall, j->exit_status, aborted, true);
		run_closed(jr, err, d);
		ffm_jobrun__free(jr);
	} else {
		/* Its copy is awaited from now on: a job-end request waits for it. */
		copy_expect(d, j->id, j->owner, 0);
		err = ffm_jobrun__end_async(jr, wall, j->exit_status, aborted, true, run_closed, d);
	}
	log_info("job %s ended after %.2f s (%" PRIu64 " records; %u of %u processes held, %u traced "
		 "by the bridge%s%s)%s", j->id, wall, j->events, j->held, j->procs, j->bridged,
		 j->nunmeasured ? ", some not measured: " : "",
		 j->nunmeasured ? "their driver could not be used" : "",
		 err < 0 ? ", store error" : err == 1 ? ", its last stacks being stored" : "");
	if (d->metrics) {
		ffm_metrics__job(d->metrics, j->id, j->key, j->owner, j->stage, false);
		metrics_write(d);
	}
	job_release(d, j);
	update_attachments(d);
	if (!d->stop)
		journal_write(d);
	return err < 0 ? err : 0;
}

/* Rule jobs whose last process exited during the last round of records. */
void end_finished_jobs(struct ffmd *d)
{
	for (int i = 0; i < FFM_MAX_JOBS; i++)
		if (d->jobs[i].used && d->jobs[i].ending)
			job_end(d, &d->jobs[i], false);
}

/* Mark the run a crash interrupted; the job row is ended too when the job is not resumed. */
static void journal_close_run(struct ffmd *d, const struct job_spec *sp, int64_t run, bool end_job)
{
	const char *key = sp->key, *id = sp->id;
	struct ffm_store_opts so = { .sz = sizeof(so) };
	struct ffm_store *s = NULL;
	struct ffm_store_run r;
	int err;

	/* The run is in this node's store of the key (nodes/<host>/ once nodes/ exists). */
	err = ffm_store__open_key(d->node.root, &(struct ffm_store_key){ .key = key, .uid = sp->owner },
				  &so, &s);
	if (err < 0) {
		log_err("journal: job %s: cannot open the store of key %s: %s", id, key,
			ffm_store__strerror(err));
		return;
	}
	if (ffm_store__get_run(s, run, &r) == 0 && !r.end_ns) {
		uint64_t last = 0, end = ffm_now_ns();

		/* It lasted until the last thing it stored (ffmd flushes every flush_ms): its
		 * wall time is that, not the time ffmd was down. */
		if (ffm_store__run_last_ns(s, run, &last) == 0 && last > r.start_ns && last < end)
			end = last;
		/* PARTIAL too: the stage plan must not take this run as the stage done. (A
		 * reboot restarts the clock: then the wall time is not known.) */
		err = ffm_store__run_end(s, run, end, end > r.start_ns ? (double)(end - r.start_ns) / 1e9 : 0,
					 0, FFM_RUN_ABORTED | FFM_RUN_PARTIAL);
		if (err < 0)
			log_err("journal: job %s: cannot close run %" PRId64 ": %s", id, run, ffm_store__strerror(err));
	}
	if (end_job && ffm_store__job_end(s, id, FFM_JOB_CANCELLED, time(NULL)) == 0)
		publish_job(id, ffm_store__path(s), d->node.root);
	ffm_store__free(s);
}

struct resume_count {
	int resumed, dropped;
};

/* A journal line: its driver made ready (in place: ffmd is starting), or its job's interrupted
 * run closed and the job resumed, or ended when none of its processes is left. */
static void resume_line(struct ffmd *d, const struct journal_line *l, void *ctx)
{
	struct resume_count *n = ctx;
	struct job_spec *sp = l->sp;
	const char *msg = "";
	struct job *j;

	if (l->driver) {
		if (access(l->driver, R_OK) == 0)
			driver_get(d, l->driver, true);
		return;
	}
	journal_close_run(d, sp, l->run, !sp->nsel);
	if (!sp->nsel) {
		log_info("journal: job %s (key %s) not resumed: none of its processes is left", sp->id, sp->key);
		n->dropped++;
		return;
	}
	sp->resumed = true;
	if (sp->rule && sp->sel[0].type == FFM_SEL_PID)
		sp->root = (pid_t)atoi(sp->sel[0].value);
	if (job_create(d, sp, &j, &msg) < 0) {
		log_err("journal: cannot resume job %s: %s", sp->id, msg);
		journal_close_run(d, sp, 0, true);
		n->dropped++;
		return;
	}
	n->resumed++;
	log_info("journal: resumed job %s after a restart (run %" PRId64 " was interrupted)",
		 sp->id, l->run);
}

/* While ffmd starts: the jobs a crash interrupted, from the journal. */
void journal_resume(struct ffmd *d)
{
	struct resume_count n = {};
	int err;

	d->node.resuming = true;
	err = journal_read(d->node.journal, resume_line, d, &n);
	d->node.resuming = false;
	if (err < 0)
		return;
	if (n.resumed || n.dropped)
		log_info("journal: %d job%s resumed, %d ended", n.resumed, n.resumed == 1 ? "" : "s", n.dropped);
	journal_write(d);
}
