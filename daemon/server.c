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
 * spot (the calibration is cached per build-id). While a driver file not seen before is made
 * ready (calibration: about a second; attaching: milliseconds) the process that brought it is
 * held with SIGSTOP, so that its first calls are not missed; a process that was stopped
 * already is left as it is. "Before it can have loaded the driver" is a race ffmd can lose (a
 * loaded node, a preload, a dlopen by path): the map guard closes it, BPF stopping a job's
 * process at the mmap of a libcuda file not declared ready (on_driver_mapped).
 *
 * Job slots and config rules. The BPF side knows FFM_MAX_JOBS slots; a slot is either a job's
 * (started by request, by a rule, or resumed after a restart) or a rule's. A [rule NAME] owns
 * one slot for as long as it is configured: its selectors sit in the BPF rule maps with that
 * slot, so at exec BPF puts a matching process into the rule's slot, with no window in which
 * a call could be missed. When ffmd reads that EXEC record it makes the process a job of its
 * own ("<rule>-<pid>-<start time in clock ticks since boot>", key: the rule's, else
 * ffm_job_key of uid + executable + arguments, stage: the rule's override or the key's plan),
 * gives the job a free slot and moves the process there (ffm_collector__move_pid, which keeps
 * what BPF learned about it). Records that BPF wrote before the move carry the rule's slot:
 * they are routed by tgid (a fork in that window by the parent's tgid) to the new job, in ring
 * buffer order, so nothing is lost or misfiled. A rule's job ends when its last process exits.
 * A process in a rule's slot records what stage 1 records until it is moved (milliseconds).
 *
 * Restarts. Active jobs are journaled in <state_dir>/ffmd-jobs (rewritten atomically at each
 * job start and end). After a crash (the journal still lists jobs) the new ffmd marks each
 * interrupted run ABORTED|PARTIAL and resumes the job under the same id as a new run, with the
 * same selectors; a pid selector whose process is gone (or whose pid was reused: checked by
 * start time) is dropped, and a job with no selector left ends as cancelled. A clean stop
 * (SIGTERM) ends active jobs as aborted runs and leaves an empty journal.
 *
 * SIGHUP re-reads the config file (systemd's ExecReload): rules are replaced, active jobs go on.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
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
#include "daemon/readier.h"
#include "daemon/proto.h"
#include "daemon/resolve.h"
#include "daemon/server.h"
#include "symbols/ffm_driver.h"
#include "store/ffm_store.h"
#include "symbols/ffm_stack.h"

#define MAX_DRIVERS 16
#define MAX_DRIVERS_PER_USER 4 /* entries a non-root user's processes may bring (see driver_new) */
#define FAILED_FORGET_S 60.0   /* an unusable driver is looked at again after this long */
#define HOLD_MAX_S 30.0        /* no process stays held longer, whatever ffmd waits for */
#define PARENT_WATCH_S 2.0     /* how long a held process's parent is watched after the hold */
#define MAX_UNMEASURED 64      /* distinct processes per job remembered as not measured */
#define MAX_CONNS 32
#define MAX_CONNS_PER_USER 4
#define RESERVED_CONNS 8
#define MAX_ROUTES 4096
#define MAX_HOLDS 64
#define MAX_PLINKS 1024
#define MAX_DETACH 256
#define LINGER_S 30.0 /* probes stay attached this long after the last job that needed them */

enum { TAG_RING = 1, TAG_LISTEN, TAG_SIGNAL, TAG_TIMER, TAG_CONN, TAG_READY };

/*
 * A libcuda file in use, by device and inode. PENDING while the readier makes it ready off the
 * loop (the processes that need it are held meanwhile), then READY or FAILED. An entry a
 * non-root user's process brought counts against that user (MAX_DRIVERS_PER_USER); FAILED
 * entries are forgotten after FAILED_FORGET_S, and unused ones give way when the table is full.
 */
enum drv_state { DRV_PENDING, DRV_READY, DRV_FAILED };

struct drv {
	bool used;
	enum drv_state state;
	bool system;        /* the system's own (found at start): never given away */
	uint32_t gen;       /* tells a readier result for a reused entry from a current one */
	uid_t user;         /* the file's owner */
	double since;       /* when it was brought */
	uint64_t dev, ino;
	char path[PATH_MAX];
	struct ffm_ready_driver rd;
	struct ffm_attachment *wait_att;
	struct ffm_attachment *api_att;
	char why[512];
};

/*
 * A process held (stopped) by ffmd or by BPF's map guard until its probes are in place, listed
 * in <state_dir>/ffmd-held (see holds_write). @wait: the driver it waits for (NULL: its holder
 * releases it). @cont: someone of ffm's stopped it, so it gets SIGCONT at release (a process the
 * user stopped stays stopped). @ppid: its parent, which may stop itself on seeing the stop (su,
 * runuser, sudo) and is then continued (see parents_check).
 */
struct hold {
	pid_t pid;
	unsigned long long start;
	struct drv *wait;
	bool cont;
	bool mapped;          /* BPF stopped it at its mmap of {kdev, kino} */
	uint64_t kdev, kino;
	pid_t ppid;
	double since;
};

struct parent_watch {
	pid_t pid;            /* 0: free */
	unsigned long long start;
	double until;
};

/*
 * Per-process scope (ffm_collector__per_process): the probes of one job process on one driver
 * file, attached for that process only. Made when BPF stops the process at its mmap of the file
 * or at its fork from a process with probes, or when a process that maps the file joins a job;
 * freed at its exit, or when it leaves its job.
 */
struct plink {
	pid_t pid;                /* 0: free */
	unsigned long long start; /* its start time: a reused pid is another process */
	struct drv *dv;
	struct ffm_link_key keys[2]; /* declared to BPF: as stat and as the kernel see the file */
	int nkeys;
	struct ffm_attachment *wait_att, *api_att;
};

/* What a job is made from: a job-start request, a rule match, or a journal line. */
struct job_spec {
	const char *id, *key;
	uid_t owner;
	int override_stage; /* 0: the plan decides */
	int nsel;
	struct ffm_selector sel[FFM_MAX_SELECTORS];
	const char *rule;   /* the rule that made it, NULL: a request */
	pid_t root;         /* rule jobs: the process that matched */
	bool adopted;       /* its process sits in a rule's slot: the caller moves it */
	bool resumed;       /* from the journal: its processes run already, its run is partial */
};

struct job {
	bool used;
	bool ending;        /* its last process exited: end it after this round of records */
	uint32_t slot;
	char id[128], key[128];
	char rule[64];      /* "" unless a rule made it */
	uid_t owner;
	int stage, override_stage;
	struct ffm_jobrun *jr;
	int nsel;
	struct ffm_selector sel[FFM_MAX_SELECTORS];
	pid_t root;
	int exit_status;
	double start;
	uint64_t events, events_prev;
	double rate;
	/* Processes whose libcuda could not be used (their calls go unmeasured): the run is
	 * partial and its report says so. */
	pid_t unmeasured[MAX_UNMEASURED];
	uint32_t nunmeasured;
	uint32_t procs, held; /* processes that came to the job, and how many of them ffm held */
	uint32_t not_held;    /* ... would have been held, but a parent would have seen it */
};

struct rule {
	bool used;
	uint32_t slot;
	struct ffmd_rule r;
	uint64_t jobs_made;
};

/* A process that BPF put into a rule's slot, and the job it belongs to now. */
struct route {
	uint32_t tgid;
	int32_t job; /* index in jobs[], -1: free */
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
	struct rule rules[FFM_MAX_RULES];
	uint64_t rule_slots;     /* bit per slot owned by a rule */
	struct route routes[MAX_ROUTES];
	struct drv drvs[MAX_DRIVERS];
	struct plink plinks[MAX_PLINKS];
	struct {
		pthread_t th;
		bool started, stop;
		pthread_mutex_t mu;
		pthread_cond_t cv;
		int n;
		struct ffm_attachment *q[MAX_DETACH];
	} det;                    /* attachments being detached (see detach_later) */
	struct conn conns[MAX_CONNS];
	int ep, lfd, sfd, tfd;
	gid_t admin_gid;
	bool have_admin_gid;
	bool stop;
	double idle_since;        /* no job since then (0: a job is active) */
	double detail_idle_since; /* no stage >= 2 job since then */
	char *att_names[256];     /* the public sync functions of the attached API probes */
	int natt_names;
	double last_tick, last_watchdog;
	unsigned long long watchdog_usec;
	char sock_path[PATH_MAX];
	char journal[sizeof(((struct ffmd_config *)0)->state_dir) + 16];
	bool resuming; /* journal_resume() is reading the journal: do not rewrite it yet */
	char holds_path[sizeof(((struct ffmd_config *)0)->state_dir) + 16];
	struct hold holds[MAX_HOLDS];
	int nholds;
	struct parent_watch parents[MAX_HOLDS];
	struct {
		pid_t pid;        /* 0: free */
		unsigned long long start;
		struct drv *dv;
	} waiters[MAX_HOLDS];     /* processes that will load a pending driver, not held */
	struct ffm_readier *readier;
	uint64_t procs_total, held_total; /* job processes seen, and held (status shows the rate) */
};

/* Length of the valid UTF-8 sequence at @s (1-4), or 0 when its bytes are not one. */
static int utf8_len(const unsigned char *s)
{
	int n = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3 :
		(s[0] & 0xf8) == 0xf0 ? 4 : 0;
	uint32_t cp;

	if (n <= 1)
		return n;
	cp = s[0] & (0x7f >> n);
	for (int i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	/* Overlong forms, surrogates and code points past U+10FFFF are not UTF-8. */
	if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return n;
}

/*
 * A JSON string's content for @s (quotes, backslashes and control characters escaped). Job
 * ids, keys and paths come from clients and config files: any byte but NUL may be in them, and
 * a byte that is not part of valid UTF-8 becomes U+FFFD, so the output is always valid JSON.
 * The result lives in one of a few rotating buffers, enough for one printf's arguments (ffmd is
 * single-threaded); each holds the longest path escaped.
 */
static const char *jesc(const char *s)
{
	static char bufs[8][6 * PATH_MAX + 8];
	static unsigned next;
	char *b = bufs[next++ % 8], *o = b, *end = b + sizeof(bufs[0]) - 8;

	for (const unsigned char *p = (const unsigned char *)s; p && *p && o < end;) {
		int n = utf8_len(p);

		if (*p == '"' || *p == '\\') {
			*o++ = '\\';
			*o++ = (char)*p++;
		} else if (*p < 0x20) {
			o += sprintf(o, "\\u%04x", *p++);
		} else if (!n) {
			o += sprintf(o, "\\ufffd");
			p++;
		} else {
			memcpy(o, p, (size_t)n);
			o += n;
			p += n;
		}
	}
	*o = 0;
	return b;
}

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
		char line[4096];
		size_t len = strlen(name);
		FILE *f = fopen("/etc/group", "re");
		int r = -ENOENT;

		while (f && fgets(line, sizeof(line), f)) {
			char *p;

			if (strncmp(line, name, len) || line[len] != ':')
				continue;
			p = strchr(line + len + 1, ':'); /* past the password field */
			if (p && (n = strtoul(p + 1, &end, 10), end != p + 1)) {
				*gid = (gid_t)n;
				r = 0;
			}
			break;
		}
		if (f)
			fclose(f);
		return r;
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

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- drivers ------------------------------------------------------------------------------ */

static struct drv *driver_find(struct ffmd *d, uint64_t dev, uint64_t ino)
{
	for (int i = 0; i < MAX_DRIVERS; i++)
		if (d->drvs[i].used && d->drvs[i].dev == dev && d->drvs[i].ino == ino)
			return &d->drvs[i];
	return NULL;
}

static void journal_write(struct ffmd *d);
static void drivers_release_waiters(struct ffmd *d, struct drv *dv);

/* Whether a message about @what may be logged now: at most one per 10 s for each @last. */
static bool log_allowed(double *last)
{
	double t = now_s();

	if (*last && t - *last < 10.0)
		return false;
	*last = t;
	return true;
}

static bool driver_in_use(const struct ffmd *d, const struct drv *dv);

static void driver_free(struct ffmd *d, struct drv *dv)
{
	uint32_t gen = dv->gen + 1;

	ffm_collector__driver_forget(d->col, ffm_kernel_dev(dv->dev), dv->ino);
	ffm_attachment__free(dv->api_att);
	ffm_attachment__free(dv->wait_att);
	ffm_ready_driver__release(&dv->rd);
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
	double t = now_s();
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
		dv->since = now_s();
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
		if (d->journal[0] && !d->resuming)
			journal_write(d);
	}
	/* Ready or unusable, it is dealt with: the map guard no longer stops its users. */
	ffm_collector__driver_known(d->col, ffm_kernel_dev(dv->dev), dv->ino);
	drivers_release_waiters(d, dv);
}

/* Results of the readier, as they come (the loop's TAG_READY). */
static void drivers_take(struct ffmd *d)
{
	struct ffm_readier_result res;

	while (ffm_readier__take(d->readier, &res) == 0)
		driver_done(d, &res);
}

/*
 * The entry of the driver file @path, made if new: pending (the readier makes it ready off the
 * loop), or, with @sync (while ffmd starts, before its loop runs), made ready here. NULL when
 * the file is gone or the table refuses it.
 */
static struct drv *driver_get(struct ffmd *d, const char *path, bool sync)
{
	struct ffm_readier_result res = {};
	struct drv *dv;
	struct stat st;

	if (stat(path, &st) < 0)
		return NULL;
	if ((dv = driver_find(d, st.st_dev, st.st_ino)))
		return dv;
	/* Whose it is: the file's owner (a user can make no file that another user owns). */
	if (!(dv = driver_slot(d, st.st_uid, path)))
		return NULL;
	dv->used = true;
	dv->state = DRV_PENDING;
	dv->dev = st.st_dev;
	dv->ino = st.st_ino;
	dv->user = st.st_uid;
	dv->since = now_s();
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

/* Probes are needed while a job is active or a rule could make one. */
static bool any_job(const struct ffmd *d)
{
	if (d->rule_slots)
		return true;
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

/* The stage-2 set: what a job at stage >= 2 needs besides the wait function. */
#define API_PROBES                                                                                 \
	(FFM_PROBE_SYNC_FUNCS | FFM_PROBE_SYNC_STATIC | FFM_PROBE_TRANSFER | FFM_PROBE_ALLOC |     \
	 FFM_PROBE_FREE | FFM_PROBE_MEMSET | FFM_PROBE_LAUNCH |                                    \
	 FFM_PROBE_HASH /* sleepable twins: they hash for stage-3 jobs only */)

/* Attach @probes of @dv (by @path, NULL: its own) system-wide (@pid -1: the sync functions of
 * every stage-2 job) or for process @pid of job @job (its own sync functions). */
static int attach_set(struct ffmd *d, struct drv *dv, const char *path, uint32_t probes, pid_t pid,
		      int job, struct ffm_attachment **att)
{
	const char *names[256];
	const char *const *jn = names;
	size_t nn = 0;
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
	if (!err && pid > 0)
		log_info("attached %zu probes to %s for process %d", ps.n, dv->path, pid);
	else if (!err)
		log_info("attached %zu probes to %s", ps.n, dv->path);
	ffm_probe_set__release(&ps);
	return err;
}

/* Whether every public sync function the stage-2 jobs need has an attached API probe. */
static bool names_covered(struct ffmd *d)
{
	const char *names[256];
	size_t nn = sync_union(d, names, 256);

	for (size_t k = 0; k < nn; k++) {
		int i;

		for (i = 0; i < d->natt_names && strcmp(d->att_names[i], names[k]); i++)
			;
		if (i == d->natt_names)
			return false;
	}
	return true;
}

static void remember_names(struct ffmd *d)
{
	const char *names[256];
	size_t nn = sync_union(d, names, 256);

	for (int i = 0; i < d->natt_names; i++)
		free(d->att_names[i]);
	d->natt_names = 0;
	for (size_t k = 0; k < nn; k++)
		if ((d->att_names[d->natt_names] = strdup(names[k])))
			d->natt_names++;
}

/*
 * Bring every driver's attachments in line with the active jobs. Probes are attached as soon
 * as a job needs them. The wait probe is released only after LINGER_S without a job: every
 * uprobe detach waits for an RCU grace period in the kernel (tens of ms each, seconds for a
 * stage-2 set on a busy machine), which a scheduler starting job after job would pay each
 * time; a probe whose job has gone costs other processes one hash lookup per call. The
 * stage-2 set goes with its last job (see release_api).
 */
static void plinks_update(struct ffmd *d);

static void update_attachments(struct ffmd *d)
{
	bool jobs = any_job(d);
	uint64_t detail = detail_slots(d);
	double t = now_s();
	bool release_all = !jobs && d->idle_since && t - d->idle_since >= LINGER_S;
	/* API probes do not linger: with entry/return pairs (kernels before uprobe sessions)
	 * their return probes put the kernel's trampoline address into the stacks that stage-1
	 * jobs walk (bpf/ffm.bpf.c reads it as the call site). */
	bool release_api = !detail;
	bool reattach = detail && !names_covered(d);

	if (ffm_collector__per_process(d->col)) {
		plinks_update(d);
		return;
	}
	d->idle_since = jobs ? 0 : d->idle_since ? d->idle_since : t;
	d->detail_idle_since = detail ? 0 : d->detail_idle_since ? d->detail_idle_since : t;
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
			err = attach_set(d, dv, NULL, FFM_PROBE_WAIT, -1, -1, &dv->wait_att);
			if (err < 0)
				log_err("failed to attach the wait probe to %s+%#" PRIx64 ": %s (is CAP_BPF granted?)",
					dv->path, dv->rd.wait_off, strerror(-err));
		}
		/* A job that needs stage-2 probes not attached (none yet, or a stage-1 list with
		 * other functions): attach the new set before dropping the old. */
		if (detail && (!dv->api_att || reattach)) {
			struct ffm_attachment *n = NULL;

			err = attach_set(d, dv, NULL, API_PROBES, -1, -1, &n);
			if (err < 0) {
				log_err("failed to attach API probes to %s: %s", dv->path, strerror(-err));
			} else {
				ffm_attachment__free(dv->api_att);
				dv->api_att = n;
			}
		}
	}
	if (detail)
		remember_names(d);
}

/*
 * From /proc/PID/stat: the state letter ('T': stopped, 'Z': zombie) and the start time in clock
 * ticks since boot (field 22). -errno when the process is gone.
 */
static int proc_stat3(pid_t pid, char *state, pid_t *ppid, unsigned long long *start)
{
	char path[64], buf[1024], *rp;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -ESRCH;
	buf[n] = 0;
	rp = strrchr(buf, ')'); /* comm may hold spaces and parentheses */
	/* After ") ": state(3) ppid pgrp session tty_nr tpgid flags minflt cminflt majflt
	 * cmajflt utime stime cutime cstime priority nice num_threads itrealvalue starttime(22) */
	if (!rp || sscanf(rp + 2, "%c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
			  state, ppid, start) != 3)
		return -EPROTO;
	return 0;
}

static int proc_stat(pid_t pid, char *state, unsigned long long *start)
{
	pid_t ppid;

	return proc_stat3(pid, state, &ppid, start);
}

static char proc_state(pid_t pid)
{
	unsigned long long t;
	char st;

	return proc_stat(pid, &st, &t) < 0 ? 0 : st;
}

static unsigned long long proc_start_time(pid_t pid)
{
	unsigned long long t;
	char st;

	return proc_stat(pid, &st, &t) < 0 ? 0 : t;
}

/*
 * The libcuda @pid uses: the one it maps (returns 1), else the one its loader will pick (0). A path through
 * /proc/PID/root is shortened to the plain path when that root is ours: the /proc path dies
 * with the process, and the driver outlives it.
 */
static int driver_path_of(pid_t pid, char *out, size_t len)
{
	struct ffm_driver_list *l = NULL;
	char prefix[64];
	struct stat a, b;
	size_t pl;
	int err = -ENOENT, mapped = 0;

	if (ffm_driver_find_in_process(pid, NULL, &l) == 0 && l->n) {
		const struct ffm_driver_loc *lo = &l->locs[0];
		struct stat st;

		/* The maps path names the file for people; /proc/PID/map_files only while
		 * the process lives. */
		if (stat(lo->path, &st) == 0 && st.st_dev == lo->dev && st.st_ino == lo->ino)
			snprintf(out, len, "%s", lo->path);
		else
			snprintf(out, len, "%s", lo->open_path ? lo->open_path : lo->path);
		err = 0;
		mapped = 1;
	}
	ffm_driver_list__free(l);
	if (err && (err = ffm_resolve_libcuda_pid(pid, NULL, out, len)) < 0)
		return err;
	pl = (size_t)snprintf(prefix, sizeof(prefix), "/proc/%d/root", pid);
	if (!strncmp(out, prefix, pl) && out[pl] == '/' && stat(prefix, &a) == 0 && stat("/", &b) == 0 &&
	    a.st_dev == b.st_dev && a.st_ino == b.st_ino)
		memmove(out, out + pl, strlen(out + pl) + 1);
	/* Likewise a path through /proc/PID/cwd (a relative LD_LIBRARY_PATH): the real path, if
	 * it is the same file from here. */
	if (!strncmp(out, "/proc/", 6) && stat(out, &a) == 0) {
		char *rp = realpath(out, NULL);

		if (rp && strncmp(rp, "/proc/", 6) && strlen(rp) < len && stat(rp, &b) == 0 &&
		    a.st_dev == b.st_dev && a.st_ino == b.st_ino)
			snprintf(out, len, "%s", rp);
		free(rp);
	}
	return mapped;
}

static void update_attachments(struct ffmd *d);

/* Alive and not yet past its exit (a zombie's exit tracepoint has run). */
static bool alive(pid_t pid)
{
	char st = proc_state(pid);

	return st && st != 'Z' && st != 'X' && st != 'x';
}

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
	char tmp[sizeof(d->holds_path) + 8];
	FILE *f;

	if (!d->holds_path[0])
		return;
	if (!d->nholds) {
		unlink(d->holds_path);
		return;
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp", d->holds_path);
	f = fopen(tmp, "we");
	if (!f) {
		log_err("cannot write %s: %s; a process held now stays stopped if ffmd dies", tmp,
			strerror(errno));
		return;
	}
	for (int i = 0; i < d->nholds; i++)
		fprintf(f, "%d %llu\n", d->holds[i].pid, d->holds[i].start);
	if (fclose(f) != 0 || rename(tmp, d->holds_path) < 0)
		log_err("cannot replace %s: %s", d->holds_path, strerror(errno));
}

/*
 * Whether a thread of @ppid is blocked in a wait that reports stopped children (wait4 with
 * WUNTRACED, waitid with WSTOPPED), from /proc/PPID/task/TID/syscall: the number and arguments
 * of the call a blocked thread is in. The user-space twin of the map guard's check (bpf/).
 */
static bool waits_for_stops(pid_t ppid)
{
	char path[64];
	struct dirent *de;
	bool waits = false;
	DIR *dh;

	snprintf(path, sizeof(path), "/proc/%d/task", ppid);
	if (ppid <= 1 || !(dh = opendir(path)))
		return false;
	while (!waits && (de = readdir(dh))) {
		char sp[300], buf[512];
		unsigned long long a[6];
		long nr;
		FILE *f;

		if (de->d_name[0] == '.')
			continue;
		snprintf(sp, sizeof(sp), "/proc/%d/task/%s/syscall", ppid, de->d_name);
		if (!(f = fopen(sp, "re")))
			continue;
		if (fgets(buf, sizeof(buf), f) &&
		    sscanf(buf, "%ld %llx %llx %llx %llx %llx %llx", &nr, &a[0], &a[1], &a[2], &a[3], &a[4],
			   &a[5]) == 7)
			waits = (nr == SYS_wait4 && (a[2] & WUNTRACED)) || (nr == SYS_waitid && (a[3] & WSTOPPED));
		fclose(f);
	}
	closedir(dh);
	return waits;
}

static struct hold *hold_find(struct ffmd *d, pid_t pid)
{
	for (int i = 0; i < d->nholds; i++)
		if (d->holds[i].pid == pid)
			return &d->holds[i];
	return NULL;
}

static int job_of_pid(struct ffmd *d, pid_t pid);

/*
 * Hold @pid: list it, and stop it unless it is stopped already (@bpf_stopped: BPF stopped it,
 * so it gets SIGCONT at release; stopped by someone else, it is left stopped). NULL when it is
 * not held: the list is full (a process BPF stopped is then let go at once: unmeasured beats
 * stuck), or its parent waits for stopped children and would see the stop.
 */
static struct hold *hold(struct ffmd *d, pid_t pid, bool bpf_stopped)
{
	struct hold *h = hold_find(d, pid);

	if (!h) {
		pid_t ppid = 0;
		unsigned long long t;
		char st = 0;
		int j;

		if (!bpf_stopped && proc_stat3(pid, &st, &ppid, &t) == 0 && st != 'T' && st != 't' &&
		    waits_for_stops(ppid))
			return NULL;

		if (d->nholds == MAX_HOLDS) {
			log_warn("more than %d processes held; process %d is not (its first calls may go "
				 "unmeasured)", MAX_HOLDS, pid);
			if (bpf_stopped)
				kill(pid, SIGCONT);
			return NULL;
		}
		h = &d->holds[d->nholds++];
		memset(h, 0, sizeof(*h));
		h->pid = pid;
		h->since = now_s();
		if (proc_stat3(pid, &st, &h->ppid, &h->start) < 0)
			h->ppid = 0;
		d->held_total++;
		if ((j = job_of_pid(d, pid)) >= 0)
			d->jobs[j].held++;
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

	if (h->ppid <= 1 || proc_stat(h->ppid, &st, &start) < 0)
		return;
	for (int i = 0; i < MAX_HOLDS; i++)
		if (!d->parents[i].pid || d->parents[i].pid == h->ppid) {
			d->parents[i] = (struct parent_watch){ h->ppid, start, now_s() + PARENT_WATCH_S };
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
static void parents_check(struct ffmd *d)
{
	double t = now_s();

	for (int i = 0; i < MAX_HOLDS; i++) {
		struct parent_watch *w = &d->parents[i];
		unsigned long long start;
		char st;

		if (!w->pid)
			continue;
		if (proc_stat(w->pid, &st, &start) < 0 || start != w->start) {
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
static void hold_release(struct ffmd *d, pid_t pid)
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
		kill(pid, SIGCONT);
		parent_watch(d, h);
	}
	*h = d->holds[--d->nholds];
	holds_write(d);
}

/* Whatever a hold waits for, it ends after HOLD_MAX_S: no process stays stopped for ffm. */
static void holds_expire(struct ffmd *d)
{
	double t = now_s();

	for (int i = d->nholds - 1; i >= 0; i--)
		if (t - d->holds[i].since > HOLD_MAX_S) {
			log_warn("process %d held for %.0f s%s: let go (its calls may go unmeasured)",
				 d->holds[i].pid, t - d->holds[i].since,
				 d->holds[i].wait ? " waiting for its driver" : "");
			hold_release(d, d->holds[i].pid);
		}
}

/* At start: let go the processes a previous ffmd held when it died. */
static void holds_resume(struct ffmd *d)
{
	unsigned long long start;
	FILE *f = fopen(d->holds_path, "re");
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
	unlink(d->holds_path);
}

/* ---- per-process probes ------------------------------------------------------------------ */

/*
 * Detaching a uprobe link waits for the kernel (an RCU grace period, tens of ms). Per-process
 * probes go at every exit of a process that had them: a thread detaches them, so that ffmd's
 * loop does not stall on a job's processes ending together.
 */
static void *detacher(void *arg)
{
	struct ffmd *d = arg;

	pthread_mutex_lock(&d->det.mu);
	for (;;) {
		struct ffm_attachment *a;

		while (!d->det.n && !d->det.stop)
			pthread_cond_wait(&d->det.cv, &d->det.mu);
		if (!d->det.n)
			break;
		a = d->det.q[--d->det.n];
		pthread_mutex_unlock(&d->det.mu);
		ffm_attachment__free(a);
		pthread_mutex_lock(&d->det.mu);
	}
	pthread_mutex_unlock(&d->det.mu);
	return NULL;
}

static void detacher_start(struct ffmd *d)
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
static void detacher_stop(struct ffmd *d)
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

/* Detach *@a in the background (at once when the queue is full) and clear it. */
static void detach_later(struct ffmd *d, struct ffm_attachment **a)
{
	bool queued = false;

	if (!*a)
		return;
	if (d->det.started) {
		pthread_mutex_lock(&d->det.mu);
		if (d->det.n < MAX_DETACH) {
			d->det.q[d->det.n++] = *a;
			queued = true;
			pthread_cond_signal(&d->det.cv);
		}
		pthread_mutex_unlock(&d->det.mu);
	}
	if (!queued)
		ffm_attachment__free(*a);
	*a = NULL;
}

static struct rule *rule_of_slot(struct ffmd *d, uint32_t slot);
static int route_find(const struct ffmd *d, uint32_t tgid);

/* The job @pid belongs to (index in jobs[]); -1: tracked, in a rule's slot, not yet adopted;
 * -2: not tracked. */
static int job_of_pid(struct ffmd *d, pid_t pid)
{
	int slot = ffm_collector__pid_slot(d->col, pid), j;

	if (slot < 0 || slot >= FFM_MAX_JOBS)
		return -2;
	if (d->jobs[slot].used)
		return slot;
	if (!rule_of_slot(d, (uint32_t)slot))
		return -2;
	j = route_find(d, (uint32_t)pid);
	return j >= 0 && d->jobs[j].used ? j : -1;
}

static struct plink *plink_find(struct ffmd *d, pid_t pid, const struct drv *dv)
{
	for (int i = 0; i < MAX_PLINKS; i++)
		if (d->plinks[i].pid == pid && d->plinks[i].dv == dv)
			return &d->plinks[i];
	return NULL;
}

/* Declare to BPF that @pl's process has the probes of the file BPF knows as {kdev, ino}. */
static void plink_key(struct ffmd *d, struct plink *pl, uint64_t kdev, uint64_t ino)
{
	for (int i = 0; i < pl->nkeys; i++)
		if (pl->keys[i].dev == kdev && pl->keys[i].ino == ino)
			return;
	if (pl->nkeys == 2)
		return;
	pl->keys[pl->nkeys++] = (struct ffm_link_key){ .tgid = (uint32_t)pl->pid, .dev = kdev, .ino = ino };
	ffm_collector__set_linked(d->col, pl->pid, kdev, ino, true);
}

/* Attach what @pl's process needs now: the wait function, and the stage-2 set while its job is
 * at stage 2 or above; the stage-2 set goes when it is no longer needed. */
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

static void plink_sync(struct ffmd *d, struct plink *pl)
{
	int job = job_of_pid(d, pl->pid), err;
	bool api = job >= 0 && d->jobs[job].stage >= 2;
	char buf[PATH_MAX];
	const char *path = pl->wait_att && (!api || pl->api_att) ? NULL : plink_path(pl->dv, pl->pid, buf, sizeof(buf));

	if (!pl->wait_att &&
	    (err = attach_set(d, pl->dv, path, FFM_PROBE_WAIT, pl->pid, job, &pl->wait_att)) < 0 && alive(pl->pid))
		log_err("failed to attach the wait probe to %s for process %d: %s", pl->dv->path, pl->pid,
			strerror(-err));
	if (api && !pl->api_att &&
	    (err = attach_set(d, pl->dv, path, API_PROBES, pl->pid, job, &pl->api_att)) < 0 && alive(pl->pid))
		log_err("failed to attach API probes to %s for process %d: %s", pl->dv->path, pl->pid,
			strerror(-err));
	if (!api && pl->api_att)
		detach_later(d, &pl->api_att);
}

static void plink_free(struct ffmd *d, struct plink *pl)
{
	pid_t pid = pl->pid;
	bool others = false;

	for (int i = 0; i < pl->nkeys; i++)
		ffm_collector__set_linked(d->col, pid, pl->keys[i].dev, pl->keys[i].ino, false);
	detach_later(d, &pl->wait_att);
	detach_later(d, &pl->api_att);
	memset(pl, 0, sizeof(*pl));
	for (int i = 0; i < MAX_PLINKS && !others; i++)
		others = d->plinks[i].pid == pid;
	if (!others)
		ffm_collector__set_linked(d->col, pid, 0, 0, false);
}

/* Give process @pid (mapping usable driver @dv) its own probes, if it has none there yet. */
static struct plink *link_process(struct ffmd *d, pid_t pid, struct drv *dv)
{
	struct plink *pl = plink_find(d, pid, dv);

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
	pl->pid = pid;
	pl->start = proc_start_time(pid);
	pl->dv = dv;
	plink_sync(d, pl);
	if (!pl->wait_att) {
		plink_free(d, pl);
		return NULL;
	}
	ffm_collector__set_linked(d->col, pid, 0, 0, true);
	plink_key(d, pl, ffm_kernel_dev(dv->dev), dv->ino);
	return pl;
}

static void plinks_drop_pid(struct ffmd *d, pid_t pid)
{
	for (int i = 0; i < MAX_PLINKS; i++)
		if (d->plinks[i].pid == pid)
			plink_free(d, &d->plinks[i]);
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
		else
			plink_sync(d, pl);
	}
}

static bool driver_in_use(const struct ffmd *d, const struct drv *dv)
{
	if (dv->wait_att || dv->api_att)
		return true;
	for (int i = 0; i < MAX_PLINKS; i++)
		if (d->plinks[i].pid && d->plinks[i].dv == dv)
			return true;
	return false;
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
 * partial (job_end). */
static void job_unmeasured_in(struct ffmd *d, int idx, pid_t pid)
{
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

static void job_unmeasured(struct ffmd *d, pid_t pid)
{
	job_unmeasured_in(d, job_of_pid(d, pid), pid);
}

/* The job a record of a process belongs to, without moving anything (see record_job). */
static int job_of_rec(struct ffmd *d, const struct ffm_rec_hdr *h)
{
	int j;

	if (h->job < FFM_MAX_JOBS && d->jobs[h->job].used)
		return (int)h->job;
	j = route_find(d, h->tgid);
	return j >= 0 && d->jobs[j].used ? j : -1;
}

/*
 * Process @pid will use (or uses) driver @dv, which is no longer pending: give it its probes.
 * Per-process scope: attached now, whether or not it has mapped the file yet, so that its mmap
 * finds them and the map guard does not stop it (@kkey: the file as BPF saw it at that mmap).
 */
static void driver_use(struct ffmd *d, pid_t pid, struct drv *dv, const uint64_t *kkey)
{
	if (dv->state != DRV_READY) {
		job_unmeasured(d, pid);
		return;
	}
	if (ffm_collector__per_process(d->col)) {
		struct plink *pl = link_process(d, pid, dv);

		if (!pl && alive(pid))
			job_unmeasured(d, pid); /* its probes could not be attached */
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
	for (int i = 0; i < MAX_HOLDS; i++)
		if (d->waiters[i].pid && d->waiters[i].dv == dv) {
			pid_t pid = d->waiters[i].pid;

			d->waiters[i].pid = 0;
			if (proc_start_time(pid) == d->waiters[i].start)
				driver_use(d, pid, dv, NULL);
		}
	for (int i = d->nholds - 1; i >= 0; i--) {
		struct hold *h = &d->holds[i];
		pid_t pid = h->pid;

		if (h->wait != dv)
			continue;
		h->wait = NULL;
		driver_use(d, pid, dv, h->mapped ? (const uint64_t[]){ h->kdev, h->kino } : NULL);
		hold_release(d, pid);
	}
}

/*
 * The driver process @pid maps or will load, made ready if new. A driver not seen before is
 * made ready off the loop while the process is held (it has not loaded it yet, or BPF stopped
 * it at the mmap); one that is ready gives the process its probes at once.
 */
static struct drv *ensure_driver_for_pid(struct ffmd *d, pid_t pid)
{
	char path[PATH_MAX];
	struct stat st;
	struct drv *dv;
	int err = driver_path_of(pid, path, sizeof(path));
	bool mapped = err == 1;

	if (err < 0 || stat(path, &st) < 0) {
		/* No libcuda for it (a non-CUDA process of the job) is normal; being refused
		 * its environment or root is not, and must not go unnoticed. */
		if (err == -EACCES || err == -EPERM)
			log_warn("cannot tell which libcuda process %d will load: %s (ffmd needs "
				 "CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH), its calls may go unmeasured",
				 pid, strerror(-err));
		return NULL;
	}
	dv = driver_find(d, st.st_dev, st.st_ino);
	if (!dv)
		dv = driver_get(d, path, false);
	if (!dv) {
		job_unmeasured(d, pid);
		return NULL;
	}
	if (dv->state == DRV_PENDING && mapped) {
		/* It may be calling it now: held until its probes are there. */
		struct hold *h = hold(d, pid, false);

		if (h) {
			h->wait = dv;
			log_info("holding process %d while its driver %s is made ready", pid, path);
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
			d->waiters[free_w] = (typeof(d->waiters[0])){ pid, proc_start_time(pid), dv };
		return dv;
	}
	driver_use(d, pid, dv, NULL);
	return dv;
}

/* Wait up to @ms for @pid to be stopped or gone; whether it stopped. */
static bool wait_stopped(pid_t pid, int ms)
{
	for (int i = 0; i < ms; i++) {
		char st = proc_state(pid);

		if (st == 'T' || st == 't')
			return true;
		if (!st || st == 'Z' || st == 'X' || st == 'x')
			return false;
		usleep(1000);
	}
	return false;
}

/*
 * A job's process maps a libcuda file it has no probes for (a driver not seen before, or ffmd
 * late to give it its probes), and BPF stopped it there (see struct ffm_rec_map). The stop
 * lands when its mmap returns, and only then do its maps show the file. Make the driver ready
 * as for an exec, declare the file (as BPF saw it: a file reached through an overlay may not
 * stat to the same device) and let the process go, once the driver is ready. Done whatever
 * became of its job: nobody else would send the SIGCONT.
 */
static void on_driver_mapped(struct ffmd *d, const struct ffm_rec_map *m)
{
	pid_t pid = (pid_t)m->hdr.tgid;
	struct drv *dv = NULL;
	struct hold *h = NULL;
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
		h->mapped = true;
		h->kdev = m->dev;
		h->kino = m->ino;
		log_info("process %d maps a libcuda %s (device %#" PRIx64 ", inode %" PRIu64
			 "): held at its mmap until its probes are there", pid,
			 dv && ffm_collector__per_process(d->col) ? "it has no probes on" : "not seen before",
			 (uint64_t)m->dev, (uint64_t)m->ino);
	}
	if (m->stopped && !wait_stopped(pid, 500) && alive(pid))
		log_warn("process %d did not stop at its libcuda mmap; its first calls may go unmeasured",
			 pid);
	if (!dv)
		dv = ensure_driver_for_pid(d, pid);
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
		job_unmeasured_in(d, job_of_rec(d, &m->hdr), pid);
	if (h)
		hold_release(d, pid);
}

/*
 * Per-process scope: a process with probes forked, and BPF stopped the child before it ran (see
 * FFM_PROC_STOPPED): it shares the parent's driver mappings, not its probes. Give it its own,
 * then let it go, whatever became of its job.
 */
static void on_fork_stopped(struct ffmd *d, const struct ffm_rec_proc *p)
{
	pid_t pid = (pid_t)p->hdr.tgid;

	hold(d, pid, true);
	if (!wait_stopped(pid, 500) && alive(pid))
		log_warn("process %d did not stop at its fork; its first calls may go unmeasured", pid);
	for (int i = 0; i < MAX_PLINKS; i++) {
		struct plink *parent = &d->plinks[i], *pl;

		if (parent->pid != (pid_t)p->ppid || !(pl = link_process(d, pid, parent->dv)))
			continue;
		for (int k = 0; k < parent->nkeys; k++)
			plink_key(d, pl, parent->keys[k].dev, parent->keys[k].ino);
	}
	hold_release(d, pid);
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

/* Put process @p into job slot @slot and give it its driver; false when it is gone (its exit
 * came before the tracking and removed nothing, so the entry is removed here). */
static bool track_one(struct ffmd *d, pid_t p, uint32_t slot)
{
	unsigned long long start;
	pid_t ppid = 0;
	char state;

	/* Never ffmd itself nor a program it runs (the calibration probe): a job that holds
	 * them deadlocks the driver it waits for (see ffm_collector_opts.exclude_self). */
	if (p == getpid() || (proc_stat3(p, &state, &ppid, &start) == 0 && ppid == getpid()))
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
	pid_t queue[4096];
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
			if (parse_pid(line, &p) == 0)
				track_one(d, p, slot);
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

/* Remove the BPF rules of @sel that still point at @slot, then hand them to whoever else has them. */
static void selectors_drop(struct ffmd *d, const struct ffm_selector *sel, int nsel, uint32_t slot)
{
	for (int i = 0; i < nsel; i++) {
		struct ffm_rule r;

		if (selector_rule(&sel[i], &r) > 0 && ffm_collector__rule_slot(d->col, &r) == (int)slot)
			ffm_collector__del_rule(d->col, &r);
	}
	selectors_resync(d);
}

static void routes_drop_job(struct ffmd *d, int job)
{
	for (int i = 0; i < MAX_ROUTES; i++)
		if (d->routes[i].tgid && d->routes[i].job == job)
			d->routes[i].tgid = 0;
}

static int route_find(const struct ffmd *d, uint32_t tgid)
{
	for (int i = 0; i < MAX_ROUTES; i++)
		if (d->routes[i].tgid == tgid)
			return d->routes[i].job;
	return -1;
}

static void route_add(struct ffmd *d, uint32_t tgid, int job)
{
	for (int i = 0; i < MAX_ROUTES; i++)
		if (!d->routes[i].tgid) {
			d->routes[i].tgid = tgid;
			d->routes[i].job = job;
			return;
		}
	/* Only records written before a move use routes, so a full table loses those of
	 * the newest processes; say so rather than misfile them. */
	log_warn("more than %d processes waiting to be moved to their jobs; records of %u before the move are dropped",
		 MAX_ROUTES, tgid);
}

static void job_release(struct ffmd *d, struct job *j)
{
	pid_t pids[1024];
	int n = ffm_collector__job_pids(d->col, j->slot, pids, 1024);
	struct ffm_job_cfg off = {};

	for (int i = 0; i < n; i++)
		ffm_collector__untrack_pid(d->col, pids[i]);
	selectors_drop(d, j->sel, j->rule[0] ? 0 : j->nsel, j->slot);
	ffm_collector__set_job(d->col, j->slot, &off);
	routes_drop_job(d, (int)(j - d->jobs));
	j->jr = ffm_jobrun__free(j->jr);
	j->used = false;
}

/* ---- the journal of active jobs (see the top of this file) -------------------------------- */

/* Values are written %XX-escaped where they could break the line format. */
static void put_escaped(FILE *f, const char *v)
{
	for (; *v; v++) {
		unsigned char c = (unsigned char)*v;

		if (c == '%' || c == '\t' || c == '\n' || c < 0x20)
			fprintf(f, "%%%02X", c);
		else
			fputc(c, f);
	}
}

static void unescape(char *s)
{
	char *o = s;

	for (; *s; s++) {
		unsigned x;

		if (*s == '%' && sscanf(s + 1, "%2x", &x) == 1) {
			*o++ = (char)x;
			s += 2;
		} else {
			*o++ = *s;
		}
	}
	*o = 0;
}

static const char *sel_name(enum ffm_sel_type t)
{
	return t == FFM_SEL_CGROUP ? "cgroup" : t == FFM_SEL_PID ? "pid" : t == FFM_SEL_UID ? "uid" : "exe";
}

static int sel_type(const char *n, enum ffm_sel_type *t)
{
	if (!strcmp(n, "cgroup"))
		*t = FFM_SEL_CGROUP;
	else if (!strcmp(n, "pid"))
		*t = FFM_SEL_PID;
	else if (!strcmp(n, "uid"))
		*t = FFM_SEL_UID;
	else if (!strcmp(n, "exe"))
		*t = FFM_SEL_EXE;
	else
		return -EINVAL;
	return 0;
}

/*
 * First one line per usable driver file, "driver=PATH": after a crash they are made ready (the
 * calibration is cached) before the jobs resume, so the resumed jobs' processes are probed from
 * their first call even when their libcuda is not the system's. Then one line per active job,
 * tab-separated name=value fields:
 *     job=ID  key=K  owner=UID  stage=N  run=RUN  rule=NAME  sel=TYPE:VALUE ...
 * A pid selector is written "pid:PID@STARTTIME" so that a reused pid is not taken for the job's.
 */
static void journal_write(struct ffmd *d)
{
	char tmp[sizeof(d->journal) + 8];
	FILE *f;
	int fd;

	snprintf(tmp, sizeof(tmp), "%s.tmp", d->journal);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
	if (fd < 0 || !(f = fdopen(fd, "w"))) {
		log_err("cannot write %s: %s; jobs active now are not resumed after a crash", tmp,
			strerror(errno));
		if (fd >= 0)
			close(fd);
		return;
	}
	fprintf(f, "# ffmd's active jobs, resumed after a crash; do not edit\n");
	for (int i = 0; i < MAX_DRIVERS; i++) {
		if (!d->drvs[i].used || d->drvs[i].state != DRV_READY)
			continue;
		fputs("driver=", f);
		put_escaped(f, d->drvs[i].path);
		fputc('\n', f);
	}
	for (int i = 0; i < FFM_MAX_JOBS; i++) {
		struct job *j = &d->jobs[i];

		if (!j->used)
			continue;
		fputs("job=", f);
		put_escaped(f, j->id);
		fputs("\tkey=", f);
		put_escaped(f, j->key);
		fprintf(f, "\towner=%u\tstage=%d\trun=%" PRId64 "\trule=", j->owner, j->override_stage,
			ffm_jobrun__run_id(j->jr));
		put_escaped(f, j->rule);
		for (int k = 0; k < j->nsel; k++) {
			fprintf(f, "\tsel=%s:", sel_name(j->sel[k].type));
			put_escaped(f, j->sel[k].value);
			if (j->sel[k].type == FFM_SEL_PID) {
				pid_t p = (pid_t)atoi(j->sel[k].value);

				fprintf(f, "@%llu", proc_start_time(p));
			}
		}
		fputc('\n', f);
	}
	if (fflush(f) != 0 || fsync(fileno(f)) != 0 || fclose(f) != 0) {
		log_err("cannot write %s: %s", tmp, strerror(errno));
		unlink(tmp);
		return;
	}
	if (rename(tmp, d->journal) < 0)
		log_err("cannot replace %s: %s", d->journal, strerror(errno));
}

/* ---- starting and ending jobs ------------------------------------------------------------ */

static int job_slot_free(const struct ffmd *d)
{
	for (int i = 0; i < FFM_MAX_JOBS; i++)
		if (!d->jobs[i].used && !(d->rule_slots & (1ull << i)))
			return i;
	return -1;
}

/* Make @sp a running job: store run, BPF slot, selectors. On failure nothing stays. */
static int job_create(struct ffmd *d, const struct job_spec *sp, struct job **ret, const char **msg)
{
	struct ffm_jobrun_opts jo = { .sz = sizeof(jo) };
	struct ffm_job_cfg cfg;
	struct job *j;
	int slot, err;

	*ret = NULL;
	if (job_find(d, sp->id)) {
		*msg = "a job with this id is already active";
		return -EEXIST;
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

	jo.state_dir = d->cfg.state_dir;
	jo.key = j->key;
	jo.job_id = j->id;
	jo.uid = j->owner;
	jo.override_stage = sp->override_stage;
	jo.slot = j->slot;
	jo.collector = d->col;
	jo.sym = d->sym;
	jo.apis = d->apis;
	for (int i = 0; i < FFM_MAX_JOBS; i++)
		if (d->jobs[i].used && d->jobs[i].jr && !strcmp(d->jobs[i].key, j->key))
			jo.store = ffm_jobrun__store(d->jobs[i].jr);
	for (int i = 0; i < MAX_DRIVERS; i++)
		if (d->drvs[i].used && d->drvs[i].state == DRV_READY) {
			jo.driver_path = d->drvs[i].path;
			jo.driver_build_id = ffm_driver__build_id(d->drvs[i].rd.drv);
			jo.wait_off = d->drvs[i].rd.wait_off;
			jo.wait_size = d->drvs[i].rd.wait_size;
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
	j->start = now_s();
	cfg.stage = j->stage;
	cfg.flags = ffm_jobrun__job_flags(j->jr); /* stages 3-4 add memory tracing, hashing */
	ffm_collector__clear_drops(d->col, j->slot);
	ffm_collector__set_job(d->col, j->slot, &cfg);
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
			if (s->type == FFM_SEL_CGROUP)
				track_cgroup_procs(d, s->value, j->slot, 0);
			else if (sp->resumed)
				track_matching_procs(d, s, j->slot);
		}
	}
	update_attachments(d);
	log_info("job %s started: key %s, stage %d, owner %u, %d selector%s%s%s", j->id, j->key,
		 j->stage, j->owner, j->nsel, j->nsel == 1 ? "" : "s", j->rule[0] ? ", rule " : "", j->rule);
	journal_write(d);
	*ret = j;
	return 0;
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
		sel_type(n, &s->type);
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
	snprintf(body, blen, "{\"job\":\"%s\",\"key\":\"%s\",\"stage\":%d,\"run\":%" PRId64 "}\n",
		 jesc(j->id), jesc(j->key), j->stage, ffm_jobrun__run_id(j->jr));
	*msg = "started";
	return 0;
}

/* Never called from inside the ring buffer callback (it consumes). */
static int job_end(struct ffmd *d, struct job *j, bool aborted)
{
	double wall = now_s() - j->start;
	int err;

	/* Records still in the ring buffer belong to this run. */
	ffm_collector__consume(d->col);
	if (j->nunmeasured)
		ffm_jobrun__set_unmeasured(j->jr, j->nunmeasured);
	err = ffm_jobrun__end(j->jr, wall, j->exit_status, aborted, true);
	log_info("job %s ended after %.2f s (%" PRIu64 " records; %u of %u processes held%s%s)%s", j->id,
		 wall, j->events, j->held, j->procs, j->nunmeasured ? ", some not measured: " : "",
		 j->nunmeasured ? "their driver could not be used" : "", err < 0 ? ", store error" : "");
	job_release(d, j);
	update_attachments(d);
	if (!d->stop)
		journal_write(d);
	return err;
}

/* Rule jobs whose last process exited during the last round of records. */
static void end_finished_jobs(struct ffmd *d)
{
	for (int i = 0; i < FFM_MAX_JOBS; i++)
		if (d->jobs[i].used && d->jobs[i].ending)
			job_end(d, &d->jobs[i], false);
}

/* ---- rules -------------------------------------------------------------------------------- */

static bool rule_same(const struct ffmd_rule *a, const struct ffmd_rule *b)
{
	if (strcmp(a->name, b->name) || strcmp(a->key, b->key) || a->stage != b->stage || a->nsel != b->nsel)
		return false;
	for (int i = 0; i < a->nsel; i++)
		if (a->sel[i].type != b->sel[i].type || strcmp(a->sel[i].value, b->sel[i].value))
			return false;
	return true;
}

static struct rule *rule_of_slot(struct ffmd *d, uint32_t slot)
{
	if (slot >= FFM_MAX_JOBS || !(d->rule_slots & (1ull << slot)))
		return NULL;
	for (int i = 0; i < FFM_MAX_RULES; i++)
		if (d->rules[i].used && d->rules[i].slot == slot)
			return &d->rules[i];
	return NULL;
}

/*
 * A process in @ru's slot: make it a job of its own and move it to the job's slot. @p: its EXEC
 * record, whose comm and argument hash make the key (NULL: found there by a scan, read from
 * /proc the same way). Returns the job's index, or -1.
 */
static int rule_adopt(struct ffmd *d, struct rule *ru, uint32_t tgid, uint32_t uid,
		      const struct ffm_rec_proc *p)
{
	static struct job_spec sp;
	char id[128], key[128], comm[17] = "", args[FFM_ARGS_HASH_MAX], path[64];
	unsigned long long st = proc_start_time((pid_t)tgid);
	uint64_t ah = p ? p->args_hash : 0;
	const char *msg = "";
	struct job *j;
	ssize_t n;
	int err, fd;

	memset(&sp, 0, sizeof(sp));
	snprintf(id, sizeof(id), "%s-%u-%llu", ru->r.name, tgid, st);
	if (p) {
		snprintf(comm, sizeof(comm), "%.16s", p->comm);
	} else {
		snprintf(path, sizeof(path), "/proc/%u/comm", tgid);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0) {
			n = read(fd, comm, sizeof(comm) - 1);
			comm[n > 0 ? n : 0] = 0;
			comm[strcspn(comm, "\n")] = 0;
			close(fd);
		}
		snprintf(path, sizeof(path), "/proc/%u/cmdline", tgid);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0) {
			n = read(fd, args, sizeof(args));
			ah = n > 0 ? ffm_args_block_hash(args, (size_t)n) : 0;
			close(fd);
		}
	}
	if (ru->r.key[0])
		snprintf(key, sizeof(key), "%s", ru->r.key);
	else
		ffm_job_key_exec(uid, comm, ah, key, sizeof(key));
	sp.id = id;
	sp.key = key;
	sp.owner = uid;
	sp.override_stage = ru->r.stage;
	sp.rule = ru->r.name;
	sp.root = (pid_t)tgid;
	sp.adopted = true;
	sp.nsel = 1;
	sp.sel[0].type = FFM_SEL_PID;
	snprintf(sp.sel[0].value, sizeof(sp.sel[0].value), "%u", tgid);
	err = job_create(d, &sp, &j, &msg);
	if (err < 0) {
		log_err("rule %s: cannot make process %u a job: %s", ru->r.name, tgid, msg);
		return -1;
	}
	ru->jobs_made++;
	return (int)(j - d->jobs);
}

/* Take every process still in @ru's slot (records of them may be in flight too). */
static void rule_adopt_waiting(struct ffmd *d, struct rule *ru)
{
	pid_t pids[1024];
	int n = ffm_collector__job_pids(d->col, ru->slot, pids, 1024);

	for (int i = 0; i < n; i++) {
		char path[64];
		struct stat st;
		int job = route_find(d, (uint32_t)pids[i]);

		if (job < 0) {
			snprintf(path, sizeof(path), "/proc/%d", pids[i]);
			job = rule_adopt(d, ru, (uint32_t)pids[i], stat(path, &st) == 0 ? st.st_uid : 0, NULL);
			if (job < 0)
				continue;
			route_add(d, (uint32_t)pids[i], job);
		}
		ffm_collector__move_pid(d->col, pids[i], d->jobs[job].slot);
	}
}

static int rule_install(struct ffmd *d, const struct ffmd_rule *r, struct rule *ru)
{
	struct ffm_job_cfg cfg = { .flags = FFM_JOB_ACTIVE | FFM_JOB_STACKS, .stage = 1 };
	int slot = job_slot_free(d), err = 0, k, cur;

	if (slot < 0) {
		log_err("rule %s: no free job slot (%d in use)", r->name, FFM_MAX_JOBS);
		return -ENOSPC;
	}
	memset(ru, 0, sizeof(*ru));
	ru->r = *r;
	ru->slot = (uint32_t)slot;
	for (k = 0; k < r->nsel; k++) {
		struct ffm_rule br;

		err = selector_rule(&r->sel[k], &br);
		if (err <= 0) {
			log_err("rule %s: %s %s: %s", r->name, sel_name(r->sel[k].type), r->sel[k].value,
				err ? strerror(-err) : "not a rule selector");
			err = err ? err : -EINVAL;
			break;
		}
		cur = ffm_collector__rule_slot(d->col, &br);
		if (cur >= 0 && d->jobs[cur].used)
			continue; /* a job by request has it: it passes to us when that ends */
		err = ffm_collector__add_rule(d->col, &br, ru->slot);
		if (err < 0) {
			log_err("rule %s: cannot add selector %s: %s", r->name, r->sel[k].value, strerror(-err));
			break;
		}
	}
	if (err < 0) {
		selectors_drop(d, r->sel, k, ru->slot);
		return err;
	}
	ffm_collector__clear_drops(d->col, ru->slot);
	ffm_collector__set_job(d->col, ru->slot, &cfg);
	ru->used = true;
	d->rule_slots |= 1ull << ru->slot;
	log_info("rule %s: %d selector%s, slot %u", r->name, r->nsel, r->nsel == 1 ? "" : "s", ru->slot);
	return 0;
}

/* Stop @ru matching; processes already in its slot become jobs as usual; free the slot. */
static void rule_remove(struct ffmd *d, struct rule *ru)
{
	struct ffm_job_cfg off = {};

	ru->used = false; /* out of selectors_resync's sight */
	selectors_drop(d, ru->r.sel, ru->r.nsel, ru->slot);
	ru->used = true;
	ffm_collector__consume(d->col);
	rule_adopt_waiting(d, ru);
	ffm_collector__set_job(d->col, ru->slot, &off);
	d->rule_slots &= ~(1ull << ru->slot);
	ru->used = false;
	log_info("rule %s removed", ru->r.name);
}

int ffmd__reload(struct ffmd *d, const struct ffmd_config *cfg)
{
	struct rule keep[FFM_MAX_RULES];
	bool kept_new[FFM_MAX_RULES] = {};
	int err = 0, nkeep = 0;

	/* state_dir and runtime_dir are read at start only (the command line may override
	 * them, so a difference here is no news). */
	if (cfg->ringbuf_kib != d->cfg.ringbuf_kib || cfg->wakeup_kib != d->cfg.wakeup_kib)
		log_warn("reload: the ring buffer settings change only at a restart, ignoring them");
	if (strcmp(cfg->admin_group, d->cfg.admin_group)) {
		gid_t gid = 0;
		bool found = cfg->admin_group[0] && group_gid(cfg->admin_group, &gid) == 0;

		if (cfg->admin_group[0] && !found) {
			log_err("reload: admin group '%s' does not exist; keeping '%s'", cfg->admin_group,
				d->cfg.admin_group);
		} else {
			d->have_admin_gid = found;
			d->admin_gid = gid;
			snprintf(d->cfg.admin_group, sizeof(d->cfg.admin_group), "%s", cfg->admin_group);
		}
	}
	if (cfg->flush_ms != d->cfg.flush_ms) {
		long ms = cfg->flush_ms ? cfg->flush_ms : 200;
		struct itimerspec its = { .it_interval = { ms / 1000, (ms % 1000) * 1000000 },
					  .it_value = { ms / 1000, (ms % 1000) * 1000000 } };

		timerfd_settime(d->tfd, 0, &its, NULL);
		d->cfg.flush_ms = cfg->flush_ms;
	}

	/* Rules: unchanged ones keep their slot; the others are removed first (their
	 * selectors may move to a new rule), then the new ones installed. */
	for (int i = 0; i < FFM_MAX_RULES; i++) {
		struct rule *ru = &d->rules[i];
		int k;

		if (!ru->used)
			continue;
		for (k = 0; k < cfg->nrules; k++)
			if (!kept_new[k] && rule_same(&ru->r, &cfg->rules[k]))
				break;
		if (k < cfg->nrules) {
			kept_new[k] = true;
			keep[nkeep++] = *ru;
		} else {
			rule_remove(d, ru);
		}
	}
	memset(d->rules, 0, sizeof(d->rules));
	for (int i = 0; i < nkeep; i++)
		d->rules[i] = keep[i];
	for (int k = 0; k < cfg->nrules; k++) {
		int r;

		if (kept_new[k])
			continue;
		if (nkeep == FFM_MAX_RULES) {
			err = -ENOSPC;
			break;
		}
		r = rule_install(d, &cfg->rules[k], &d->rules[nkeep]);
		if (r < 0)
			err = r;
		else
			nkeep++;
	}
	d->cfg.nrules = 0;
	for (int i = 0; i < nkeep; i++)
		d->cfg.rules[d->cfg.nrules++] = d->rules[i].r;
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
		r = ffmd__reload(d, &cfg);
		log_info("SIGHUP: reloaded %s: %d rule%s%s", d->cfg.config_path, d->cfg.nrules,
			 d->cfg.nrules == 1 ? "" : "s", r < 0 ? " (some could not be applied, see above)" : "");
	}
	ffm_notify("READY=1");
}

/* ---- resuming after a crash ---------------------------------------------------------------- */

/* Mark the run a crash interrupted; the job row is ended too when the job is not resumed. */
static void journal_close_run(struct ffmd *d, const char *key, const char *id, int64_t run, bool end_job)
{
	struct ffm_store_opts so = { .sz = sizeof(so) };
	struct ffm_store *s = NULL;
	struct ffm_store_run r;
	struct timespec ts;
	int err;

	err = ffm_store__open_key(d->cfg.state_dir, &(struct ffm_store_key){ .key = key }, &so, &s);
	if (err < 0) {
		log_err("journal: job %s: cannot open the store of key %s: %s", id, key, ffm_store__strerror(err));
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	if (ffm_store__get_run(s, run, &r) == 0 && !r.end_ns) {
		uint64_t last = 0, end = (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;

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
	if (end_job)
		ffm_store__job_end(s, id, FFM_JOB_CANCELLED, time(NULL));
	ffm_store__free(s);
}

static void journal_resume(struct ffmd *d)
{
	char line[65536];
	int resumed = 0, dropped = 0;
	FILE *f = fopen(d->journal, "re");

	if (!f)
		return;
	d->resuming = true;
	while (fgets(line, sizeof(line), f)) {
		static struct job_spec sp;
		char *save = NULL, *id = NULL, *key = NULL, *rule = "", *tok;
		int64_t run = 0;
		const char *msg = "";
		struct job *j;

		if (line[0] == '#' || line[0] == '\n')
			continue;
		memset(&sp, 0, sizeof(sp));
		line[strcspn(line, "\n")] = 0;
		if (!strncmp(line, "driver=", 7)) {
			unescape(line + 7);
			if (access(line + 7, R_OK) == 0)
				driver_get(d, line + 7, true);
			continue;
		}
		for (tok = strtok_r(line, "\t", &save); tok; tok = strtok_r(NULL, "\t", &save)) {
			char *v = strchr(tok, '=');

			if (!v)
				continue;
			*v++ = 0;
			if (!strcmp(tok, "sel")) {
				char *c = strchr(v, ':');
				struct ffm_selector *s = &sp.sel[sp.nsel];

				if (!c || sp.nsel == FFM_MAX_SELECTORS)
					continue;
				*c++ = 0;
				if (sel_type(v, &s->type) < 0)
					continue;
				if (s->type == FFM_SEL_PID) {
					unsigned long long st = 0;
					pid_t p;

					/* Resume only the job's own process, not a pid's new owner. */
					if (sscanf(c, "%d@%llu", &p, &st) != 2 || !st || proc_start_time(p) != st)
						continue;
					snprintf(s->value, sizeof(s->value), "%d", p);
				} else {
					unescape(c);
					snprintf(s->value, sizeof(s->value), "%s", c);
					if (s->type == FFM_SEL_CGROUP && access(s->value, F_OK) < 0)
						continue;
				}
				sp.nsel++;
			} else {
				unescape(v);
				if (!strcmp(tok, "job"))
					id = v;
				else if (!strcmp(tok, "key"))
					key = v;
				else if (!strcmp(tok, "owner"))
					sp.owner = (uid_t)strtoul(v, NULL, 10);
				else if (!strcmp(tok, "stage"))
					sp.override_stage = atoi(v);
				else if (!strcmp(tok, "run"))
					run = strtoll(v, NULL, 10);
				else if (!strcmp(tok, "rule"))
					rule = v;
			}
		}
		if (!id || !key || !*id || !*key)
			continue;
		journal_close_run(d, key, id, run, !sp.nsel);
		if (!sp.nsel) {
			log_info("journal: job %s (key %s) not resumed: none of its processes is left", id, key);
			dropped++;
			continue;
		}
		sp.id = id;
		sp.key = key;
		sp.resumed = true;
		sp.rule = *rule ? rule : NULL;
		if (sp.rule && sp.sel[0].type == FFM_SEL_PID)
			sp.root = (pid_t)atoi(sp.sel[0].value);
		if (job_create(d, &sp, &j, &msg) < 0) {
			log_err("journal: cannot resume job %s: %s", id, msg);
			journal_close_run(d, key, id, 0, true);
			dropped++;
			continue;
		}
		resumed++;
		log_info("journal: resumed job %s after a restart (run %" PRId64 " was interrupted)", id, run);
	}
	fclose(f);
	d->resuming = false;
	if (resumed || dropped)
		log_info("journal: %d job%s resumed, %d ended", resumed, resumed == 1 ? "" : "s", dropped);
	journal_write(d);
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
	P("{\"version\":%d,\"probe_mode\":\"%s\",\"probe_scope\":\"%s\",\"map_guard\":%s,"
	  "\"wait_guard\":%s,\"drivers\":[",
	  FFM_PROTO_VERSION, ffm_collector__probe_mode(d->col),
	  ffm_collector__per_process(d->col) ? "process" : "system",
	  ffm_collector__map_guard(d->col) ? "true" : "false",
	  ffm_collector__wait_guard(d->col) ? "true" : "false");
	for (int i = 0; i < MAX_DRIVERS; i++) {
		struct drv *dv = &d->drvs[i];

		if (!dv->used)
			continue;
		/* Another user's file is named to root and the admins only: its path may tell what
		 * that user runs and where. */
		P("%s{\"path\":\"%s\",\"usable\":%s,\"state\":\"%s\",\"trusted\":%s", first ? "" : ",",
		  admin || !dv->user || dv->user == c->uid ? jesc(dv->path) : "(another user's file)",
		  dv->state == DRV_READY ? "true" : "false",
		  dv->state == DRV_READY ? "ready" : dv->state == DRV_PENDING ? "pending" : "failed",
		  dv->rd.trusted ? "true" : "false");
		if (dv->state == DRV_READY)
			P(",\"build_id\":\"%s\",\"version\":\"%s\",\"wait_offset\":\"%#" PRIx64 "\",\"wait_size\":%" PRIu64,
			  ffm_driver__build_id(dv->rd.drv), ffm_driver__version(dv->rd.drv), dv->rd.wait_off,
			  dv->rd.wait_size);
		else if (dv->state == DRV_FAILED)
			P(",\"error\":\"%s\"", admin || !dv->user || dv->user == c->uid ? jesc(dv->why) : "");
		{
			/* Per-process scope: the probes of every process, and how many have them. */
			size_t probes = ffm_attachment__count(dv->wait_att) + ffm_attachment__count(dv->api_att);
			int procs = 0;

			for (int k = 0; k < MAX_PLINKS; k++)
				if (d->plinks[k].pid && d->plinks[k].dv == dv) {
					probes += ffm_attachment__count(d->plinks[k].wait_att) +
						  ffm_attachment__count(d->plinks[k].api_att);
					procs++;
				}
			P(",\"probes\":%zu,\"processes_with_probes\":%d}", probes, procs);
		}
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
		P("%s{\"job\":\"%s\",\"key\":\"%s\",\"rule\":\"%s\",\"owner\":%u,\"stage\":%d,\"running_s\":%.1f,"
		  "\"events\":%" PRIu64 ",\"events_per_s\":%.1f,\"drops\":{\"ringbuf\":%" PRIu64
		  ",\"stacks\":%" PRIu64 ",\"depth\":%" PRIu64 ",\"procs\":%" PRIu64 ",\"threads\":%" PRIu64
		  ",\"unmatched\":%" PRIu64 "},\"processes_seen\":%u,\"processes_held\":%u,"
		  "\"processes_unmeasured\":%u,\"processes_not_held\":%u,\"processes\":[",
		  first ? "" : ",", jesc(j->id), jesc(j->key), jesc(j->rule), j->owner, j->stage, now_s() - j->start, j->events, j->rate,
		  (uint64_t)dr.n[FFM_REC_DROP_RINGBUF], (uint64_t)dr.n[FFM_REC_DROP_STACK],
		  (uint64_t)dr.n[FFM_REC_DROP_DEPTH], (uint64_t)dr.n[FFM_REC_DROP_PROCS],
		  (uint64_t)dr.n[FFM_REC_DROP_THREADS], (uint64_t)dr.n[FFM_REC_DROP_UNMATCHED], j->procs,
		  j->held, j->nunmeasured, j->not_held);
		for (int k = 0; k < n; k++)
			P("%s%d", k ? "," : "", pids[k]);
		P("]}");
		first = false;
	}
	P("],\"rules\":[");
	first = true;
	for (int i = 0; admin && i < FFM_MAX_RULES; i++) {
		struct rule *ru = &d->rules[i];
		struct ffm_rec_drops dr = {};

		if (!ru->used)
			continue;
		ffm_collector__drops(d->col, ru->slot, &dr);
		P("%s{\"rule\":\"%s\",\"key\":\"%s\",\"stage\":%d,\"jobs_made\":%" PRIu64
		  ",\"drops\":{\"procs\":%" PRIu64 ",\"ringbuf\":%" PRIu64 "},\"selectors\":[",
		  first ? "" : ",", jesc(ru->r.name), jesc(ru->r.key), ru->r.stage, ru->jobs_made,
		  (uint64_t)dr.n[FFM_REC_DROP_PROCS], (uint64_t)dr.n[FFM_REC_DROP_RINGBUF]);
		for (int k = 0; k < ru->r.nsel; k++)
			P("%s\"%s=%s\"", k ? "," : "", sel_name(ru->r.sel[k].type), jesc(ru->r.sel[k].value));
		P("]}");
		first = false;
	}
	P("],\"processes_seen\":%" PRIu64 ",\"processes_held\":%" PRIu64 "}\n", d->procs_total,
	  d->held_total);
#undef P
	return off;
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
	double t = now_s();
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
					 jesc(j->id), jesc(j->key), j->stage);
				err = job_end(d, j, false);
				msg = err ? "the job ended, but its store could not be finished" : "ended";
			}
			break;
		}
		}
	}
	if (err)
		log_refused(c, msg);
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

	struct ucred cred;
	int nfree = 0, mine = 0;

	if (fd < 0)
		return;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &sl) < 0) {
		close(fd);
		return;
	}
	for (int i = 0; i < MAX_CONNS; i++) {
		if (d->conns[i].fd < 0) {
			nfree++;
			if (!c)
				c = &d->conns[i];
		} else if (d->conns[i].cred.uid == cred.uid) {
			mine++;
		}
	}
	/* Busy: refuse rather than queue without bound. One user may hold at most
	 * MAX_CONNS_PER_USER connections, and the last RESERVED_CONNS slots are root's and the
	 * admins', so that no local user can lock the scheduler's prolog out by holding
	 * connections open. */
	if (!c || (cred.uid != 0 && (mine >= MAX_CONNS_PER_USER ||
				     (nfree <= RESERVED_CONNS && !is_admin(d, &cred))))) {
		close(fd);
		return;
	}
	c->fd = fd;
	c->cred = cred;
	c->deadline = now_s() + FFM_PROTO_TIMEOUT_MS / 1000.0;
	epoll_ctl(d->ep, EPOLL_CTL_ADD, fd,
		  &(struct epoll_event){ .events = EPOLLIN, .data.u64 = TAG_CONN | (uint64_t)(c - d->conns) << 8 });
}

/* ---- records ------------------------------------------------------------------------------ */

/* The job a record belongs to (index in jobs[]), or -1. */
static int record_job(struct ffmd *d, const struct ffm_rec_hdr *h)
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
	if (h->type == FFM_REC_FORK) {
		const struct ffm_rec_proc *p = (const void *)h;

		job = route_find(d, p->ppid);
	} else if (h->type == FFM_REC_EXEC) {
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

			/* Unless it now waits for its driver: let go with the driver's waiters. */
			if (hh && !hh->wait)
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

static int on_record(void *ctx, const void *rec, size_t size)
{
	struct ffmd *d = ctx;
	const struct ffm_rec_hdr *h = rec;
	struct job *j;
	int idx, err;

	if (h->type == FFM_REC_MAP) {
		on_driver_mapped(d, rec);
		return 0;
	}
	bool fork_stopped = h->type == FFM_REC_FORK &&
			    (((const struct ffm_rec_proc *)rec)->flags & FFM_PROC_STOPPED);

	if (fork_stopped)
		on_fork_stopped(d, rec);
	if (h->type == FFM_REC_EXIT)
		plinks_drop_pid(d, (pid_t)h->tgid);
	/* A process a rule matched: its wait probe first, before its job is made (a store to
	 * open, milliseconds), so that its mmap of the driver finds it; the job's stage adds
	 * the rest below. */
	if (h->type == FFM_REC_EXEC && rule_of_slot(d, h->job) && ffm_collector__per_process(d->col))
		ensure_driver_for_pid(d, h->tgid);
	idx = record_job(d, h);
	if (idx < 0)
		return 0;
	j = &d->jobs[idx];
	j->events++;
	if (h->type == FFM_REC_EXEC || h->type == FFM_REC_FORK) {
		j->procs++;
		d->procs_total++;
	}
	/* A child stopped at its fork got its parent's drivers above: no second look at its maps. */
	if (h->type == FFM_REC_EXEC || (h->type == FFM_REC_FORK && !fork_stopped))
		ensure_driver_for_pid(d, h->tgid);
	err = ffm_jobrun__record(j->jr, rec, size);
	if (err < 0) {
		static double last;

		if (now_s() - last > 10) {
			log_err("job %s: writing its store failed: %s", j->id, strerror(-err));
			last = now_s();
		}
	}
	if (h->type == FFM_REC_EXIT && j->rule[0]) {
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
	if ((d->idle_since && t - d->idle_since >= LINGER_S) ||
	    (d->detail_idle_since && t - d->detail_idle_since >= LINGER_S))
		update_attachments(d);
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
		if (group_gid(cfg->admin_group, &d->admin_gid) < 0) {
			log_err("admin group '%s' does not exist", cfg->admin_group);
			err = -ENOENT;
			goto fail;
		}
		d->have_admin_gid = true;
	}
	if ((err = mkdir_p(cfg->state_dir, 0750)) < 0 || (err = mkdir_p(cfg->runtime_dir, 0755)) < 0) {
		log_err("cannot create %s or %s: %s", cfg->state_dir, cfg->runtime_dir, strerror(-err));
		goto fail;
	}
	ffm_state_path(cfg->state_dir, FFM_STATE_HOLDS, NULL, d->holds_path, sizeof(d->holds_path));
	holds_resume(d);
	err = ffm_collector__open(&(struct ffm_collector_opts){ .sz = sizeof(struct ffm_collector_opts),
				  .on_record = on_record, .ctx = d,
				  .wakeup_bytes = cfg->wakeup_kib * 1024,
				  .ringbuf_bytes = cfg->ringbuf_kib * 1024, .map_guard = true,
				  .per_process = !cfg->system_scope, .exclude_self = true }, &d->col);
	if (err < 0) {
		log_err("cannot load the BPF collector: %s (ffmd needs CAP_BPF, CAP_PERFMON and CAP_SYS_RESOURCE, or root)",
			strerror(-err));
		goto fail;
	}
	if (!ffm_collector__map_guard(d->col))
		log_warn("no map guard (the kernel's syscalls:sys_enter_mmap tracepoint): a process that "
			 "loads a libcuda ffmd could not foresee may run its first calls unmeasured");
	if (!ffm_collector__wait_guard(d->col))
		log_warn("no wait guard (the sched_process_wait tracepoint with bpf_send_signal_task, "
			 "Linux 6.13+): a parent that starts waiting for stopped children while ffm holds "
			 "one may see it stopped for a moment");
	log_info("uprobes: %s, %s", ffm_collector__probe_mode(d->col),
		 ffm_collector__per_process(d->col) ? "per job process (others get no breakpoint)"
						    : "system-wide (processes outside the jobs trap and return)");
	detacher_start(d);
	err = ffm_readier__new(cfg->state_dir, &d->readier);
	if (err < 0) {
		log_err("cannot start the driver worker: %s", strerror(-err));
		goto fail;
	}
	if (cfg->ringbuf_kib && cfg->wakeup_kib >= cfg->ringbuf_kib)
		log_warn("ringbuf_wakeup_kib (%u) >= ringbuf_kib (%u): BPF never wakes ffmd, which reads records every 100 ms only",
			 cfg->wakeup_kib, cfg->ringbuf_kib);
	if ((err = ffm_apis__new(&d->apis)) < 0 || (err = ffm_symbolizer__new(NULL, &d->sym)) < 0)
		goto fail;

	/* The system's drivers are made ready (calibrated) now, attached when a job starts. */
	if (ffm_driver_find_system(NULL, &sys) == 0) {
		for (size_t i = 0; i < sys->n; i++) {
			struct drv *dv = driver_get(d, sys->locs[i].open_path ? sys->locs[i].open_path :
						    sys->locs[i].path, true);

			if (dv)
				dv->system = true;
		}
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
	epoll_ctl(d->ep, EPOLL_CTL_ADD, ffm_readier__fd(d->readier),
		  &(struct epoll_event){ .events = EPOLLIN, .data.u64 = TAG_READY });
	d->watchdog_usec = ffm_watchdog_usec();
	d->last_tick = d->last_watchdog = now_s();

	/* Rules from the config, then the jobs a crash interrupted. */
	d->cfg.nrules = 0;
	err = ffmd__reload(d, cfg);
	if (err < 0)
		goto fail;
	ffm_state_path(cfg->state_dir, FFM_STATE_JOURNAL, NULL, d->journal, sizeof(d->journal));
	journal_resume(d);
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
		end_finished_jobs(d);
		parents_check(d);
		holds_expire(d);
		for (int i = 0; i < n; i++) {
			uint64_t tag = evs[i].data.u64 & 0xff;

			if (tag == TAG_LISTEN) {
				accept_conn(d);
			} else if (tag == TAG_CONN) {
				struct conn *c = &d->conns[evs[i].data.u64 >> 8];

				if (c->fd >= 0)
					handle_request(d, c);
			} else if (tag == TAG_READY) {
				drivers_take(d);
			} else if (tag == TAG_TIMER) {
				uint64_t x;

				if (read(d->tfd, &x, sizeof(x)) > 0)
					tick(d);
			} else if (tag == TAG_SIGNAL) {
				struct signalfd_siginfo si;

				while (read(d->sfd, &si, sizeof(si)) == sizeof(si)) {
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

struct ffmd *ffmd__free(struct ffmd *d)
{
	if (!d)
		return NULL;
	/* Jobs still active end as aborted runs: what they recorded is kept. A clean stop
	 * leaves no job to resume. */
	d->stop = true;
	for (int i = 0; i < FFM_MAX_JOBS; i++)
		if (d->jobs[i].used)
			job_end(d, &d->jobs[i], true);
	if (d->journal[0])
		journal_write(d);
	for (int i = 0; i < MAX_PLINKS; i++)
		if (d->plinks[i].pid)
			plink_free(d, &d->plinks[i]);
	detacher_stop(d);
	/* Nobody stays stopped for a driver whose result nobody waits for any more; the worker
	 * ends after its current driver. */
	while (d->nholds)
		hold_release(d, d->holds[0].pid);
	d->readier = ffm_readier__free(d->readier);
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
	for (int i = 0; i < d->natt_names; i++)
		free(d->att_names[i]);
	ffm_symbolizer__free(d->sym);
	ffm_apis__free(d->apis);
	ffm_collector__free(d->col);
	free(d);
	return NULL;
}
