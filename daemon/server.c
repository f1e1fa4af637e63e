/* SPDX-License-Identifier: MIT */
/*
 * ffmd's core. One epoll loop over: the collector's ring buffer, the control socket and its
 * connections, a signalfd, and a timer (store flush, rates, watchdog).
 *
 * Attach policy (what a process outside every job pays): no uprobe exists while no job is
 * active. With a job active, each known libcuda carries its wait-function probe; its API
 * probes (stage 2) only while some active job is at stage >= 2. Every probe returns after one
 * hash lookup for a process outside the jobs.
 *
 * Driver discovery: the system's libcuda at start, and for every process that joins a job the
 * libcuda its loader will pick (LD_LIBRARY_PATH, its root's ld.so.cache), resolved when its
 * exec is reported, before it can have loaded the driver. A new build-id is calibrated on the
 * spot (the calibration is cached per build-id).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#include "daemon/apis.h"
#include "daemon/collector.h"
#include "daemon/driver_setup.h"
#include "daemon/jobrun.h"
#include "daemon/log.h"
#include "daemon/probes.h"
#include "daemon/proto.h"
#include "daemon/resolve.h"
#include "daemon/server.h"
#include "symbols/ffm_driver.h"
#include "store/ffm_store.h"
#include "symbols/ffm_stack.h"

#define MAX_DRIVERS 16
#define MAX_CONNS 32

enum { TAG_RING = 1, TAG_LISTEN, TAG_SIGNAL, TAG_TIMER, TAG_CONN };

struct drv {
	bool used;
	uint64_t dev, ino;
	char path[PATH_MAX];
	struct ffm_ready_driver rd;
	struct ffm_attachment *wait_att;
	struct ffm_attachment *api_att;
	bool failed;
	char why[256];
};

struct job {
	bool used;
	uint32_t slot;
	char id[128], key[128];
	uid_t owner;
	int stage;
	struct ffm_jobrun *jr;
	int nsel;
	struct ffm_selector sel[FFM_MAX_SELECTORS];
	double start;
	uint64_t events, events_prev;
	double rate;
};

struct conn {
	int fd;
	double deadline;
	struct ucred cred;
};

struct ffmd {
	struct ffmd_config cfg;
	struct ffm_collector *col;
	struct ffm_symbolizer *sym;
	struct ffm_apis *apis;
	struct job jobs[FFM_MAX_JOBS];
	struct drv drvs[MAX_DRIVERS];
	struct conn conns[MAX_CONNS];
	int ep, lfd, sfd, tfd;
	gid_t admin_gid;
	bool have_admin_gid;
	bool stop;
	uint64_t api_probes_for; /* bitmask of slots at stage >= 2 when API probes were attached */
	double last_tick, last_watchdog;
	unsigned long long watchdog_usec;
	char sock_path[PATH_MAX];
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- drivers ------------------------------------------------------------------------------ */

static struct drv *driver_get(struct ffmd *d, const char *path)
{
	struct stat st;
	struct drv *free_slot = NULL;

	if (stat(path, &st) < 0)
		return NULL;
	for (int i = 0; i < MAX_DRIVERS; i++) {
		if (d->drvs[i].used && d->drvs[i].dev == st.st_dev && d->drvs[i].ino == st.st_ino)
			return &d->drvs[i];
		if (!d->drvs[i].used && !free_slot)
			free_slot = &d->drvs[i];
	}
	if (!free_slot) {
		log_warn("more than %d libcuda files in use; ignoring %s", MAX_DRIVERS, path);
		return NULL;
	}
	memset(free_slot, 0, sizeof(*free_slot));
	free_slot->used = true;
	free_slot->dev = st.st_dev;
	free_slot->ino = st.st_ino;
	snprintf(free_slot->path, sizeof(free_slot->path), "%s", path);
	if (ffm_driver_ready(path, d->cfg.state_dir, &free_slot->rd, free_slot->why,
			     sizeof(free_slot->why)) < 0) {
		free_slot->failed = true;
		log_err("cannot use driver %s: %s; processes using it are not measured", path,
			free_slot->why);
	} else {
		log_info("driver %s: build-id %s, version %s, wait function at %#" PRIx64 "%s", path,
			 ffm_driver__build_id(free_slot->rd.drv), ffm_driver__version(free_slot->rd.drv),
			 free_slot->rd.wait_off, free_slot->rd.calibrated_now ? " (calibrated now)" : "");
	}
	return free_slot;
}

