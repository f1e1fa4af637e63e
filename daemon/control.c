/* SPDX-License-Identifier: MIT */
/*
 * The control socket: a local user's connection, the request it sends, the response. Owns who
 * may do what (root and the admin group start and end jobs and see everything; a user sees
 * their own jobs and drivers: decided from the peer's credentials when it connected, never
 * from its pid), the limits on connections and on logging refusals, turning a
 * job-start request into a job_spec, and the JSON of the responses (the status). What a job
 * is, and starting and ending one, is jobs.c's.
 *
 * Runs on the loop. A request is one datagram, read when epoll says it is there; the daemon
 * never waits on a client (a connection that sends nothing in time is closed at the next tick:
 * conns_expire). Owns the control socket (struct ffmd_control: made by control_listen, closed
 * with its connections by control_close).
 *
 * A job-end is answered once the job's copy for its readers is in place (its analysis stored,
 * then the copy: jobs.c, publisher.c), so that its owner's report right after it finds the
 * job; the loop does not wait for that: the connection is kept, and answered when the
 * publisher hands the copy back (copies_take) or when the request's wait is over (its wait_ms,
 * at most MAX_END_WAIT_MS), then saying that the copy is still being written.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <jansson.h>

#include "daemon/ffmd_int.h"
#include "daemon/jobrun.h"
#include "daemon/log.h"
#include "daemon/proto.h"
#include "store/ffm_store.h"
#include "symbols/ffm_driver.h"
#include "common/ffm_json.h"

#define MAX_CONNS_PER_USER 4
#define RESERVED_CONNS 8
#define DEFAULT_END_WAIT_MS 10000 /* a job-end without wait_ms */
#define MAX_END_WAIT_MS 60000

/*
 * @v (taken) as a response body in @out: compact JSON on one line. 15 significant digits
 * print the tenths as they are.
 */
static size_t json_body(json_t *v, char *out, size_t len)
{
	char *s = v ? json_dumps(v, JSON_COMPACT | JSON_REAL_PRECISION(15)) : NULL;
	int n = 0;

	if (s)
		n = snprintf(out, len, "%s\n", s);
	else
		log_err("cannot write a response: out of memory");
	json_decref(v);
	free(s);
	return n > 0 ? (size_t)n : 0;
}

/*
 * Whether the peer of the connection @fd, whose SO_PEERCRED is @c, is root or in the admin
 * group: its primary and supplementary groups as they were when it connected (SO_PEERCRED,
 * SO_PEERGROUPS), never looked up by pid later (the process that connected may be gone and
 * its pid another's by the time a request comes).
 */
static bool peer_is_admin(struct ffmd *d, int fd, const struct ucred *c)
{
	gid_t some[64], *groups = some;
	socklen_t len = sizeof(some);
	bool member = false;

	if (c->uid == 0)
		return true;
	if (!d->ctl.have_admin_gid)
		return false;
	if (c->gid == d->ctl.admin_gid)
		return true;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0) {
		if (errno != ERANGE || !(groups = malloc(len)) ||
		    getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0)
			len = 0; /* not known: not an admin */
	}
	for (size_t i = 0; i < len / sizeof(gid_t); i++)
		member |= groups[i] == d->ctl.admin_gid;
	if (groups != some)
		free(groups);
	return member;
}

