/* SPDX-License-Identifier: MIT */
/*
 * ffmd's core, inside: its state (struct ffmd: a sub-object per part, changed by its owner
 * alone, and the tables the parts share), the limits, and what each file offers the others.
 * Not for anything outside the core: daemon/server.h is the core's face (ffmd.c, the tests).
 *
 * The core is cut by concern, one file each, lowest first, in the order of docs/DESIGN.md's
 * table "The daemon's rooms" (each file's header says what it owns), which the sections below
 * follow: a file calls only into the files above it (and the libraries: collector, readier,
 * jobrun, store...), never into one below, so no two files depend on each other.
 *
 * Everything here runs on ffmd's one loop thread but for the readier (daemon/readier.c), the
 * analyzer (daemon/analyzer.c), the detacher (links.c) and the lookups' worker (lookups.c),
 * which touch none of these tables;
 * server.c says what may take long.
 */
#ifndef FFM_FFMD_INT_H
#define FFM_FFMD_INT_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "bpf/ffm.h"
#include "common/oatab.h"
#include "common/util.h"
#include "daemon/collector.h"
#include "daemon/config.h"
#include "daemon/driver_setup.h"
#include "daemon/proto.h"

struct ffm_overhead;
struct ffm_worker;

#define MAX_DRIVERS 16
#define MAX_UNMEASURED 64      /* distinct processes per job remembered as not measured */
#define MAX_CONNS 32
#define MAX_ROUTES 4096
#define MAX_HOLDS 64
#define MAX_PLINKS 1024
#define MAX_DETACH 256
#define MAX_COPIES (FFM_MAX_JOBS * 2) /* job copies being made (jobs.c) */
#define MAX_LOOKUPS 1024 /* processes' drivers being looked up at once (lookups.c) */
#define LINGER_S 30.0 /* probes stay attached this long after the last job that needed them */
/* The bridge (links.c) comes off this long after the last process that needed it, and a process
 * it traces gets probes of its own at this age. */
#define BRIDGE_S 1.0

/* What an epoll event is about (the low byte of its data; TAG_CONN: the connection above it). */
enum { TAG_RING = 1, TAG_LISTEN, TAG_SIGNAL, TAG_TIMER, TAG_CONN, TAG_READY, TAG_ANALYSED,
       TAG_PUBLISHED, TAG_UNWOUND, TAG_LOOKED };

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
	struct ffm_attachment *bridge_att; /* per-process scope: the bridge (links.c) */
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
	bool looking;         /* its driver is being looked up (lookups.c): kept until the answer */
	bool cont;
	bool mapped;          /* BPF stopped it at its mmap of {kdev, kino} */
	uint64_t kdev, kino;
	pid_t ppid;
	double since;
	uint64_t stop_ns;     /* when it stopped (BPF's record), 0: at since; its price */
	pid_t fork_parent;    /* a child BPF stopped at its fork, its stop not yet seen (holds.c) */
	double fork_until;    /* ... looked for until then */
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
	/* Adaptive stage 1 (adaptive.c): the sampler, NULL while the process is not sampled;
	 * wait_paused: the sampler took the wait probe off (plink_sync leaves it off);
	 * rel_att: the context-release probes, put on at the first detach (the span's end). */
	struct ffm_attachment *rel_att;
	bool rel_tried;
	struct psample *smp;
	bool wait_paused;
	/* Traced by the bridge (links.c), no probes of its own yet, since @since. */
	bool bridged;
	double since;
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
	uint32_t bridged;     /* ... traced by the bridge from their start, nothing attached */
	bool bridge_seen;     /* the bridge was opened for it at its start (links.c) */
};

struct rule {
	bool used;
	uint32_t slot;
	struct ffmd_rule r;
	uint64_t jobs_made;
};

/* The processes that BPF put into a rule's slot, and the job each belongs to now: tgid ->
 * index in jobs[] (tables.c). */
struct routes {
	struct oatab t;
	uint32_t live; /* routes not dropped; at most MAX_ROUTES */
};

struct conn {
	int fd;
	double deadline;   /* waiting: when the answer goes without the copy */
	struct ucred cred; /* the peer at connect time (SO_PEERCRED) */
	bool admin;        /* root or the admin group at connect time (SO_PEERGROUPS) */
	bool waiting;      /* a job-end answered once the job's copy is in place (control.c) */
	char job[128], key[128];
	int stage;
};

/* A job ended whose copy for its readers is not in place yet: its analysis runs (ticket 0), or
 * its copy is queued (the publisher's ticket). */
struct pending_copy {
	char id[128];
	uint32_t owner;
	uint64_t ticket;
};