static bool any_job(const struct ffmd *d)
{
	for (int i = 0; i < FFM_MAX_JOBS; i++)
		if (d->jobs[i].used)
			return true;
	return false;
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

static int attach_set(struct ffmd *d, struct drv *dv, uint32_t probes, struct ffm_attachment **att)
{
	const char *names[256];
	size_t nn = sync_union(d, names, 256);
	struct ffm_probe_set ps;
	int err;

	err = ffm_probe_set__build(&ps, dv->rd.drv, d->apis, probes, dv->rd.wait_off, names, nn);
	if (err < 0)
		return err;
	err = ffm_collector__attach(d->col, dv->path, ps.p, ps.n, att);
	if (!err)
		log_info("attached %zu probes to %s", ps.n, dv->path);
	ffm_probe_set__release(&ps);
	return err;
}

/* Bring every driver's attachments in line with the active jobs. */
static void update_attachments(struct ffmd *d)
{
	bool jobs = any_job(d);
	uint64_t detail = detail_slots(d);

	for (int i = 0; i < MAX_DRIVERS; i++) {
		struct drv *dv = &d->drvs[i];
		int err;

		if (!dv->used || dv->failed)
			continue;
		if (!jobs) {
			dv->api_att = ffm_attachment__free(dv->api_att);
			dv->wait_att = ffm_attachment__free(dv->wait_att);
			continue;
		}
		if (!dv->wait_att) {
			err = attach_set(d, dv, FFM_PROBE_WAIT, &dv->wait_att);
			if (err < 0)
				log_err("failed to attach the wait probe to %s+%#" PRIx64 ": %s (is CAP_BPF granted?)",
					dv->path, dv->rd.wait_off, strerror(-err));
		}
		/* A job that needs more stage-2 probes than attached (a new one, or one with
		 * another stage-1 list): attach the new set before dropping the old. */
		if (detail && (!dv->api_att || (detail & ~d->api_probes_for))) {
			struct ffm_attachment *n = NULL;

			err = attach_set(d, dv, FFM_PROBE_SYNC_FUNCS | FFM_PROBE_SYNC_STATIC |
						   FFM_PROBE_TRANSFER | FFM_PROBE_ALLOC | FFM_PROBE_FREE |
						   FFM_PROBE_MEMSET | FFM_PROBE_LAUNCH, &n);
			if (err < 0) {
				log_err("failed to attach API probes to %s: %s", dv->path, strerror(-err));
			} else {
				ffm_attachment__free(dv->api_att);
				dv->api_att = n;
			}
		} else if (!detail) {
			dv->api_att = ffm_attachment__free(dv->api_att);
		}
	}
	d->api_probes_for = detail;
}

static void ensure_driver_for_pid(struct ffmd *d, pid_t pid)
{
	char path[PATH_MAX];
	struct drv *dv;

	if (ffm_resolve_libcuda_pid(pid, NULL, path, sizeof(path)) < 0)
		return;
	dv = driver_get(d, path);
	if (dv && !dv->failed && !dv->wait_att)
		update_attachments(d);
}

/* ---- jobs --------------------------------------------------------------------------------- */

static struct job *job_find(struct ffmd *d, const char *id)
{
	for (int i = 0; i < FFM_MAX_JOBS; i++)
		if (d->jobs[i].used && !strcmp(d->jobs[i].id, id))
			return &d->jobs[i];
	return NULL;
}

static int parse_pid(const char *s, pid_t *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v <= 0 || v > INT32_MAX)
		return -EINVAL;
	*out = (pid_t)v;
	return 0;
}

/* Track @pid and all its descendants (children inherit a job from the moment they fork,
 * but those that exist already must be found in /proc). */