/* A driver in the status; @named: the peer may see its path and error. */
static json_t *status_driver(struct ffmd *d, const struct drv *dv, bool named)
{
	/* Per-process scope: the probes of every process, and how many have them. */
	size_t probes = ffm_attachment__count(dv->wait_att) + ffm_attachment__count(dv->api_att);
	bool ready = dv->state == DRV_READY;
	char off[32];
	int procs = 0;

	for (int k = 0; k < MAX_PLINKS; k++)
		if (d->plinks[k].pid && d->plinks[k].dv == dv) {
			probes += ffm_attachment__count(d->plinks[k].wait_att) +
				  ffm_attachment__count(d->plinks[k].api_att);
			procs++;
		}
	snprintf(off, sizeof(off), "%#" PRIx64, dv->rd.wait_off);
	/* o*: the members of a ready driver, the error of a failed one, are left out otherwise */
	return json_pack("{s:o,s:b,s:s,s:b,s:o*,s:o*,s:o*,s:o*,s:o*,s:I,s:i}",
			 "path", named ? ffm_json_string(dv->path) : json_string("(another user's file)"),
			 "usable", ready, "state", ready ? "ready" : dv->state == DRV_PENDING ? "pending" : "failed",
			 "trusted", dv->rd.trusted,
			 "build_id", ready ? ffm_json_string(ffm_driver__build_id(dv->rd.drv)) : NULL,
			 "version", ready ? ffm_json_string(ffm_driver__version(dv->rd.drv)) : NULL,
			 "wait_offset", ready ? json_string(off) : NULL,
			 "wait_size", ready ? json_integer((json_int_t)dv->rd.wait_size) : NULL,
			 "error", dv->state == DRV_FAILED ? ffm_json_string(named ? dv->why : "") : NULL,
			 "probes", (json_int_t)probes, "processes_with_probes", procs);
}

/* Adaptive stage 1 of job @j: its processes with a sampler, those sampled now, the returns to
 * full tracing, their waits/s and the estimated cost (percent of a process's time). */
/* The bridge (links.c): whether it is on, how many jobs it serves, its attaches and detaches
 * (per driver) since ffmd started. */
static json_t *status_bridge(const struct ffmd *d)
{
	struct bridge_counts bc;
	int drivers = 0;

	bridge_counts(d, &bc);
	for (int i = 0; i < MAX_DRIVERS; i++)
		drivers += d->drvs[i].bridge_att != NULL;
	return json_pack("{s:b,s:b,s:i,s:i,s:I,s:I}", "possible", ffm_collector__bridge_ok(d->col),
			 "open", bc.open, "drivers", drivers, "jobs", bc.jobs,
			 "attaches", (json_int_t)bc.attaches, "detaches", (json_int_t)bc.detaches);
}

static json_t *status_sampling(struct ffmd *d, const struct job *j)
{
	struct sample_status st;

	sample_job_status(d, (int)(j - d->jobs), &st);
	return json_pack("{s:I,s:I,s:I,s:o,s:o,s:o}", "processes", (json_int_t)st.procs,
			 "sampled_now", (json_int_t)st.sampling, "retraced", (json_int_t)st.retraced,
			 "waits_per_s", ffm_json_fixed(st.rate, 1), "cost_pct", ffm_json_fixed(st.cost * 100, 4),
			 "off_lag_ms", ffm_json_fixed(st.lag * 1e3, 2));
}