/*
 * ffmd's state, each part's in a sub-object of its own, changed only by the file that owns it
 * (docs/DESIGN.md, "The daemon's parts"); the others call the owner's functions. What stays at
 * the top is shared on purpose, each line says why: the tables every part finds its job, rule,
 * driver or process link in by index (one loop thread, no copies; tables.c finds them), the
 * configuration, and the workers set up and freed by server.c and used where they serve.
 */

/* holds.c's: the processes held and the parents watched. */
struct ffmd_holds {
	char path[PATH_MAX]; /* the holds file (<node>/ffmd-held), written each round it lags */
	struct hold list[MAX_HOLDS];
	int n;
	bool dirty;          /* the holds file lags the list */
	struct parent_watch parents[MAX_HOLDS];
	uint64_t total;      /* job processes held since start (the status shows the rate) */
};

/* lookups.c's: which driver a process uses, looked up off the loop. */
struct ffmd_lookups {
	struct ffm_worker *w;
	struct lookup *asked[MAX_LOOKUPS]; /* the lookups asked and not taken */
	int n;
};

/* links.c's: the probes attached for the jobs, besides the detacher and the bridge. */
struct ffmd_attach {
	char *names[256];         /* the public sync functions of the attached API probes */
	int n;
	double sum_s;             /* adaptive stage 1's attaches: time taken, and their number */
	uint64_t count;
	double idle_since;        /* no job since then (0: a job is active) */
	double detail_idle_since; /* no stage >= 2 job since then */
};

/* control.c's: the control socket and its connections. */
struct ffmd_control {
	int lfd;                  /* the listening socket */
	char sock_path[PATH_MAX];
	struct conn conns[MAX_CONNS];
	gid_t admin_gid;          /* admin_group's, when have_admin_gid */
	bool have_admin_gid;
};

/* server.c's: the loop's descriptors and clocks. The epoll set is added to by control.c's
 * ep_add/ep_del alone (its connections come and go); server.c makes and closes it. */
struct ffmd_loop {
	int ep, sfd, tfd;
	int lock_fds[2];          /* the runtime and the node's state directory, locked for life */
	double last_tick, last_watchdog;
	unsigned long long watchdog_usec;
	bool sampling;            /* a process has an adaptive stage-1 sampler (links.c says) */
	size_t steps;             /* start-up steps begun (server.c's STEPS) */
};

/* This node's store root (store/ffm_store.h, FFM_STATE_ROOT: the state directory, or
 * nodes/<host>/ once nodes/ exists), and the journal in it: set by server.c's start-up steps,
 * the journal written by journal.c, read back by jobs.c (resuming meanwhile). */
struct ffmd_node {
	char root[PATH_MAX];
	char journal_at[PATH_MAX]; /* where it is */
	char journal[PATH_MAX];   /* "" until read back: nothing may rewrite it before */
	bool resuming;            /* journal_resume() reads it: do not rewrite it yet */
};