static void track_tree(struct ffmd *d, pid_t root, uint32_t slot)
{
	pid_t queue[4096];
	int head = 0, tail = 0;

	queue[tail++] = root;
	while (head < tail) {
		pid_t p = queue[head++];
		char path[64], buf[4096];
		FILE *f;

		ffm_collector__track_pid(d->col, p, slot);
		ensure_driver_for_pid(d, p);
		snprintf(path, sizeof(path), "/proc/%d/task/%d/children", p, p);
		f = fopen(path, "re");
		if (!f)
			continue;
		while (fscanf(f, "%4095s", buf) == 1 && tail < 4096) {
			pid_t c;

			if (parse_pid(buf, &c) == 0)
				queue[tail++] = c;
		}
		fclose(f);
	}
}

static void track_cgroup_procs(struct ffmd *d, const char *dir, uint32_t slot, int depth)
{
	char path[PATH_MAX], line[64];
	struct dirent *de;
	FILE *f;
	DIR *dh;

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	f = fopen(path, "re");
	if (f) {
		while (fgets(line, sizeof(line), f)) {
			pid_t p;

			line[strcspn(line, "\n")] = 0;
			if (parse_pid(line, &p) == 0) {
				ffm_collector__track_pid(d->col, p, slot);
				ensure_driver_for_pid(d, p);
			}
		}
		fclose(f);
	}
	if (depth > 16 || !(dh = opendir(dir)))
		return;
	while ((de = readdir(dh))) {
		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		track_cgroup_procs(d, path, slot, depth + 1);
	}
	closedir(dh);
}

static int selector_rule(const struct ffm_selector *s, struct ffm_rule *r)
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

static void job_release(struct ffmd *d, struct job *j)
{
	pid_t pids[1024];
	int n = ffm_collector__job_pids(d->col, j->slot, pids, 1024);
	struct ffm_job_cfg off = {};

	for (int i = 0; i < n; i++)
		ffm_collector__untrack_pid(d->col, pids[i]);
	for (int i = 0; i < j->nsel; i++) {
		struct ffm_rule r;

		if (selector_rule(&j->sel[i], &r) > 0)
			ffm_collector__del_rule(d->col, &r);
	}
	ffm_collector__set_job(d->col, j->slot, &off);
	j->jr = ffm_jobrun__free(j->jr);
	j->used = false;
}