static json_t *status_job(struct ffmd *d, const struct job *j)
{
	detach_overhead_take(d, (int)(j - d->jobs));
	struct ffm_rec_drops dr = {};
	json_t *procs = json_array(), *o;
	pid_t pids[256];
	int n;

	ffm_collector__drops(d->col, j->slot, &dr);
	n = ffm_collector__job_pids(d->col, j->slot, pids, 256);
	for (int k = 0; k < n; k++)
		json_array_append_new(procs, json_integer(pids[k]));
	o = json_pack("{s:o,s:o,s:o,s:I,s:i,s:o,s:I,s:o,s:{s:I,s:I,s:I,s:I,s:I,s:I},"
			 "s:I,s:I,s:I,s:I,s:o}",
			 "job", ffm_json_string(j->id), "key", ffm_json_string(j->key), "rule", ffm_json_string(j->rule),
			 "owner", (json_int_t)j->owner, "stage", j->stage,
			 "running_s", ffm_json_fixed(ffm_now_s() - j->start, 1), "events", (json_int_t)j->events,
			 "events_per_s", ffm_json_fixed(j->rate, 1),
			 "drops", "ringbuf", (json_int_t)dr.n[FFM_REC_DROP_RINGBUF],
			 "stacks", (json_int_t)dr.n[FFM_REC_DROP_STACK],
			 "depth", (json_int_t)dr.n[FFM_REC_DROP_DEPTH],
			 "procs", (json_int_t)dr.n[FFM_REC_DROP_PROCS],
			 "threads", (json_int_t)dr.n[FFM_REC_DROP_THREADS],
			 "unmatched", (json_int_t)dr.n[FFM_REC_DROP_UNMATCHED],
			 "processes_seen", (json_int_t)j->procs, "processes_held", (json_int_t)j->held,
			 "processes_unmeasured", (json_int_t)j->nunmeasured,
			 "processes_not_held", (json_int_t)j->not_held, "processes", procs);
	if (o)
		json_object_set_new(o, "processes_bridged", json_integer(j->bridged));
	if (o && j->stage == 1)
		json_object_set_new(o, "sampling", status_sampling(d, j));
	if (o && j->jr) {
		/* What its processes paid so far: the BPF programs' time is the slot's, read now. */
		struct ffm_overhead pr = *ffm_jobrun__overhead(j->jr);
		struct ffm_bpf_overhead bp;

		if (ffm_collector__bpf_overhead(d->col, j->slot, &bp) == 0) {
			pr.ns[FFM_OVERHEAD_BPF] += bp.ns;
			pr.n[FFM_OVERHEAD_BPF] += bp.runs;
		}
		json_object_set_new(o, "overhead", ffm_overhead_json(&pr, ffm_now_s() - j->start));
	}
	return o;
}

static json_t *status_rule(struct ffmd *d, const struct rule *ru)
{
	struct ffm_rec_drops dr = {};
	json_t *sel = json_array();

	ffm_collector__drops(d->col, ru->slot, &dr);
	for (int k = 0; k < ru->r.nsel; k++) {
		char s[sizeof(ru->r.sel[k].value) + 16];

		snprintf(s, sizeof(s), "%s=%s", ffm_selector_name(ru->r.sel[k].type), ru->r.sel[k].value);
		json_array_append_new(sel, ffm_json_string(s));
	}
	return json_pack("{s:o,s:o,s:i,s:I,s:{s:I,s:I},s:o}", "rule", ffm_json_string(ru->r.name),
			 "key", ffm_json_string(ru->r.key), "stage", ru->r.stage, "jobs_made", (json_int_t)ru->jobs_made,
			 "drops", "procs", (json_int_t)dr.n[FFM_REC_DROP_PROCS],
			 "ringbuf", (json_int_t)dr.n[FFM_REC_DROP_RINGBUF], "selectors", sel);
}

/*
 * The status for the peer @c: the drivers (another user's file is named to root and the admins
 * only: its path may tell what that user runs and where), the jobs it may see (all of them for
 * root and the admins), the rules (root and the admins only).
 */