struct ffmd {
	struct ffmd_config cfg;   /* shared: read by every part, changed by server.c (reload) */
	/* Shared tables (one loop thread; found by tables.c), each made and freed by its owner: */
	struct job jobs[FFM_MAX_JOBS];    /* jobs.c */
	struct rule rules[FFM_MAX_RULES]; /* rules.c */
	uint64_t rule_slots;              /* rules.c: bit per slot owned by a rule */
	struct routes routes;             /* tables.c */
	struct drv drvs[MAX_DRIVERS];     /* drivers.c */
	struct plink plinks[MAX_PLINKS];  /* links.c */
	/* Workers and libraries: made and freed by server.c's start-up steps, used where noted. */
	struct ffm_collector *col;     /* the BPF side: every part that attaches, moves or asks */
	struct ffm_symbolizer *sym;
	struct ffm_unwinder *unwinder; /* the only user of sym: stacks off the loop (jobs.c) */
	struct ffm_apis *apis;         /* the API probes' table (jobs.c, links.c) */
	struct ffm_readier *readier;   /* drivers made ready off the loop (drivers.c) */
	struct ffm_analyzer *analyzer; /* each ended run's analysis, stored (jobs.c) */
	struct ffm_metrics *metrics;   /* NULL unless metrics_dir is set (jobs.c) */
	/* Owned by one file each: */
	struct ffmd_holds hl;          /* holds.c */
	struct ffmd_lookups lk;        /* lookups.c */
	struct {
		pthread_t th;
		bool started, stop;
		pthread_mutex_t mu;
		pthread_cond_t cv;
		int n;
		struct {
			struct ffm_attachment *a;
			int job;          /* the job of its process when queued (-1: none) */
			double job_start; /* and that job's start: a slot reused since is not it */
		} q[MAX_DETACH];
		double sum_s;     /* time the detaches took, and their number (under mu) */
		uint64_t count;
		struct {
			double job_start;
			uint64_t ns, n;
		} acc[FFM_MAX_JOBS]; /* per job, not yet in its price (detach_overhead_take) */
	} det;                    /* links.c: attachments being detached (see detach_later) */
	struct {
		uint64_t slots;   /* the job slots it serves, and those that may rely on it */
		uint64_t open;
		double busy;      /* last needed (a job or process it serves) */
		double closing;   /* open cleared then, to be detached (0: not closing) */
		double draining;  /* ... its processes had their own probes then (0: not yet) */
		double failed;    /* an attach was refused then (0: none) */
		uint64_t attaches, detaches; /* per driver, since ffmd started */
		pid_t refused[64]; /* processes not left to it (0: free; full: the oldest goes) */
		unsigned refused_next;
	} bridge;                 /* links.c: the bridge (bridge_counts for the status) */
	struct ffmd_attach att;   /* links.c */
	int sample_hint;          /* adaptive.c: the plink it found last for a wait record */
	struct {
		pid_t pid;        /* 0: free */
		unsigned long long start;
		struct drv *dv;
	} waiters[MAX_HOLDS];     /* drivers.c: processes that will load a pending driver, not held */
	struct pending_copy copies[MAX_COPIES]; /* jobs.c: id[0] == 0: free; full: the oldest goes
						 * (copy_at for the status) */
	struct ffmd_control ctl;  /* control.c */
	struct ffmd_loop lp;      /* server.c */
	struct ffmd_node node;    /* server.c sets it up; see struct ffmd_node */
	uint64_t procs_total;     /* server.c: job processes seen (the status shows it) */
	bool stop;                /* server.c sets it (a signal, teardown); jobs.c reads it */
};

/* ---- procfs.c ---- */
int proc_stat(pid_t pid, char *state, pid_t *ppid, unsigned long long *start);
char proc_state(pid_t pid);                 /* 0: gone */
unsigned long long proc_start_time(pid_t pid); /* 0: gone */
bool alive(pid_t pid);
bool wait_stopped(pid_t pid, int ms);
bool waits_for_stops(pid_t ppid);
int parse_pid(const char *s, pid_t *out);
int driver_path_of(pid_t pid, char *out, size_t len);

/* ---- lookups.c ---- */
/* A process's driver looked up off the loop: asked, run by the worker, taken by the loop. */
struct lookup {
	pid_t pid;
	unsigned long long start; /* its start time when asked (0: gone): the answer is for it */
	bool map;                 /* asked at the map guard's record @m */
	struct ffm_rec_map m;
	atomic_bool started;      /* the worker began it: it may have read an older image's state */
	/* the answer */
	int err;      /* driver_path_of's: 1 the file it maps, 0 the one it will load, -errno */
	bool found;   /* @path names a file, @st */
	bool stopped; /* @m.stopped: the stop landed within 500 ms */
	uint64_t ns;  /* the time the lookup took */
	struct stat st;
	char path[PATH_MAX];
};
int lookups_start(struct ffmd *d);
int lookups_fd(const struct ffmd *d); /* readable while answers wait (the loop's TAG_LOOKED) */
void lookups_stop(struct ffmd *d);
bool lookup_pending(const struct ffmd *d, pid_t pid);
/* Ask for @pid's driver (@m: the map guard's record, else NULL): 0; -EALREADY one for it is
 * queued and not begun (it serves: it reads the process as it is from now on; not for @m);
 * -ENOSPC MAX_LOOKUPS are asked; -ENOMEM. */
int lookup_ask(struct ffmd *d, pid_t pid, const struct ffm_rec_map *m);
struct lookup *lookup_take(struct ffmd *d); /* a finished lookup (the caller frees it), or NULL */

/* ---- tables.c ---- */
struct drv *driver_find(struct ffmd *d, uint64_t dev, uint64_t ino);
struct job *job_find(struct ffmd *d, const char *id);
int job_of_pid(struct ffmd *d, pid_t pid);
int job_of_rec(struct ffmd *d, const struct ffm_rec_hdr *h);
struct rule *rule_of_slot(struct ffmd *d, uint32_t slot);
struct plink *plink_find(struct ffmd *d, pid_t pid, const struct drv *dv);
bool any_job(const struct ffmd *d);
int routes_init(struct ffmd *d);
void routes_free(struct ffmd *d);
int route_find(const struct ffmd *d, uint32_t tgid);
void route_add(struct ffmd *d, uint32_t tgid, int job);
void routes_drop_job(struct ffmd *d, int job);
/* What job @job's processes paid, per part (store/ffm_store.h, struct ffm_overhead): its run's,
 * NULL for no job or no run. overhead_charge adds @ns once to @part of @pid's job, if any. */