static int job_start(struct ffmd *d, const struct ffm_request *req, const struct ucred *cred,
		     char *body, size_t blen, const char **msg)
{
	const char *id = ffm_proto_arg(req, "job"), *key = ffm_proto_arg(req, "key");
	const char *stage_s = ffm_proto_arg(req, "stage"), *owner_s = ffm_proto_arg(req, "owner");
	struct ffm_jobrun_opts jo = { .sz = sizeof(jo) };
	struct ffm_job_cfg cfg;
	struct job *j = NULL;
	pid_t owner = cred->uid;
	int err, stage = 0;

	if (!id || !*id || strlen(id) >= sizeof(j->id)) {
		*msg = "job-start needs job=ID (at most 127 bytes)";
		return -EINVAL;
	}
	if (job_find(d, id)) {
		*msg = "a job with this id is already active";
		return -EEXIST;
	}
	if (key && (!*key || strlen(key) >= sizeof(j->key))) {
		*msg = "key must be 1..127 bytes";
		return -EINVAL;
	}
	if (stage_s && (sscanf(stage_s, "%d", &stage) != 1 || stage < 1 || stage > 4)) {
		*msg = "stage must be 1..4";
		return -EINVAL;
	}
	if (owner_s && parse_pid(owner_s, &owner) < 0 && strcmp(owner_s, "0")) {
		*msg = "owner must be a uid";
		return -EINVAL;
	}
	if (owner_s && !strcmp(owner_s, "0"))
		owner = 0;
	for (int i = 0; i < FFM_MAX_JOBS; i++)
		if (!d->jobs[i].used) {
			j = &d->jobs[i];
			break;
		}
	if (!j) {
		*msg = "too many active jobs";
		return -ENOSPC;
	}
	memset(j, 0, sizeof(*j));
	j->slot = (uint32_t)(j - d->jobs);
	snprintf(j->id, sizeof(j->id), "%s", id);
	/* Without --key every job is its own key (and starts at stage 1): the scheduler's
	 * prolog passes a key so that re-runs of a job escalate. */
	snprintf(j->key, sizeof(j->key), "%s", key ? key : id);
	for (uint32_t i = 0; i < req->nargs; i++) {
		const char *n = req->args[i].name;
		struct ffm_selector *s;
		struct ffm_rule r;

		if (strcmp(n, "cgroup") && strcmp(n, "pid") && strcmp(n, "uid") && strcmp(n, "exe"))
			continue;
		if (j->nsel == FFM_MAX_SELECTORS) {
			*msg = "too many selectors";
			return -ENOSPC;
		}
		s = &j->sel[j->nsel++];
		s->type = !strcmp(n, "cgroup") ? FFM_SEL_CGROUP : !strcmp(n, "pid") ? FFM_SEL_PID :
			  !strcmp(n, "uid") ? FFM_SEL_UID : FFM_SEL_EXE;
		snprintf(s->value, sizeof(s->value), "%s", req->args[i].value);
		if (s->type == FFM_SEL_PID) {
			pid_t p;
			char path[64];
			struct stat st;

			if (parse_pid(s->value, &p) < 0) {
				*msg = "pid must be a positive number";
				return -EINVAL;
			}
			snprintf(path, sizeof(path), "/proc/%d", p);
			if (stat(path, &st) < 0) {
				*msg = "no such process";
				return -ESRCH;
			}
			if (!owner_s && cred->uid == 0)
				owner = st.st_uid;
		} else if ((err = selector_rule(s, &r)) < 0) {
			*msg = s->type == FFM_SEL_CGROUP ? "cgroup: not a cgroup directory" :
			       s->type == FFM_SEL_EXE ? "exe: no such file" : "uid must be a number";
			return err;
		} else if (s->type == FFM_SEL_UID && !owner_s) {
			owner = (uid_t)r.id;
		}
	}
	if (!j->nsel) {
		*msg = "job-start needs at least one selector (cgroup=, pid=, uid=, exe=)";
		return -EINVAL;
	}
	j->owner = owner;

	jo.state_dir = d->cfg.state_dir;
	jo.key = j->key;
	jo.job_id = j->id;
	jo.uid = owner;
	jo.override_stage = stage;
	jo.slot = j->slot;
	jo.collector = d->col;
	jo.sym = d->sym;
	jo.apis = d->apis;
	for (int i = 0; i < MAX_DRIVERS; i++)
		if (d->drvs[i].used && !d->drvs[i].failed) {
			jo.driver_path = d->drvs[i].path;
			jo.driver_build_id = ffm_driver__build_id(d->drvs[i].rd.drv);
			jo.wait_off = d->drvs[i].rd.wait_off;
			jo.wait_size = d->drvs[i].rd.wait_size;
			break;
		}
	err = ffm_jobrun__begin(&jo, &j->jr);
	if (err < 0) {
		*msg = "cannot open the job key's store";
		return err;
	}
	j->used = true;
	j->stage = ffm_jobrun__plan(j->jr)->stage;
	j->start = now_s();
	cfg.stage = j->stage;
	cfg.flags = FFM_JOB_ACTIVE | FFM_JOB_STACKS | (j->stage >= 2 ? FFM_JOB_CALLS : 0);
	ffm_collector__clear_drops(d->col, j->slot);
	ffm_collector__set_job(d->col, j->slot, &cfg);
	update_attachments(d);
	for (int i = 0; i < j->nsel; i++) {
		struct ffm_selector *s = &j->sel[i];
		struct ffm_rule r;

		if (s->type == FFM_SEL_PID) {
			pid_t p;

			parse_pid(s->value, &p);
			track_tree(d, p, j->slot);
		} else if (selector_rule(s, &r) > 0) {
			ffm_collector__add_rule(d->col, &r, j->slot);
			if (s->type == FFM_SEL_CGROUP)
				track_cgroup_procs(d, s->value, j->slot, 0);
		}
	}
	update_attachments(d);
	log_info("job %s started: key %s, stage %d, owner %u, %d selectors", j->id, j->key, j->stage,
		 j->owner, j->nsel);
	snprintf(body, blen, "{\"job\":\"%s\",\"key\":\"%s\",\"stage\":%d,\"run\":%" PRId64 "}\n", j->id,
		 j->key, j->stage, ffm_jobrun__run_id(j->jr));
	*msg = "started";
	return 0;
}