static size_t status_json(struct ffmd *d, const struct conn *conn, char *out, size_t len)
{
	const struct ucred *c = &conn->cred;
	bool admin = conn->admin;
	json_t *drivers = json_array(), *jobs = json_array(), *rules = json_array();
	json_t *copying = json_array(); /* jobs ended whose copy is being made */

	for (int i = 0; i < MAX_DRIVERS; i++) {
		struct drv *dv = &d->drvs[i];

		if (dv->used)
			json_array_append_new(drivers, status_driver(d, dv, admin || !dv->user || dv->user == c->uid));
	}
	for (int i = 0; i < FFM_MAX_JOBS; i++)
		if (d->jobs[i].used && (admin || d->jobs[i].owner == c->uid))
			json_array_append_new(jobs, status_job(d, &d->jobs[i]));
	for (int i = 0; admin && i < FFM_MAX_RULES; i++)
		if (d->rules[i].used)
			json_array_append_new(rules, status_rule(d, &d->rules[i]));
	for (size_t i = 0; i < MAX_COPIES; i++) {
		uint32_t owner;
		const char *id = copy_at(d, i, &owner);

		if (id && (admin || owner == c->uid))
			json_array_append_new(copying, ffm_json_string(id));
	}
	return json_body(json_pack("{s:i,s:s,s:s,s:b,s:b,s:o,s:o,s:o,s:o,s:I,s:I,"
				   "s:{s:o,s:o,s:o,s:o},s:o}",
				   "version", FFM_PROTO_VERSION,
				   "probe_mode", ffm_collector__probe_mode(d->col),
				   "probe_scope", ffm_collector__per_process(d->col) ? "process" : "system",
				   "map_guard", ffm_collector__map_guard(d->col),
				   "wait_guard", ffm_collector__wait_guard(d->col),
				   "drivers", drivers, "jobs", jobs, "rules", rules,
				   "publishing", copying,
				   "processes_seen", (json_int_t)d->procs_total,
				   "processes_held", (json_int_t)holds_total(d),
				   "sampling", "budget_pct", ffm_json_fixed(d->cfg.sample_budget * 100, 4),
				   "wait_cost_us", ffm_json_fixed(d->cfg.wait_cost_us, 2),
				   "attach_ms", ffm_json_fixed(attach_mean_ms(d), 2),
				   "detach_ms", ffm_json_fixed(1e3 * detach_mean_s(d), 2),
				   "bridge", status_bridge(d)),
			 out, len);
}