struct ffm_overhead *job_overhead(struct ffmd *d, int job);
void overhead_charge(struct ffmd *d, pid_t pid, int part, uint64_t ns);

/* ---- journal.c ---- */
void journal_write(struct ffmd *d);
/* One line of the journal as journal_read hands it over: a driver's path, or a job. */
struct journal_line {
	const char *driver;  /* a driver line: the file; NULL: a job line */
	struct job_spec *sp; /* a job line: id, key, owner, stage, rule; the selectors still valid */
	int64_t run;         /* the run a crash interrupted */
};
int journal_read(const char *path,
		 void (*fn)(struct ffmd *d, const struct journal_line *l, void *ctx),
		 struct ffmd *d, void *ctx);

/* ---- publisher.c ---- */
/* Queue the store at @path of the store root @root for its copy (ffm_store__publish); @why
 * names it in the log ("job 12"). Its ticket (0: not queued), which publish_take hands back
 * once the copy is made. */
uint64_t publish(const char *path, const char *root, const char *why);
/* Readable while a finished copy waits to be taken (the loop's TAG_PUBLISHED). */
int publish_fd(void);
/* The newest ticket whose copy is made (every older one's is too); false if none since. */
bool publish_take(uint64_t *ticket);
/* Queue each store of @root whose copy is missing or older than the store. */
void publish_stale(const char *root);
/* Wait (at most 60 s) for the queue to empty, then end the thread. */
void publish_wait(void);

/* ---- adaptive.c ---- */
#include "stages/ffm_sampling.h"
struct sample_status {
	uint32_t procs, sampling, retraced; /* processes with a sampler, sampled now, retraces */
	double rate, cost;                  /* their waits/s; the mean estimated cost (fraction) */
	double lag;                         /* the mean time the probe is on outside a window (s) */
};
/* The mean time a probe's detach takes (the detacher's measure; 0: none yet). */
double detach_mean_s(struct ffmd *d);
void sample_on_wait(struct ffmd *d, int job, const struct ffm_rec_wait *w);
void sample_overhead_wait(struct ffmd *d, int job, uint32_t tgid);
enum ffm_sampler_action sample_tick(struct ffmd *d, struct plink *pl, double now);
void sample_attached(struct ffmd *d, struct plink *pl, bool ok);
/* Process @pid exited at @t (its exit record's time): its span ends there, not when ffmd reads
 * the record. */
void sample_exit(struct ffmd *d, pid_t pid, uint64_t t);
void sample_release(struct ffmd *d, pid_t pid, uint64_t t);
void sample_end(struct ffmd *d, struct plink *pl);
void sample_job_status(struct ffmd *d, int job, struct sample_status *st);

/* ---- links.c ---- */
void update_attachments(struct ffmd *d);
struct plink *link_process(struct ffmd *d, pid_t pid, struct drv *dv);
void plink_key(struct ffmd *d, struct plink *pl, uint64_t kdev, uint64_t ino);
void plink_free(struct ffmd *d, struct plink *pl);
void plinks_drop_pid(struct ffmd *d, pid_t pid);
/* Process @pid of a job the bridge serves, whose driver lookup failed (its user's slow-open
 * budget, say): not the bridge's. BPF stops it at its mmap of a driver as without the bridge,
 * where its maps tell which (bridge_refuse; forgotten at its exit, plinks_drop_pid). */
void bridge_refuse(struct ffmd *d, pid_t pid);
/* Adaptive stage 1: take each sampled process's wait probe off or put it back (each round of
 * the loop). The processes with a sampler. */
int plinks_sample_tick(struct ffmd *d);
bool driver_in_use(const struct ffmd *d, const struct drv *dv);
/* The bridge: attached, kept, or taken off as the jobs and processes it serves need (each
 * round of the loop, @loop: there it may drain the ring buffer; and when jobs change). */
void bridges_update(struct ffmd *d, bool loop);
void detacher_start(struct ffmd *d);
/* The detaches done for job @job's processes since last asked: into its price. */
void detach_overhead_take(struct ffmd *d, int job);
void detacher_stop(struct ffmd *d);
void attachments_linger(struct ffmd *d, double t);
double attach_mean_ms(const struct ffmd *d);
/* The bridge, for the status: on or not, the jobs it serves, its attaches and detaches. */
struct bridge_counts {
	bool open;
	int jobs;
	uint64_t attaches, detaches;
};
void bridge_counts(const struct ffmd *d, struct bridge_counts *bc);
void attachments_free(struct ffmd *d);