static int job_end(struct ffmd *d, struct job *j, bool aborted)
{
	double wall = now_s() - j->start;
	int err;

	/* Records still in the ring buffer belong to this run. */
	ffm_collector__consume(d->col);
	err = ffm_jobrun__end(j->jr, wall, 0, aborted, true);
	log_info("job %s ended after %.2f s (%" PRIu64 " records)%s", j->id, wall, j->events,
		 err < 0 ? ", store error" : "");
	job_release(d, j);
	update_attachments(d);
	return err;
}

/* ---- control socket ----------------------------------------------------------------------- */

static bool is_admin(struct ffmd *d, const struct ucred *c)
{
	gid_t groups[256];
	int n;
	char path[64], line[1024];
	FILE *f;

	if (c->uid == 0)
		return true;
	if (!d->have_admin_gid)
		return false;
	if (c->gid == d->admin_gid)
		return true;
	/* Supplementary groups of the peer, from /proc (SO_PEERCRED has only the primary). */
	snprintf(path, sizeof(path), "/proc/%d/status", c->pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	n = 0;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "Groups:", 7)) {
			char *p = line + 7, *end;

			while (n < 256) {
				unsigned long g = strtoul(p, &end, 10);

				if (end == p)
					break;
				groups[n++] = (gid_t)g;
				p = end;
			}
		}
	}
	fclose(f);
	for (int i = 0; i < n; i++)
		if (groups[i] == d->admin_gid)
			return true;
	return false;
}

static size_t status_json(struct ffmd *d, const struct ucred *c, char *out, size_t len)
{
	bool admin = is_admin(d, c);
	size_t off = 0;
	bool first = true;

#define P(...)                                                                                     \
	do {                                                                                       \
		int _n = snprintf(out + off, off < len ? len - off : 0, __VA_ARGS__);            \
		if (_n > 0)                                                                        \
			off += (size_t)_n;                                                         \
	} while (0)
	P("{\"version\":%d,\"drivers\":[", FFM_PROTO_VERSION);
	for (int i = 0; i < MAX_DRIVERS; i++) {
		struct drv *dv = &d->drvs[i];

		if (!dv->used)
			continue;
		P("%s{\"path\":\"%s\",\"usable\":%s", first ? "" : ",", dv->path, dv->failed ? "false" : "true");
		if (!dv->failed)
			P(",\"build_id\":\"%s\",\"version\":\"%s\",\"wait_offset\":\"%#" PRIx64 "\",\"wait_size\":%" PRIu64,
			  ffm_driver__build_id(dv->rd.drv), ffm_driver__version(dv->rd.drv), dv->rd.wait_off,
			  dv->rd.wait_size);
		else
			P(",\"error\":\"%s\"", dv->why);
		P(",\"probes\":%zu}", ffm_attachment__count(dv->wait_att) + ffm_attachment__count(dv->api_att));
		first = false;
	}
	P("],\"jobs\":[");
	first = true;
	for (int i = 0; i < FFM_MAX_JOBS; i++) {
		struct job *j = &d->jobs[i];
		struct ffm_rec_drops dr = {};
		pid_t pids[256];
		int n;

		if (!j->used || (!admin && j->owner != c->uid))
			continue;
		ffm_collector__drops(d->col, j->slot, &dr);
		n = ffm_collector__job_pids(d->col, j->slot, pids, 256);
		P("%s{\"job\":\"%s\",\"key\":\"%s\",\"owner\":%u,\"stage\":%d,\"running_s\":%.1f,"
		  "\"events\":%" PRIu64 ",\"events_per_s\":%.1f,\"drops\":{\"ringbuf\":%" PRIu64
		  ",\"stacks\":%" PRIu64 ",\"depth\":%" PRIu64 ",\"procs\":%" PRIu64 ",\"threads\":%" PRIu64
		  ",\"unmatched\":%" PRIu64 "},\"processes\":[",
		  first ? "" : ",", j->id, j->key, j->owner, j->stage, now_s() - j->start, j->events, j->rate,
		  (uint64_t)dr.n[FFM_REC_DROP_RINGBUF], (uint64_t)dr.n[FFM_REC_DROP_STACK],
		  (uint64_t)dr.n[FFM_REC_DROP_DEPTH], (uint64_t)dr.n[FFM_REC_DROP_PROCS],
		  (uint64_t)dr.n[FFM_REC_DROP_THREADS], (uint64_t)dr.n[FFM_REC_DROP_UNMATCHED]);
		for (int k = 0; k < n; k++)
			P("%s%d", k ? "," : "", pids[k]);
		P("]}");
		first = false;
	}
	P("]}\n");
#undef P
	return off;
}