static int job_start(struct ffmd *d, const struct ffm_request *req, const struct ucred *cred,
		     char *body, size_t blen, const char **msg)
{
	const char *id = ffm_proto_arg(req, "job"), *key = ffm_proto_arg(req, "key");
	const char *stage_s = ffm_proto_arg(req, "stage"), *owner_s = ffm_proto_arg(req, "owner");
	static struct job_spec sp;
	struct job *j;
	pid_t owner = cred->uid;
	int err, stage = 0;

	memset(&sp, 0, sizeof(sp));
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
	for (uint32_t i = 0; i < req->nargs; i++) {
		const char *n = req->args[i].name;
		struct ffm_selector *s;
		struct ffm_rule r;

		if (strcmp(n, "cgroup") && strcmp(n, "pid") && strcmp(n, "uid") && strcmp(n, "exe"))
			continue;
		if (sp.nsel == FFM_MAX_SELECTORS) {
			*msg = "too many selectors";
			return -ENOSPC;
		}
		s = &sp.sel[sp.nsel++];
		ffm_selector_type(n, &s->type);
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
	if (!sp.nsel) {
		*msg = "job-start needs at least one selector (cgroup=, pid=, uid=, exe=)";
		return -EINVAL;
	}
	sp.id = id;
	/* Without --key every job is its own key (and starts at stage 1): the scheduler's
	 * prolog passes a key so that re-runs of a job escalate. */
	sp.key = key ? key : id;
	sp.owner = owner;
	sp.override_stage = stage;
	err = job_create(d, &sp, &j, msg);
	if (err < 0)
		return err;
	json_body(json_pack("{s:o,s:o,s:i,s:I}", "job", ffm_json_string(j->id), "key",
			    ffm_json_string(j->key), "stage", j->stage,
			    "run", (json_int_t)ffm_jobrun__run_id(j->jr)),
		  body, blen);
	*msg = "started";
	return 0;
}

/*
 * Refused requests are logged, at most REFUSED_BURST per peer uid in each REFUSED_WINDOW_S
 * (the rest are counted and summed up once the window is over): a local user who sends
 * requests in a loop must not fill the journal.
 */
#define REFUSED_BURST 10
#define REFUSED_WINDOW_S 10.0
static void log_refused(const struct conn *c, const char *msg)
{
	static struct {
		uid_t uid;
		double since;
		unsigned n, quiet;
	} peers[16];
	double t = ffm_now_s();
	int k = 0;

	for (int i = 0; i < 16; i++) {
		if (peers[i].since && peers[i].uid == c->cred.uid) {
			k = i;
			break;
		}
		if (peers[i].since < peers[k].since)
			k = i; /* the oldest, given up if this uid is not there */
	}
	if (!peers[k].since || peers[k].uid != c->cred.uid || t - peers[k].since > REFUSED_WINDOW_S) {
		if (peers[k].quiet)
			log_info("%u more requests from uid %u were refused (not logged one by one)",
				 peers[k].quiet, (unsigned)peers[k].uid);
		peers[k].uid = c->cred.uid;
		peers[k].since = t;
		peers[k].n = peers[k].quiet = 0;
	}
	if (peers[k].n++ < REFUSED_BURST)
		log_info("request from uid %u pid %d refused: %s", c->cred.uid, c->cred.pid, msg);
	else
		peers[k].quiet++;
}

/* Send @c its response (status @err, one-line @msg, @body) and close it. */
static void respond(struct ffmd *d, struct conn *c, int err, const char *msg, const char *body)
{
	static char resp[FFM_PROTO_MAX_RESPONSE];
	int n = snprintf(resp, sizeof(resp), "FFM/%d %d %s\n%s", FFM_PROTO_VERSION, err ? -err : 0,
			 msg, body);

	/* A peer gone (EPIPE, ECONNRESET) or a full buffer (EAGAIN) loses its own answer only. */
	if (send(c->fd, resp, n < (int)sizeof(resp) ? (size_t)n : sizeof(resp) - 1,
		 MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno != EPIPE && errno != ECONNRESET &&
	    errno != EAGAIN)
		log_warn("cannot answer uid %u: %s", c->cred.uid, strerror(errno));
	if (!c->waiting) /* a waiting connection is out of the epoll set already */
		ep_del(d, c->fd);
	close(c->fd);
	c->fd = -1;
	c->waiting = false;
}

/* The answer of a job-end: @published, the job's copy for its readers is in place. */
static void answer_end(struct ffmd *d, struct conn *c, bool published)
{
	char body[1024];

	json_body(json_pack("{s:o,s:o,s:i,s:b}", "job", ffm_json_string(c->job),
			    "key", ffm_json_string(c->key), "stage", c->stage, "published", published),
		  body, sizeof(body));
	respond(d, c, 0, published ? "ended" : "ended; its report is being written", body);
}

void answer_waiting(struct ffmd *d, bool all)
{
	double t = ffm_now_s();

	for (int i = 0; i < MAX_CONNS; i++) {
		struct conn *c = &d->ctl.conns[i];

		if (c->fd < 0 || !c->waiting)
			continue;
		if (!copy_pending(d, c->job))
			answer_end(d, c, true);
		else if (all || t > c->deadline)
			answer_end(d, c, false);
	}
}

void copies_take(struct ffmd *d)
{
	uint64_t ticket;

	if (publish_take(&ticket))
		copies_made(d, ticket);
	answer_waiting(d, false);
}

/* job-end job=ID [wait_ms=N]: the job ended, and the answer kept for its copy, N ms at most
 * (DEFAULT_END_WAIT_MS without it, 0: at once); 1 when the answer waits. */
static int job_end_request(struct ffmd *d, struct conn *c, const struct ffm_request *req,
			   const char **msg)
{
	const char *id = ffm_proto_arg(req, "job"), *w = ffm_proto_arg(req, "wait_ms");
	struct job *j = id ? job_find(d, id) : NULL;
	long wait_ms = DEFAULT_END_WAIT_MS;
	char *end;
	int err;

	if (!c->admin) {
		*msg = "permission denied: only root or the admin group may end jobs";
		return -EACCES;
	}
	if (w && (wait_ms = strtol(w, &end, 10), !*w || *end || wait_ms < 0 || wait_ms > 3600000)) {
		*msg = "wait_ms must be milliseconds, 0..3600000";
		return -EINVAL;
	}
	if (!j) {
		*msg = "no active job with this id";
		return -ENOENT;
	}
	snprintf(c->job, sizeof(c->job), "%s", j->id);
	snprintf(c->key, sizeof(c->key), "%s", j->key);
	c->stage = j->stage;
	err = job_end(d, j, false);
	if (err) {
		*msg = "the job ended, but its store could not be finished";
		return err;
	}
	if (!wait_ms || !copy_pending(d, c->job))
		return 0;
	c->waiting = true;
	c->deadline = ffm_now_s() + (wait_ms < MAX_END_WAIT_MS ? wait_ms : MAX_END_WAIT_MS) / 1e3;
	ep_del(d, c->fd); /* the peer says nothing more */
	return 1;
}

void handle_request(struct ffmd *d, struct conn *c)
{
	static char msgbuf[FFM_PROTO_MAX_REQUEST + 1];
	static struct ffm_request req;
	static char body[FFM_PROTO_MAX_RESPONSE - 512];
	const char *msg = "ok";
	ssize_t n;
	int err = 0;

	body[0] = 0;
	/* One more byte than allowed: a longer message is truncated by the socket (MSG_TRUNC
	 * tells), never split into a second request. */
	n = recv(c->fd, msgbuf, sizeof(msgbuf), MSG_DONTWAIT | MSG_TRUNC);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		ep_del(d, c->fd);
		close(c->fd);
		c->fd = -1;
		return;
	}
	if ((size_t)n > FFM_PROTO_MAX_REQUEST) {
		err = -E2BIG;
		msg = "request too long";
	} else if ((err = ffm_proto_parse(msgbuf, n, &req, &msg)) == 0) {
		switch (req.verb) {
		case FFM_VERB_PING:
			msg = "pong";
			break;
		case FFM_VERB_STATUS:
			status_json(d, c, body, sizeof(body));
			break;
		case FFM_VERB_JOB_START:
			if (!c->admin) {
				err = -EACCES;
				msg = "permission denied: only root or the admin group may start jobs";
				break;
			}
			err = job_start(d, &req, &c->cred, body, sizeof(body), &msg);
			break;
		case FFM_VERB_JOB_END:
			err = job_end_request(d, c, &req, &msg);
			if (err == 1)
				return; /* answered once the copy is in place (answer_waiting) */
			if (!err) {
				answer_end(d, c, !copy_pending(d, c->job));
				return;
			}
			break;
		}
	}
	if (err)
		log_refused(c, msg);
	respond(d, c, err, msg, body);
}

int ep_add(struct ffmd *d, int fd, uint64_t tag)
{
	if (epoll_ctl(d->lp.ep, EPOLL_CTL_ADD, fd,
		      &(struct epoll_event){ .events = EPOLLIN, .data.u64 = tag }) < 0) {
		int err = -errno;

		log_err("cannot watch descriptor %d: %s", fd, strerror(-err));
		return err;
	}
	return 0;
}

void ep_del(struct ffmd *d, int fd)
{
	if (epoll_ctl(d->lp.ep, EPOLL_CTL_DEL, fd, NULL) < 0)
		log_warn("cannot stop watching descriptor %d: %s", fd, strerror(errno));
}

void control_init(struct ffmd *d)
{
	d->ctl.lfd = -1;
	for (int i = 0; i < MAX_CONNS; i++)
		d->ctl.conns[i].fd = -1;
}

static void *bind_thread(void *arg)
{
	struct ffmd *d = arg;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	intptr_t err = 0;

	/* This thread's own umask, not the process's (other threads create files meanwhile). */
	if (unshare(CLONE_FS) == 0)
		umask(0);
	strcpy(sa.sun_path, d->ctl.sock_path);
	if (bind(d->ctl.lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		err = -errno;
	return (void *)err;
}

/*
 * The control socket, 0666 whatever the umask: anyone may connect; what they may do is decided
 * per request from the peer's credentials at connect time. The mode is the socket's own
 * (fchmod before bind, bound with a umask of 0 by a thread of its own): no chmod by path,
 * which would follow a link planted in its place.
 */
int control_listen(struct ffmd *d, const char *runtime_dir)
{
	void *ret = NULL;
	pthread_t t;
	int err;

	if (strlen(runtime_dir) + 1 + strlen(FFM_PROTO_SOCKET) >=
	    sizeof(((struct sockaddr_un *)0)->sun_path)) {
		log_err("runtime directory path too long for a socket: %s", runtime_dir);
		return -ENAMETOOLONG;
	}
	snprintf(d->ctl.sock_path, sizeof(d->ctl.sock_path), "%s/" FFM_PROTO_SOCKET, runtime_dir);
	d->ctl.lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	/* The runtime directory is ours and locked: a socket there is a dead ffmd's. */
	unlink(d->ctl.sock_path);
	if (d->ctl.lfd < 0 || fchmod(d->ctl.lfd, 0666) < 0)
		err = -errno;
	else if ((err = pthread_create(&t, NULL, bind_thread, d)) == 0 &&
		 (err = pthread_join(t, &ret)) == 0)
		err = (int)(intptr_t)ret;
	else
		err = -err;
	if (err == 0 && listen(d->ctl.lfd, 16) < 0)
		err = -errno;
	if (err < 0)
		log_err("cannot listen on %s: %s", d->ctl.sock_path, strerror(-err));
	return err;
}

int control_fd(const struct ffmd *d)
{
	return d->ctl.lfd;
}

const char *control_socket(const struct ffmd *d)
{
	return d->ctl.sock_path;
}

void control_admin_set(struct ffmd *d, bool have, gid_t gid)
{
	d->ctl.have_admin_gid = have;
	d->ctl.admin_gid = gid;
}

void conn_ready(struct ffmd *d, uint64_t idx)
{
	struct conn *c = idx < MAX_CONNS ? &d->ctl.conns[idx] : NULL;

	if (c && c->fd >= 0)
		handle_request(d, c);
}

void conns_expire(struct ffmd *d, double t)
{
	for (int i = 0; i < MAX_CONNS; i++) {
		struct conn *c = &d->ctl.conns[i];

		if (c->fd >= 0 && !c->waiting && t > c->deadline) {
			/* Sent nothing in time: close it, the daemon never waits on a client. */
			ep_del(d, c->fd);
			close(c->fd);
			c->fd = -1;
		}
	}
}

void control_close(struct ffmd *d)
{
	for (int i = 0; i < MAX_CONNS; i++)
		if (d->ctl.conns[i].fd >= 0)
			close(d->ctl.conns[i].fd);
	if (d->ctl.lfd >= 0) {
		close(d->ctl.lfd);
		unlink(d->ctl.sock_path);
	}
}

void accept_conn(struct ffmd *d)
{
	int fd = accept4(d->ctl.lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK), nfree = 0, mine = 0;
	socklen_t sl = sizeof(struct ucred);
	struct conn *c = NULL;
	struct ucred cred;
	bool admin;

	if (fd < 0)
		return;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &sl) < 0) {
		close(fd);
		return;
	}
	admin = peer_is_admin(d, fd, &cred);
	for (int i = 0; i < MAX_CONNS; i++) {
		if (d->ctl.conns[i].fd < 0) {
			nfree++;
			if (!c)
				c = &d->ctl.conns[i];
		} else if (d->ctl.conns[i].cred.uid == cred.uid) {
			mine++;
		}
	}
	/* Busy: refuse rather than queue without bound. One user may hold at most
	 * MAX_CONNS_PER_USER connections, and the last RESERVED_CONNS slots are root's and the
	 * admins', so that no local user can lock the scheduler's prolog out by holding
	 * connections open. */
	if (!c || (cred.uid != 0 && (mine >= MAX_CONNS_PER_USER ||
				     (nfree <= RESERVED_CONNS && !admin)))) {
		close(fd);
		return;
	}
	c->fd = fd;
	c->cred = cred;
	c->admin = admin;
	c->waiting = false;
	c->deadline = ffm_now_s() + FFM_PROTO_TIMEOUT_MS / 1000.0;
	if (ep_add(d, fd, TAG_CONN | (uint64_t)(c - d->ctl.conns) << 8) < 0) {
		close(fd);
		c->fd = -1;
	}
}