/* ---- holds.c ---- */
struct hold *hold_find(struct ffmd *d, pid_t pid);
struct hold *hold(struct ffmd *d, pid_t pid, bool bpf_stopped);
void hold_release(struct ffmd *d, pid_t pid);
void holds_expire(struct ffmd *d);
void holds_resume(struct ffmd *d);
void parents_check(struct ffmd *d);
void on_fork_stopped(struct ffmd *d, const struct ffm_rec_proc *p);
int holds_path_set(struct ffmd *d, const char *state_dir, const char *host);
struct hold *hold_waiting_for(struct ffmd *d, const struct drv *dv);
uint64_t holds_total(const struct ffmd *d); /* job processes held since start */
void holds_release_all(struct ffmd *d);
/* Whether a forked child's stop is awaited (on_fork_stopped): the loop's rounds are then short. */
bool forks_waiting(const struct ffmd *d);

/* ---- drivers.c ---- */
struct drv *driver_get(struct ffmd *d, const char *path, bool sync);
void drivers_take(struct ffmd *d);
void ensure_driver_for_pid(struct ffmd *d, pid_t pid);
void drivers_found(struct ffmd *d); /* the lookups' answers (the loop's TAG_LOOKED) */
void drivers_release(struct ffmd *d); /* at ffmd's end: every driver's attachments */
void on_driver_mapped(struct ffmd *d, const struct ffm_rec_map *m);

/* ---- jobs.c ---- */
int selector_rule(const struct ffm_selector *s, struct ffm_rule *r);
void selectors_drop(struct ffmd *d, const struct ffm_selector *sel, int nsel, uint32_t slot);
int job_slot_free(const struct ffmd *d);
int job_create(struct ffmd *d, const struct job_spec *sp, struct job **ret, const char **msg);
int job_end(struct ffmd *d, struct job *j, bool aborted);
void end_finished_jobs(struct ffmd *d);
void analyses_take(struct ffmd *d); /* the analyzer's results (the loop's TAG_ANALYSED) */
/* Whether job @id's copy for its readers is still being made (its analysis, then the copy). */
bool copy_pending(const struct ffmd *d, const char *id);
void copies_made(struct ffmd *d, uint64_t ticket); /* publish_take's ticket: those forgotten */
/* Copy @i (< MAX_COPIES) being made: its job's id and owner, NULL: none there. */
const char *copy_at(const struct ffmd *d, size_t i, uint32_t *owner);
void metrics_write(struct ffmd *d);
void journal_resume(struct ffmd *d);

/* ---- rules.c ---- */
int rule_adopt(struct ffmd *d, struct rule *ru, uint32_t tgid, uint32_t uid,
	       const struct ffm_rec_proc *p);
int rules_reload(struct ffmd *d, const struct ffmd_config *cfg);

/* ---- control.c ---- */
/* The loop's epoll set: watch @fd for input with @tag (enum TAG_*), logged when refused;
 * stop watching it (logged when refused: the descriptor is closed next either way). */
int ep_add(struct ffmd *d, int fd, uint64_t tag);
void ep_del(struct ffmd *d, int fd);
/* The control socket (struct ffmd_control): its connections none yet; listening on
 * <runtime_dir>/FFM_PROTO_SOCKET, 0666 whatever the umask (the failure logged); its descriptor
 * and path; the admin group (@have: one is set); closed with its connections at ffmd's end. */
void control_init(struct ffmd *d);
int control_listen(struct ffmd *d, const char *runtime_dir);
int control_fd(const struct ffmd *d);
const char *control_socket(const struct ffmd *d);
void control_admin_set(struct ffmd *d, bool have, gid_t gid);
void control_close(struct ffmd *d);
void accept_conn(struct ffmd *d);
void conn_ready(struct ffmd *d, uint64_t idx); /* TAG_CONN's: connection @idx has a request */
void conns_expire(struct ffmd *d, double t);   /* close those that sent nothing in time */
void handle_request(struct ffmd *d, struct conn *c);
/* Answer the job-end requests whose copy is in place, or past their wait (@all: every one). */
void answer_waiting(struct ffmd *d, bool all);
/* The publisher's finished copies (the loop's TAG_PUBLISHED): their jobs' waiting requests. */
void copies_take(struct ffmd *d);

#endif