static void handle_request(struct ffmd *d, struct conn *c)
{
	static char msgbuf[FFM_PROTO_MAX_REQUEST + 1];
	static struct ffm_request req;
	static char body[FFM_PROTO_MAX_RESPONSE - 512];
	char resp[FFM_PROTO_MAX_RESPONSE];
	const char *msg = "ok";
	ssize_t n;
	int err = 0;

	body[0] = 0;
	/* One more byte than allowed: a longer message is truncated by the socket (MSG_TRUNC
	 * tells), never split into a second request. */
	n = recv(c->fd, msgbuf, sizeof(msgbuf), MSG_DONTWAIT | MSG_TRUNC);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0)
		goto close;
	if ((size_t)n > FFM_PROTO_MAX_REQUEST) {
		err = -E2BIG;
		msg = "request too long";
	} else if ((err = ffm_proto_parse(msgbuf, n, &req, &msg)) == 0) {
		switch (req.verb) {
		case FFM_VERB_PING:
			msg = "pong";
			break;
		case FFM_VERB_STATUS:
			status_json(d, &c->cred, body, sizeof(body));
			break;
		case FFM_VERB_JOB_START:
			if (!is_admin(d, &c->cred)) {
				err = -EACCES;
				msg = "permission denied: only root or the admin group may start jobs";
				break;
			}
			err = job_start(d, &req, &c->cred, body, sizeof(body), &msg);
			break;
		case FFM_VERB_JOB_END: {
			const char *id = ffm_proto_arg(&req, "job");
			struct job *j = id ? job_find(d, id) : NULL;

			if (!is_admin(d, &c->cred)) {
				err = -EACCES;
				msg = "permission denied: only root or the admin group may end jobs";
			} else if (!j) {
				err = -ENOENT;
				msg = "no active job with this id";
			} else {
				snprintf(body, sizeof(body), "{\"job\":\"%s\",\"key\":\"%s\",\"stage\":%d}\n",
					 j->id, j->key, j->stage);
				err = job_end(d, j, false);
				msg = err ? "the job ended, but its store could not be finished" : "ended";
			}
			break;
		}
		}
	}
	if (err)
		log_info("request from uid %u pid %d refused: %s", c->cred.uid, c->cred.pid, msg);
	n = snprintf(resp, sizeof(resp), "FFM/%d %d %s\n%s", FFM_PROTO_VERSION, err ? -err : 0, msg, body);
	send(c->fd, resp, n < (ssize_t)sizeof(resp) ? (size_t)n : sizeof(resp) - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
close:
	epoll_ctl(d->ep, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	c->fd = -1;
}

static void accept_conn(struct ffmd *d)
{
	socklen_t sl = sizeof(struct ucred);
	struct conn *c = NULL;
	int fd = accept4(d->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd < 0)
		return;
	for (int i = 0; i < MAX_CONNS; i++)
		if (d->conns[i].fd < 0) {
			c = &d->conns[i];
			break;
		}
	if (!c) {
		/* Busy: refuse rather than queue without bound. */
		close(fd);
		return;
	}
	c->fd = fd;
	c->deadline = now_s() + FFM_PROTO_TIMEOUT_MS / 1000.0;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c->cred, &sl) < 0) {
		close(fd);
		c->fd = -1;
		return;
	}
	epoll_ctl(d->ep, EPOLL_CTL_ADD, fd,
		  &(struct epoll_event){ .events = EPOLLIN, .data.u64 = TAG_CONN | (uint64_t)(c - d->conns) << 8 });
}

/* ---- records ------------------------------------------------------------------------------ */

static int on_record(void *ctx, const void *rec, size_t size)
{
	struct ffmd *d = ctx;
	const struct ffm_rec_hdr *h = rec;
	struct job *j;
	int err;

	if (h->job >= FFM_MAX_JOBS || !d->jobs[h->job].used)
		return 0; /* a job that has ended: its late records are dropped */
	j = &d->jobs[h->job];
	j->events++;
	if (h->type == FFM_REC_EXEC || h->type == FFM_REC_FORK)
		ensure_driver_for_pid(d, h->tgid);
	err = ffm_jobrun__record(j->jr, rec, size);
	if (err < 0) {
		static double last;

		if (now_s() - last > 10) {
			log_err("job %s: writing its store failed: %s", j->id, strerror(-err));
			last = now_s();
		}
	}
	return 0;
}

static void tick(struct ffmd *d)
{
	double t = now_s(), dt = t - d->last_tick;
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
		d->last_tick = t;
	for (int i = 0; i < MAX_CONNS; i++)
		if (d->conns[i].fd >= 0 && t > d->conns[i].deadline) {
			/* Sent nothing in time: close it, the daemon never waits on a client. */
			epoll_ctl(d->ep, EPOLL_CTL_DEL, d->conns[i].fd, NULL);
			close(d->conns[i].fd);
			d->conns[i].fd = -1;
		}
	if (d->watchdog_usec && (t - d->last_watchdog) * 1e6 > d->watchdog_usec / 3) {
		ffm_notify("WATCHDOG=1");
		d->last_watchdog = t;
	}
	snprintf(status, sizeof(status), "STATUS=%d job%s, %.0f events/s", njobs, njobs == 1 ? "" : "s", rate);
	ffm_notify(status);
}

/* ---- setup, loop, teardown ---------------------------------------------------------------- */

static int mkdir_p(const char *path, mode_t mode)
{
	char buf[PATH_MAX];

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int ffmd__new(const struct ffmd_config *cfg, struct ffmd **ret)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct ffm_driver_list *sys = NULL;
	sigset_t mask;
	struct ffmd *d;
	int err;

	*ret = NULL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->cfg = *cfg;
	d->ep = d->lfd = d->sfd = d->tfd = -1;
	for (int i = 0; i < MAX_CONNS; i++)
		d->conns[i].fd = -1;
	if (cfg->admin_group[0]) {
		struct group *g = getgrnam(cfg->admin_group);

		if (!g) {
			log_err("admin group '%s' does not exist", cfg->admin_group);
			err = -ENOENT;
			goto fail;
		}
		d->admin_gid = g->gr_gid;
		d->have_admin_gid = true;
	}
	if ((err = mkdir_p(cfg->state_dir, 0750)) < 0 || (err = mkdir_p(cfg->runtime_dir, 0755)) < 0) {
		log_err("cannot create %s or %s: %s", cfg->state_dir, cfg->runtime_dir, strerror(-err));
		goto fail;
	}
	err = ffm_collector__open(&(struct ffm_collector_opts){ .sz = sizeof(struct ffm_collector_opts),
				  .on_record = on_record, .ctx = d,
				  .wakeup_bytes = cfg->wakeup_kib * 1024 }, &d->col);
	if (err < 0) {
		log_err("cannot load the BPF collector: %s (ffmd needs CAP_BPF, CAP_PERFMON and CAP_SYS_RESOURCE, or root)",
			strerror(-err));
		goto fail;
	}
	if ((err = ffm_apis__new(&d->apis)) < 0 || (err = ffm_symbolizer__new(NULL, &d->sym)) < 0)
		goto fail;

	/* The system's drivers are made ready (calibrated) now, attached when a job starts. */
	if (ffm_driver_find_system(NULL, &sys) == 0) {
		for (size_t i = 0; i < sys->n; i++)
			driver_get(d, sys->locs[i].open_path ? sys->locs[i].open_path : sys->locs[i].path);
		ffm_driver_list__free(sys);
	}

	if (strlen(cfg->runtime_dir) + 1 + strlen(FFM_PROTO_SOCKET) >= sizeof(sa.sun_path)) {
		log_err("runtime directory path too long for a socket: %s", cfg->runtime_dir);
		err = -ENAMETOOLONG;
		goto fail;
	}
	snprintf(d->sock_path, sizeof(d->sock_path), "%s/" FFM_PROTO_SOCKET, cfg->runtime_dir);
	strcpy(sa.sun_path, d->sock_path);
	d->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	unlink(d->sock_path);
	if (d->lfd < 0 || bind(d->lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(d->lfd, 16) < 0) {
		err = -errno;
		log_err("cannot listen on %s: %s", d->sock_path, strerror(errno));
		goto fail;
	}
	/* Anyone may connect; what they may do is decided per request from SO_PEERCRED. */
	chmod(d->sock_path, 0666);

	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	d->sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	d->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	d->ep = epoll_create1(EPOLL_CLOEXEC);
	if (d->sfd < 0 || d->tfd < 0 || d->ep < 0) {
		err = -errno;
		goto fail;
	}
	{
		long ms = cfg->flush_ms ? cfg->flush_ms : 200;
		struct itimerspec its = { .it_interval = { ms / 1000, (ms % 1000) * 1000000 },
					  .it_value = { ms / 1000, (ms % 1000) * 1000000 } };

		timerfd_settime(d->tfd, 0, &its, NULL);
	}
	epoll_ctl(d->ep, EPOLL_CTL_ADD, ffm_collector__fd(d->col), &(struct epoll_event){ .events = EPOLLIN, .data.u64 = TAG_RING });
	epoll_ctl(d->ep, EPOLL_CTL_ADD, d->lfd, &(struct epoll_event){ .events = EPOLLIN, .data.u64 = TAG_LISTEN });
	epoll_ctl(d->ep, EPOLL_CTL_ADD, d->sfd, &(struct epoll_event){ .events = EPOLLIN, .data.u64 = TAG_SIGNAL });
	epoll_ctl(d->ep, EPOLL_CTL_ADD, d->tfd, &(struct epoll_event){ .events = EPOLLIN, .data.u64 = TAG_TIMER });
	d->watchdog_usec = ffm_watchdog_usec();
	d->last_tick = d->last_watchdog = now_s();
	*ret = d;
	return 0;
fail:
	ffmd__free(d);
	return err;
}

int ffmd__run(struct ffmd *d)
{
	ffm_notify("READY=1\nSTATUS=waiting for jobs");
	log_info("ffmd ready: control socket %s, state in %s", d->sock_path, d->cfg.state_dir);
	while (!d->stop) {
		struct epoll_event evs[16];
		int n = epoll_wait(d->ep, evs, 16, 100);

		if (n < 0 && errno != EINTR)
			return -errno;
		/* Records are polled each round as well: BPF wakes us only when a share of
		 * the buffer is filled (bpf/ffm.bpf.c). */
		ffm_collector__consume(d->col);
		for (int i = 0; i < n; i++) {
			uint64_t tag = evs[i].data.u64 & 0xff;

			if (tag == TAG_LISTEN) {
				accept_conn(d);
			} else if (tag == TAG_CONN) {
				struct conn *c = &d->conns[evs[i].data.u64 >> 8];

				if (c->fd >= 0)
					handle_request(d, c);
			} else if (tag == TAG_TIMER) {
				uint64_t x;

				if (read(d->tfd, &x, sizeof(x)) > 0)
					tick(d);
			} else if (tag == TAG_SIGNAL) {
				struct signalfd_siginfo si;

				while (read(d->sfd, &si, sizeof(si)) == sizeof(si)) {
					if (si.ssi_signo == SIGHUP) {
						log_info("SIGHUP: nothing to reload in this version; the config is read at start");
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

struct ffmd *ffmd__free(struct ffmd *d)
{
	if (!d)
		return NULL;
	/* Jobs still active end as aborted runs: what they recorded is kept. */
	for (int i = 0; i < FFM_MAX_JOBS; i++)
		if (d->jobs[i].used)
			job_end(d, &d->jobs[i], true);
	for (int i = 0; i < MAX_DRIVERS; i++) {
		ffm_attachment__free(d->drvs[i].api_att);
		ffm_attachment__free(d->drvs[i].wait_att);
		ffm_ready_driver__release(&d->drvs[i].rd);
	}
	for (int i = 0; i < MAX_CONNS; i++)
		if (d->conns[i].fd >= 0)
			close(d->conns[i].fd);
	if (d->lfd >= 0) {
		close(d->lfd);
		unlink(d->sock_path);
	}
	if (d->sfd >= 0)
		close(d->sfd);
	if (d->tfd >= 0)
		close(d->tfd);
	if (d->ep >= 0)
		close(d->ep);
	ffm_symbolizer__free(d->sym);
	ffm_apis__free(d->apis);
	ffm_collector__free(d->col);
	free(d);
	return NULL;
}
