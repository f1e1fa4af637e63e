/* SPDX-License-Identifier: MIT */
/*
 * ffmd end to end: the real daemon (build/ffmd) with its BPF programs, the simulated driver
 * (build/fakecuda) and the workloads (build/workloads), driven with ffmctl as a scheduler's
 * prolog/epilog would, and checked in the SQLite stores through store/'s API. Needs root (BPF,
 * uprobes, a cgroup v2 directory); each case skips saying why where that is missing.
 *
 * Cases share one ffmd ("main"; restarted by the SIGKILL case, which checks that it goes on)
 * in a scratch directory; the flood case runs a second one with a 64 KiB ring buffer. The
 * expectations come from tests/workloads/README.md: its table of planted call sites is parsed
 * here, so a site moved in the source and the table fails this test too.
 *
 * Tolerances (a shared 2-core machine, loaded or not): a site's count is exact (every call
 * waits exactly once in the simulated driver); its median wait is at least 0.7 E - 100 us, where
 * E is what the workload's parameters make it (kernel-us, cpu-us and the copy model T(bytes) =
 * 8 us + bytes / 1 GB/s, FAKECUDA_COPY_GBPS=1 being set for every run), and within [0.9 D - 300
 * us, D + 50 us] of D, the median the simulated driver measured itself around the same waits
 * (FAKECUDA_WAIT_LOG): load lengthens waits, and only the driver's own measure tells ffm's
 * error from the scheduler's.
 */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>

#include "daemon/jobrun.h"
#include "store/ffm_store.h"
#include "tests/testutil.h"

/* Iterations of the workloads: enough that a process outlives ffmd's first read of its new
 * stacks (every 100 ms), which needs the process's maps to name them. */
#define N_ITERS 200
#define N_ITERS_S "200"

struct dmn {
	pid_t pid;
	char dir[2048], state[PATH_MAX], run[PATH_MAX], log[PATH_MAX], conf[PATH_MAX];
};

/* Short enough that every path made from them fits PATH_MAX. */
static char T[1024];           /* scratch directory */
static char B[1024];           /* build directory, absolute */
static char FAKE[1100];        /* the simulated driver's directory */
static struct dmn MAIN_D;
static bool driver_ready;      /* the main ffmd has seen the simulated driver */
static int seq;                /* makes job ids, keys and cgroup names unique */

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static void cleanup(void)
{
	char cmd[PATH_MAX + 32];

	if (MAIN_D.pid > 0)
		kill(MAIN_D.pid, SIGTERM);
	if (T[0] && !getenv("FFM_TEST_KEEP")) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", T);
		if (system(cmd) != 0)
			fprintf(stderr, "# could not remove %s\n", T);
	}
}

static void copy_file(const char *from, const char *to, mode_t mode)
{
	char buf[65536];
	ssize_t n;
	int in = open(from, O_RDONLY), out;

	ASSERT_MSG(in >= 0, "open %s: %s", from, strerror(errno));
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC, mode);
	ASSERT_MSG(out >= 0, "create %s: %s", to, strerror(errno));
	while ((n = read(in, buf, sizeof(buf))) > 0)
		ASSERT(write(out, buf, n) == n);
	close(in);
	close(out);
}

/* Root, BPF and the built artifacts, once; then the scratch directory. */
static void need_setup(void)
{
	char why[256], path[PATH_MAX + 64];

	if (!ffm_test_can_bpf(why, sizeof(why)))
		SKIP("%s", why);
	if (geteuid() != 0)
		SKIP("needs root (uprobes on another process, cgroups)");
	if (!B[0]) {
		char abs[PATH_MAX];

		if (!realpath(ffm_test_build_dir(), abs) || strlen(abs) >= sizeof(B))
			SKIP("no build directory %.200s", ffm_test_build_dir());
		strcpy(B, abs);
	}
	if (T[0])
		return;
	snprintf(path, sizeof(path), "%s/fakecuda/libcuda.so.1", B);
	if (access(path, R_OK))
		SKIP("the simulated driver %.200s is not built", path);
	snprintf(path, sizeof(path), "%s/ffmctl", B);
	if (access(path, X_OK))
		SKIP("%.200s is not built", path);
	snprintf(T, sizeof(T), "/tmp/ffm-ffmd.XXXXXX");
	ASSERT(mkdtemp(T));
	atexit(cleanup);
	printf("# scratch directory %s (FFM_TEST_KEEP=1 keeps it)\n", T);
	/* A private copy of the simulated driver: uprobes belong to the file, so another tool's
	 * return probes on the build's copy (a concurrent ffmctl profile, an ffmd still
	 * detaching) would put the kernel's trampoline into our stacks. */
	snprintf(FAKE, sizeof(FAKE), "%s/fakecuda", T);
	ASSERT(mkdir(FAKE, 0755) == 0);
	snprintf(path, sizeof(path), "%s/fakecuda/libcuda.so.1", B);
	{
		char to[PATH_MAX];

		snprintf(to, sizeof(to), "%s/libcuda.so.1", FAKE);
		copy_file(path, to, 0755);
	}
}

/* Atomically (a new file renamed over): ffmd may read it at any moment after a SIGHUP. */
static void write_file(const char *path, const char *text)
{
	char tmp[PATH_MAX + 8];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.new", path);
	f = fopen(tmp, "w");
	ASSERT_MSG(f, "cannot write %s: %s", tmp, strerror(errno));
	fputs(text, f);
	ASSERT(fclose(f) == 0);
	ASSERT(rename(tmp, path) == 0);
}

/* A config for ffmd: @text after "sample_budget = 0". These cases count every wait, so every
 * wait is traced: adaptive stage 1's sampling has its own test (tests/daemon/test_adaptive.sh). */
static void write_conf(const char *path, const char *text)
{
	char *t = NULL;

	ASSERT(asprintf(&t, "sample_budget = 0\n%s", text) > 0);
	write_file(path, t);
	free(t);
}

static void dump_log(const struct dmn *d)
{
	char line[1024];
	FILE *f = fopen(d->log, "r");

	if (!f)
		return;
	printf("# --- %s ---\n", d->log);
	while (fgets(line, sizeof(line), f))
		printf("# %s", line);
	fclose(f);
}

/* Whether the file @path has a line containing @needle. */
static bool log_has(const char *path, const char *needle)
{
	char line[1024];
	bool found = false;
	FILE *f = fopen(path, "r");

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, needle) != NULL;
	fclose(f);
	return found;
}

/* ---- ffmd and ffmctl ------------------------------------------------------------------------- */

static bool sock_answers(const char *run)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	bool ok;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%.90s/ffmd.sock", run);
	ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

/*
 * The calling process (a child about to exec ffmd or a workload) runs at nice -10, ahead of a
 * busy machine's other work (these tests run as root). What the cases time is ffm on a machine
 * that gives it a CPU when it needs one: the simulated GPU keeps its time on the CPU (engine
 * threads sleep, then spin to each operation's end), and beside two CPU-bound processes
 * (stress-ng --cpu 2) a workload waited 2.4-4.8 ms for 0.5-1 ms syncs, which the wait-duration
 * checks took for ffm's error. ffmd runs with them: behind workloads at -10 it was starved by
 * their spinning waits (a 0.3 s process had exited before ffmd read its first stack, which then
 * has no call site), which says how ffmd fares behind its jobs, not whether it counts right.
 */
static void ahead_of_load(void)
{
	if (setpriority(PRIO_PROCESS, 0, -10) < 0)
		perror("setpriority"); /* durations may then stretch on a busy machine */
}

/* Start (or restart, keeping its directories) ffmd @name; @conf_text "" = no config file. */
static void daemon_start(struct dmn *d, const char *name, const char *conf_text)
{
	double t0;

	if (!d->dir[0]) {
		snprintf(d->dir, sizeof(d->dir), "%s/%s", T, name);
		snprintf(d->state, sizeof(d->state), "%s/state", d->dir);
		snprintf(d->run, sizeof(d->run), "%s/run", d->dir);
		snprintf(d->log, sizeof(d->log), "%s/ffmd.log", d->dir);
		snprintf(d->conf, sizeof(d->conf), "%s/ffmd.conf", d->dir);
		ASSERT(mkdir(d->dir, 0755) == 0);
		/* ffmd makes no state directory but its default one (or with --create). */
		ASSERT(mkdir(d->state, 0751) == 0);
	}
	if (conf_text)
		write_conf(d->conf, conf_text);
	d->pid = fork();
	ASSERT(d->pid >= 0);
	if (d->pid == 0) {
		char ffmd[PATH_MAX + 8];
		int fd = open(d->log, O_WRONLY | O_CREAT | O_APPEND, 0644);

		ahead_of_load();

		dup2(fd, 1);
		dup2(fd, 2);
		snprintf(ffmd, sizeof(ffmd), "%s/ffmd", B);
		execl(ffmd, "ffmd", "--state-dir", d->state, "--runtime-dir", d->run, "--config", d->conf,
		      (char *)NULL);
		_exit(127);
	}
	for (t0 = mono_s(); mono_s() - t0 < 20; sleep_ms(50)) {
		int st;

		if (sock_answers(d->run))
			return;
		if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
			d->pid = 0;
			dump_log(d);
			FAIL("ffmd %s exited at start (status %#x)", name, st);
		}
	}
	dump_log(d);
	FAIL("ffmd %s did not open its socket in 20 s", name);
}

static int daemon_stop(struct dmn *d, int sig)
{
	int st = 0;

	if (d->pid <= 0)
		return -1;
	kill(d->pid, sig);
	waitpid(d->pid, &st, 0);
	d->pid = 0;
	return st;
}

static void main_daemon(void)
{
	need_setup();
	if (MAIN_D.pid > 0 && kill(MAIN_D.pid, 0) == 0)
		return;
	daemon_start(&MAIN_D, "main", MAIN_D.dir[0] ? NULL : "# rules are added by the SIGHUP case\n");
}

/* Run ffmctl against @d; its output (stdout+stderr) in @out. Returns its exit code. */
static int ctl(const struct dmn *d, char *out, size_t len, const char *const *args)
{
	char *argv[32];
	char path[PATH_MAX + 8];
	int p[2], st, n = 0;
	size_t off = 0;
	pid_t pid;

	snprintf(path, sizeof(path), "%s/ffmctl", B);
	argv[n++] = path;
	argv[n++] = "--runtime-dir";
	argv[n++] = (char *)d->run;
	argv[n++] = "--state-dir";
	argv[n++] = (char *)d->state;
	for (; *args && n < 31; args++)
		argv[n++] = (char *)*args;
	argv[n] = NULL;
	ASSERT(pipe(p) == 0);
	pid = fork();
	ASSERT(pid >= 0);
	if (pid == 0) {
		dup2(p[1], 1);
		dup2(p[1], 2);
		close(p[0]);
		execv(path, argv);
		_exit(127);
	}
	close(p[1]);
	for (;;) {
		ssize_t r = read(p[0], out + off, len - 1 - off);

		if (r <= 0)
			break;
		off += (size_t)r;
		if (off == len - 1)
			off = 0; /* keep the tail */
	}
	out[off] = 0;
	close(p[0]);
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

#define CTL(d, out, ...) ctl(d, out, sizeof(out), (const char *const[]){ __VA_ARGS__, NULL })

static void job_start(const struct dmn *d, const char *id, const char *key, const char *sel,
		      const char *val)
{
	char out[4096];
	int rc = CTL(d, out, "job", "start", id, "--key", key, sel, val);

	ASSERT_MSG(rc == 0, "ffmctl job start %s %s %s: exit %d: %s", id, sel, val, rc, out);
}

static void job_end(const struct dmn *d, const char *id)
{
	char out[4096];
	int rc = CTL(d, out, "job", "end", id);

	ASSERT_MSG(rc == 0, "ffmctl job end %s: exit %d: %s", id, rc, out);
}

static void status_json(const struct dmn *d, char *out, size_t len)
{
	int rc = ctl(d, out, len, (const char *const[]){ "status", "--json", NULL });

	ASSERT_MSG(rc == 0, "ffmctl status: exit %d: %s", rc, out);
}

/* ---- workloads --------------------------------------------------------------------------- */

struct wl {
	pid_t pid;
	int gate; /* write end: closing it lets the child exec */
	char out[PATH_MAX];
};

/*
 * Fork a child that (optionally) joins @cgroup, waits on a gate, then execs @exe with @args
 * under LD_LIBRARY_PATH=@llp and FAKECUDA_COPY_GBPS=1 (see the top of this file). Its output
 * goes to a file in the scratch directory.
 */
static void wl_prepare(struct wl *w, const char *exe, const char *const *args, const char *llp,
		       const char *cgroup, const char *const *env)
{
	int p[2];

	snprintf(w->out, sizeof(w->out), "%s/wl-%d.out", T, ++seq);
	ASSERT(pipe(p) == 0);
	w->pid = fork();
	ASSERT(w->pid >= 0);
	if (w->pid == 0) {
		char *argv[32], c;
		int n = 0, fd;

		close(p[1]);
		ahead_of_load();
		if (cgroup) {
			char path[PATH_MAX + 16], pid[32];

			snprintf(path, sizeof(path), "%s/cgroup.procs", cgroup);
			snprintf(pid, sizeof(pid), "%d\n", getpid());
			fd = open(path, O_WRONLY);
			if (fd < 0 || write(fd, pid, strlen(pid)) < 0)
				_exit(126);
			close(fd);
		}
		if (read(p[0], &c, 1) < 0)
			_exit(125);
		fd = open(w->out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		dup2(fd, 1);
		dup2(fd, 2);
		setenv("LD_LIBRARY_PATH", llp, 1);
		setenv("FAKECUDA_COPY_GBPS", "1", 1);
		for (; env && *env; env += 2)
			setenv(env[0], env[1], 1);
		argv[n++] = (char *)exe;
		for (; args && *args && n < 31; args++)
			argv[n++] = (char *)*args;
		argv[n] = NULL;
		execv(exe, argv);
		_exit(127);
	}
	close(p[0]);
	w->gate = p[1];
}

static void wl_go(struct wl *w)
{
	close(w->gate);
	w->gate = -1;
}

static int wl_wait(struct wl *w)
{
	int st;

	ASSERT(waitpid(w->pid, &st, 0) == w->pid);
	return st;
}

/*
 * A workload's executable: this run's private copy, made at first use. An exe selector is a
 * file (device and inode), and every ffmd on the machine sees every exec: with the build's own
 * file, a second run of these tests on the same build (test_probe_modes.sh beside make test,
 * two engineers, a CI matrix) had each ffmd take the other run's processes into its jobs. The
 * other's waits came into our stores (308, 329, 400, 980 at a site of 200), its holds and
 * SIGCONTs crossed ours (a process let go before its probes were there: 0 waits, or left
 * stopped for good when the other ffmd ended).
 */
static void wl_path(const char *name, char *buf, size_t len)
{
	char dir[sizeof(T) + 16], src[PATH_MAX];

	snprintf(dir, sizeof(dir), "%s/workloads", T);
	ASSERT(mkdir(dir, 0755) == 0 || errno == EEXIST);
	snprintf(buf, len, "%s/%.200s", dir, name);
	if (access(buf, X_OK) == 0)
		return;
	snprintf(src, sizeof(src), "%s/workloads/%.200s", B, name);
	copy_file(src, buf, 0755);
}

/* Run a workload to its end; fails on a nonzero exit. */
static void wl_run(const char *exe, const char *const *args, const char *llp, const char *cgroup,
		   const char *const *env, pid_t *pid_out, void (*before_go)(pid_t, void *), void *ctx)
{
	struct wl w;
	int st;

	wl_prepare(&w, exe, args, llp, cgroup, env);
	if (before_go)
		before_go(w.pid, ctx);
	wl_go(&w);
	st = wl_wait(&w);
	if (pid_out)
		*pid_out = w.pid;
	ASSERT_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s exited with status %#x (output in %s)",
		   exe, st, w.out);
}

/* A fresh cgroup v2 directory, or NULL when there is none to be had. */
static const char *make_cgroup(char *buf, size_t len)
{
	static const char *roots[] = { "/sys/fs/cgroup/unified", "/sys/fs/cgroup" };

	for (size_t i = 0; i < 2; i++) {
		char probe[PATH_MAX];

		snprintf(probe, sizeof(probe), "%s/cgroup.procs", roots[i]);
		if (access(probe, W_OK))
			continue;
		snprintf(buf, len, "%s/ffm-test-%d-%d", roots[i], getpid(), ++seq);
		if (mkdir(buf, 0755) == 0)
			return buf;
	}
	return NULL;
}

/* ---- the store --------------------------------------------------------------------------- */

struct ev {
	struct ffm_store_event e;
	char site[256]; /* "tests/workloads/x.c:27" of the application's frame, "" if none */
	char api[64];
};

struct view {
	struct ffm_store *s;
	int64_t run;
	struct ffm_store_run r;
	struct ev *ev;
	size_t n, cap;
	char api_names[64][64];
	uint32_t api_ids[64];
	int napis;
};

static int on_api(uint32_t api, const char *name, void *ctx)
{
	struct view *v = ctx;

	if (v->napis < 64) {
		v->api_ids[v->napis] = api;
		snprintf(v->api_names[v->napis++], 64, "%s", name);
	}
	return 0;
}

static int on_event(const struct ffm_store_event *e, void *ctx)
{
	struct view *v = ctx;

	if (v->n == v->cap) {
		v->cap = v->cap ? 2 * v->cap : 256;
		v->ev = realloc(v->ev, v->cap * sizeof(*v->ev));
		if (!v->ev)
			return -ENOMEM;
	}
	memset(&v->ev[v->n], 0, sizeof(v->ev[0]));
	v->ev[v->n++].e = *e;
	return 0;
}

struct frame_ctx {
	char *site;
	size_t len;
};

static int on_frame(const struct ffm_store_frame *f, uint32_t depth, void *ctx)
{
	struct frame_ctx *fc = ctx;
	const char *file;

	if (fc->site[0] || !f->file || !f->line || (f->module && strstr(f->module, "libcuda")))
		return 0;
	file = strstr(f->file, "tests/workloads/");
	snprintf(fc->site, fc->len, "%s:%u", file ? file : f->file, f->line);
	return 0;
}

static int on_run(const struct ffm_store_run *r, void *ctx)
{
	struct view *v = ctx;

	v->run = r->id;
	v->r = *r;
	return 0;
}

/* Open @key's store in @d (read only) and load run @run (0: the latest). */
static void view_load(struct view *v, const struct dmn *d, const char *key, int64_t run)
{
	struct ffm_store_opts so = { .sz = sizeof(so), .read_only = true };
	int err;

	memset(v, 0, sizeof(*v));
	err = ffm_store__open_key(d->state, &(struct ffm_store_key){ .key = key }, &so, &v->s);
	ASSERT_MSG(err == 0, "open store of key %s: %s", key, strerror(-err));
	ASSERT_OK(ffm_store__for_each_run(v->s, on_run, v));
	ASSERT_MSG(v->run > 0, "key %s has no run", key);
	if (run) {
		v->run = run;
		ASSERT_OK(ffm_store__get_run(v->s, run, &v->r));
	}
	ASSERT_OK(ffm_store__for_each_api_name(v->s, on_api, v));
	ASSERT_OK(ffm_store__for_each_event(v->s, v->run, on_event, v));
	for (size_t i = 0; i < v->n; i++) {
		struct ev *e = &v->ev[i];

		for (int k = 0; k < v->napis; k++)
			if (v->api_ids[k] == e->e.api)
				snprintf(e->api, sizeof(e->api), "%s", v->api_names[k]);
		/* Events of one stack share their site: look each stack up once. */
		for (size_t k = 0; k < i; k++)
			if (v->ev[k].e.stack == e->e.stack) {
				memcpy(e->site, v->ev[k].site, sizeof(e->site));
				goto next;
			}
		if (e->e.stack)
			ffm_store__for_each_frame(v->s, e->e.stack, on_frame,
						  &(struct frame_ctx){ e->site, sizeof(e->site) });
next:;
	}
}

static void view_free(struct view *v)
{
	ffm_store__free(v->s);
	free(v->ev);
	memset(v, 0, sizeof(*v));
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Events of @kind (0: any) at @site with @api (NULL: any): count, median wait in us. */
static size_t view_site(const struct view *v, uint32_t kind, const char *site, const char *api,
			double *median_us)
{
	uint64_t *w = calloc(v->n + 1, sizeof(*w));
	size_t n = 0;

	for (size_t i = 0; i < v->n; i++) {
		const struct ev *e = &v->ev[i];

		if ((kind && e->e.kind != kind) || (site && strcmp(e->site, site)) ||
		    (api && strcmp(e->api, api)))
			continue;
		w[n++] = e->e.wait_ns;
	}
	qsort(w, n, sizeof(*w), cmp_u64);
	if (median_us)
		*median_us = n ? w[n / 2] / 1e3 : 0;
	free(w);
	return n;
}

/* The fake driver's own measure of each wait (FAKECUDA_WAIT_LOG), in the order they ended. */
static size_t read_wait_log(const char *path, uint64_t **out)
{
	FILE *f = fopen(path, "r");
	size_t n = 0, cap = 256;
	unsigned long long ns;

	*out = malloc(cap * sizeof(**out));
	ASSERT(*out);
	while (f && fscanf(f, "%llu", &ns) == 1) {
		if (n == cap)
			ASSERT((*out = realloc(*out, (cap *= 2) * sizeof(**out))));
		(*out)[n++] = ns;
	}
	if (f)
		fclose(f);
	return n;
}

static int cmp_ev_start(const void *a, const void *b)
{
	const struct ev *x = *(const struct ev *const *)a, *y = *(const struct ev *const *)b;

	return x->e.start_ns < y->e.start_ns ? -1 : x->e.start_ns > y->e.start_ns;
}

/*
 * The waits at @site in @api (NULL: any) as ffm measured them and as the driver did (@truth, one
 * per wait of the process in the order they ended: the i-th wait of the run in time order is
 * truth[i]): median (or, @max, the longest) of each, in us. Judging ffm against the truth rather
 * than against the workload's parameters keeps the check exact on a loaded machine, where
 * every wait lasts longer than the simulated GPU work.
 */
static void site_vs_truth(const struct view *v, const uint64_t *truth, size_t ntruth, const char *site,
			  const char *api, bool max, double *ffm_us, double *truth_us)
{
	const struct ev **w = calloc(v->n + 1, sizeof(*w));
	uint64_t *a = calloc(v->n + 1, sizeof(*a)), *b = calloc(v->n + 1, sizeof(*b));
	size_t nw = 0, n = 0;

	ASSERT(w && a && b);
	for (size_t i = 0; i < v->n; i++)
		if (v->ev[i].e.kind == FFM_EV_WAIT)
			w[nw++] = &v->ev[i];
	ASSERT_MSG(nw == ntruth, "ffm recorded %zu waits, the driver made %zu", nw, ntruth);
	qsort(w, nw, sizeof(*w), cmp_ev_start);
	for (size_t i = 0; i < nw; i++) {
		if ((site && strcmp(w[i]->site, site)) || (api && strcmp(w[i]->api, api)))
			continue;
		a[n] = w[i]->e.wait_ns;
		b[n++] = truth[i];
	}
	qsort(a, n, sizeof(*a), cmp_u64);
	qsort(b, n, sizeof(*b), cmp_u64);
	*ffm_us = n ? (max ? a[n - 1] : a[n / 2]) / 1e3 : 0;
	*truth_us = n ? (max ? b[n - 1] : b[n / 2]) / 1e3 : 0;
	free(w);
	free(a);
	free(b);
}

static void view_print_sites(const struct view *v)
{
	for (size_t i = 0; i < v->n; i++) {
		size_t k;

		for (k = 0; k < i; k++)
			if (v->ev[k].e.stack == v->ev[i].e.stack && v->ev[k].e.kind == v->ev[i].e.kind)
				break;
		if (k == i)
			printf("#   kind %u %-20s %-40s x%zu\n", v->ev[i].e.kind, v->ev[i].api, v->ev[i].site,
			       view_site(v, v->ev[i].e.kind, v->ev[i].site, v->ev[i].api, NULL));
	}
}

/* ---- the planted sites of tests/workloads/README.md ---------------------------------------- */

struct site {
	char workload[160], kind[160], api[160], site[160];
};

/* Base name of a driver symbol, as the store names APIs: cuMemFree_v2 -> cuMemFree. */
static void base_name(const char *sym, char *out, size_t len)
{
	char *u;

	snprintf(out, len, "%s", sym);
	while ((u = strrchr(out, '_')) &&
	       ((u[1] == 'v' && u[2] >= '0' && u[2] <= '9') || !strcmp(u, "_ptds") || !strcmp(u, "_ptsz")))
		*u = 0;
}

static int readme_sites(struct site *out, int max)
{
	char line[1024], path[PATH_MAX];
	int n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "tests/workloads/README.md");
	f = fopen(path, "r");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f) && n < max) {
		char c[6][160];

		/* | workload | kind | call in source | symbol | site | expected report | */
		if (sscanf(line, "| %159[^ |] | %159[^ |] | %159[^|]| `%159[^`]` | `%159[^`]` | %159[^|]|", c[0],
			   c[1], c[2], c[3], c[4], c[5]) != 6)
			continue;
		snprintf(out[n].workload, sizeof(out[n].workload), "%s", c[0]);
		snprintf(out[n].kind, sizeof(out[n].kind), "%s", c[1]);
		base_name(c[3], out[n].api, sizeof(out[n].api));
		snprintf(out[n].site, sizeof(out[n].site), "%s", c[4]);
		n++;
	}
	fclose(f);
	return n;
}

/* ---- cases ------------------------------------------------------------------------------- */

static void json_has(const char *json, const char *needle)
{
	ASSERT_MSG(strstr(json, needle), "status lacks %s: %s", needle, json);
}


static void new_driver_dir(const char *name, char *dir, size_t len)
{
	char src[2048], lib[PATH_MAX + 16];

	snprintf(dir, len, "%s/%s", T, name);
	ASSERT(mkdir(dir, 0755) == 0);
	snprintf(src, sizeof(src), "%s/libcuda.so.1", FAKE);
	snprintf(lib, sizeof(lib), "%s/libcuda.so.1", dir);
	copy_file(src, lib, 0755);
}

static const char *const ITERS[] = { "--iters", N_ITERS_S, NULL };
#define SITE_US "tests/workloads/unnecessary_sync.c:27"

static void expect_count(const struct view *v, uint32_t kind, const char *site, const char *api,
			 size_t want)
{
	size_t n = view_site(v, kind, site, api, NULL);

	if (n != want) {
		printf("# run %" PRId64 " (stage %d), %zu events:\n", v->run, v->r.stage, v->n);
		view_print_sites(v);
		FAIL("%zu events of kind %u at %s in %s, want %zu", n, kind, site, api ? api : "any api", want);
	}
}

/*
 * A driver file ffmd has not seen (used through LD_LIBRARY_PATH by a job's process) is
 * calibrated (the state directory is fresh) and attached while the process is held, so that
 * even its first sync is recorded.
 */
static void first_driver(void)
{
	char dir[PATH_MAX], exe[PATH_MAX], id[64], json[1 << 16], want[PATH_MAX + 64];
	struct view v;

	main_daemon();
	driver_ready = true; /* tried once: a failure is this case's, not every later one's */
	/* The build's simulated driver: a directory ffmd has not seen (no libcuda on this
	 * machine's loader path). Copies in other directories come in two_driver_files_at_once,
	 * last, so that only this one gets the stage-2 probes (each costs the kernel an RCU
	 * grace period to detach). */
	snprintf(dir, sizeof(dir), "%s", FAKE);
	wl_path("unnecessary_sync", exe, sizeof(exe));
	snprintf(id, sizeof(id), "newdrv-%d", ++seq);
	job_start(&MAIN_D, id, id, "--exe", exe);
	wl_run(exe, ITERS, dir, NULL, NULL, NULL, NULL, NULL);
	status_json(&MAIN_D, json, sizeof(json));
	snprintf(want, sizeof(want), "\"path\":\"%s/libcuda.so.1\",\"usable\":true", dir);
	json_has(json, want);
	job_end(&MAIN_D, id);
	view_load(&v, &MAIN_D, id, 0);
	expect_count(&v, FFM_EV_WAIT, SITE_US, "cuCtxSynchronize", N_ITERS);
	view_free(&v);
}

static void need_driver(void)
{
	main_daemon();
	if (!driver_ready)
		first_driver();
}

TEST(new_driver_is_calibrated_and_attached)
{
	char line[1024];
	bool calibrated = false;
	FILE *f;

	main_daemon();
	if (driver_ready)
		SKIP("the driver was seen by an earlier case");
	first_driver();
	f = fopen(MAIN_D.log, "r");
	ASSERT(f);
	while (fgets(line, sizeof(line), f))
		calibrated |= strstr(line, FAKE) && strstr(line, "(calibrated now)");
	fclose(f);
	ASSERT_MSG(calibrated, "ffmd's log does not say it calibrated %s/libcuda.so.1", FAKE);
}

/* The uprobe kind ffmd reports: the one FFM_PROBE_MODE forces (tests/daemon/test_probe_modes.sh
 * runs this file under each), else sessions wherever the kernel has them (6.12+). */
TEST(status_reports_probe_mode)
{
	const char *forced = getenv("FFM_PROBE_MODE");
	char json[1 << 16], want[64];
	struct utsname u;
	int maj = 0, min = 0;

	main_daemon();
	ASSERT(uname(&u) == 0);
	sscanf(u.release, "%d.%d", &maj, &min);
	if (forced && *forced)
		snprintf(want, sizeof(want), "\"probe_mode\":\"%s\"", forced);
	else if (maj > 6 || (maj == 6 && min >= 12))
		snprintf(want, sizeof(want), "\"probe_mode\":\"session\"");
	else
		SKIP("kernel before 6.12: no uprobe sessions to expect");
	status_json(&MAIN_D, json, sizeof(json));
	ASSERT_MSG(strstr(json, want), "ffmd status lacks %s: %.300s", want, json);
}

/* Expected waits of the planted sites, with the parameters used below (see the top). */
static const struct wl_case {
	const char *name;
	const char *args[6];
	size_t count;
	struct {
		const char *site;
		double e_us;
	} exp[4];
} WL[] = {
	{ "unnecessary_sync", { "--iters", N_ITERS_S }, N_ITERS, { { SITE_US, 500 } } },
	{ "misplaced_sync", { "--iters", N_ITERS_S }, N_ITERS, { { "tests/workloads/misplaced_sync.c:30", 500 + 8 + 16.4 } } },
	{ "free_in_loop", { "--iters", N_ITERS_S }, N_ITERS, { { "tests/workloads/free_in_loop.c:31", 500 } } },
	{ "dup_transfer", { "--iters", N_ITERS_S, "--in-words", "262144" }, N_ITERS,
	  { { "tests/workloads/dup_transfer.c:35", 8 + 1048.6 } } },
	{ "pageable_async", { "--iters", N_ITERS_S }, N_ITERS,
	  { { "tests/workloads/pageable_async.c:30", 500 + 8 + 262.1 },
	    { "tests/workloads/pageable_async.c:32", 0 } } },
	{ "managed_memset", { "--iters", N_ITERS_S }, N_ITERS, { { "tests/workloads/managed_memset.c:37", 500 } } },
	{ "sequence", { "--iters", N_ITERS_S }, N_ITERS,
	  { { "tests/workloads/seq_main.c:40", 300 },
	    { "tests/workloads/seq_helpers.c:14", 8 + 262.1 },
	    { "tests/workloads/seq_helpers.c:19", 300 },
	    { "tests/workloads/seq_main.c:48", 0 } } },
	{ "control", { "--iters", N_ITERS_S }, N_ITERS, { { "tests/workloads/control.c:30", 1000 + 8 + 16.4 - 500 } } },
	/* hang's one wait ends right before the process does: its stack is read after the
	 * process is gone, so it is counted and timed by its duration alone (site "" below). */
	{ "hang", { "--hold-ms", "150" }, 1, { { "tests/workloads/hang.c:46", 150000 } } },
};

/*
 * Every workload under a job started by exe, pid or cgroup selector (in turn), stage 1: each
 * planted site of the README's table has exactly its number of waits, attributed to the
 * table's public function, at the table's file:line, lasting what the parameters say; every
 * wait of the run names a public function and an application call site.
 */
TEST(workloads_stage1_sites_counts_durations)
{
	struct site sites[64];
	int nsites;
	char cgbuf[PATH_MAX];
	const char *cg;

	need_driver();
	nsites = readme_sites(sites, 64);
	ASSERT_MSG(nsites >= 10, "parsed only %d sites from tests/workloads/README.md", nsites);
	cg = make_cgroup(cgbuf, sizeof(cgbuf));
	for (size_t w = 0; w < sizeof(WL) / sizeof(WL[0]); w++) {
		const struct wl_case *c = &WL[w];
		const char *how = w % 3 == 0 ? "--exe" : w % 3 == 1 ? "--pid" : cg ? "--cgroup" : "--exe";
		char exe[PATH_MAX], id[64], pidbuf[16], wlog[PATH_MAX];
		const char *const env[] = { "FAKECUDA_WAIT_LOG", wlog, NULL };
		uint64_t *truth;
		size_t ntruth;
		struct view v;
		struct wl run;
		int st, checked = 0;

		wl_path(c->name, exe, sizeof(exe));
		snprintf(wlog, sizeof(wlog), "%s/waits-%s-%d", T, c->name, seq + 1);
		snprintf(id, sizeof(id), "wl-%s-%d", c->name, ++seq);
		if (!strcmp(how, "--pid")) {
			/* Tracked by pid before it execs: the job follows it into the workload. */
			wl_prepare(&run, exe, c->args, FAKE, NULL, env);
			snprintf(pidbuf, sizeof(pidbuf), "%d", run.pid);
			job_start(&MAIN_D, id, id, how, pidbuf);
		} else {
			job_start(&MAIN_D, id, id, how, !strcmp(how, "--exe") ? exe : cg);
			wl_prepare(&run, exe, c->args, FAKE, !strcmp(how, "--cgroup") ? cg : NULL, env);
		}
		wl_go(&run);
		st = wl_wait(&run);
		ASSERT_MSG(WIFEXITED(st) && !WEXITSTATUS(st), "%s: status %#x", c->name, st);
		job_end(&MAIN_D, id);
		view_load(&v, &MAIN_D, id, 0);
		ntruth = read_wait_log(wlog, &truth);
		printf("# %s (job by %s): %zu events\n", c->name, how + 2, v.n);
		ASSERT_EQ(v.r.stage, 1);
		for (int i = 0; i < nsites; i++) {
			const struct site *s = &sites[i];
			double med, tmed, lo;
			int k;

			if (strcmp(s->workload, c->name))
				continue;
			if (!strcmp(s->api, "-"))
				continue; /* a first use of data: stage 3 */
			if (!strcmp(s->kind, "temp-buffer"))
				continue; /* an allocation: it waits for nothing (stage 2's calls) */
			for (k = 0; k < 4 && c->exp[k].site; k++)
				if (!strcmp(c->exp[k].site, s->site))
					break;
			ASSERT_MSG(k < 4 && c->exp[k].site, "no expectation here for %s %s", c->name, s->site);
			if (!strcmp(c->name, "hang")) {
				/* See WL[]: the one wait longer than 100 ms. */
				size_t n = 0;

				for (size_t e = 0; e < v.n; e++)
					n += v.ev[e].e.kind == FFM_EV_WAIT && v.ev[e].e.wait_ns > 100000000ull;
				ASSERT_MSG(n == 1, "hang: %zu waits over 100 ms, want 1", n);
				site_vs_truth(&v, truth, ntruth, NULL, NULL, true, &med, &tmed);
			} else {
				expect_count(&v, FFM_EV_WAIT, s->site, s->api, c->count);
				site_vs_truth(&v, truth, ntruth, s->site, s->api, false, &med, &tmed);
			}
			/* Load only lengthens a wait: never shorter than the parameters make it; and
			 * what ffm measured lies inside what the driver measured around the same wait
			 * (minus the probes' own cost and a preemption between probe and timer). */
			lo = 0.7 * c->exp[k].e_us - 100;
			ASSERT_MSG(med >= lo, "%s %s: median wait %.0f us, want at least %.0f us", c->name, s->site,
				   med, lo);
			ASSERT_MSG(med <= tmed + 50 && med >= 0.9 * tmed - 300,
				   "%s %s: median wait %.0f us, the driver's own measure %.0f us", c->name, s->site,
				   med, tmed);
			printf("#   %-36s %-20s x%zu median %8.0f us (driver %8.0f, expected ~%.0f)\n", s->site,
			       s->api, c->count, med, tmed, c->exp[k].e_us);
			checked++;
		}
		ASSERT_MSG(checked > 0, "the README lists no site of %s", c->name);
		{
			/* Waits first seen at teardown are read after the process exited, and
			 * keep unnamed frames (a known limit, reported, not failed). */
			size_t unnamed = 0;

			for (size_t i = 0; i < v.n; i++)
				unnamed += v.ev[i].e.kind == FFM_EV_WAIT && !v.ev[i].site[0];
			if (unnamed)
				printf("#   %zu waits without a call site (stack read after the process exited)\n",
				       unnamed);
		}
		view_free(&v);
		free(truth);
	}
	if (cg)
		rmdir(cg);
}

/*
 * A process that matches a job's cgroup only when it execs, after the job started, before it
 * maps libcuda: no call is lost (every wait of unnecessary_sync: iters + 1 syncs, the final
 * DtoH copy, the free and the context release).
 */
TEST(exec_after_job_start_loses_no_call)
{
	char exe[PATH_MAX], id[64], cgbuf[PATH_MAX];
	size_t n = 0, other = 0;
	const char *cg;
	struct view v;
	pid_t pid;

	need_driver();
	cg = make_cgroup(cgbuf, sizeof(cgbuf));
	if (!cg)
		SKIP("no writable cgroup v2 hierarchy");
	wl_path("unnecessary_sync", exe, sizeof(exe));
	snprintf(id, sizeof(id), "cg-%d", ++seq);
	job_start(&MAIN_D, id, id, "--cgroup", cg);
	wl_run(exe, ITERS, FAKE, cg, NULL, &pid, NULL, NULL);
	job_end(&MAIN_D, id);
	rmdir(cg);
	view_load(&v, &MAIN_D, id, 0);
	for (size_t i = 0; i < v.n; i++)
		if (v.ev[i].e.kind == FFM_EV_WAIT) {
			n += v.ev[i].e.tgid == (uint32_t)pid;
			other += v.ev[i].e.tgid != (uint32_t)pid;
		}
	if (other)
		printf("# %zu waits of other processes in the job\n", other);
	ASSERT_MSG(n == N_ITERS + 4, "%zu waits of the workload, want %d", n, N_ITERS + 4);
	expect_count(&v, FFM_EV_WAIT, SITE_US, "cuCtxSynchronize", N_ITERS);
	view_free(&v);
}

static int nthreads(pid_t pid)
{
	char path[64];
	struct dirent *de;
	int n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	d = opendir(path);
	if (!d)
		return -1;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

/* SIGKILL while blocked in a long sync: the store stays consistent, ffmd goes on. */
TEST(process_killed_mid_call)
{
	const char *const args[] = { "--hold-ms", "5000", NULL };
	const char *const env[] = { "FFM_SCHED", "blocking", NULL };
	char exe[PATH_MAX], id[64], out[4096];
	struct view v;
	struct wl run;
	double t0;
	int st;

	need_driver();
	wl_path("hang", exe, sizeof(exe));
	snprintf(id, sizeof(id), "killed-%d", ++seq);
	job_start(&MAIN_D, id, id, "--exe", exe);
	wl_prepare(&run, exe, args, FAKE, NULL, env);
	wl_go(&run);
	/* hang starts its releasing thread right before the sync: main, engine, releaser. */
	for (t0 = mono_s(); nthreads(run.pid) < 3 && mono_s() - t0 < 10; sleep_ms(10))
		;
	ASSERT_MSG(nthreads(run.pid) >= 3, "hang did not reach its sync in 10 s");
	sleep_ms(300);
	kill(run.pid, SIGKILL);
	st = wl_wait(&run);
	ASSERT(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	job_end(&MAIN_D, id);
	ASSERT_MSG(kill(MAIN_D.pid, 0) == 0, "ffmd died");
	ASSERT_EQ(CTL(&MAIN_D, out, "status"), 0);
	view_load(&v, &MAIN_D, id, 0);
	ASSERT_OK(ffm_store__check(v.s, true));
	ASSERT_MSG(v.r.end_ns != 0, "the run was not ended");
	/* The interrupted sync never returned: it is no wait of 5 s, nor of any length. */
	expect_count(&v, FFM_EV_WAIT, "tests/workloads/hang.c:46", NULL, 0);
	for (size_t i = 0; i < v.n; i++)
		ASSERT_MSG(v.ev[i].e.dur_ns < 1000000000ull, "an event of %.2f s", v.ev[i].e.dur_ns / 1e9);
	view_free(&v);
}

/* Wait at least @min_ms, then until ffmd's status counts @n records of job @id (60 s at most). */
static void wait_job_events(const struct dmn *d, const char *id, uint64_t n, int min_ms)
{
	char json[1 << 16], want[160];
	double t0 = mono_s();
	uint64_t ev = 0;

	sleep_ms(min_ms);
	snprintf(want, sizeof(want), "\"job\":\"%s\"", id);
	for (;;) {
		const char *p, *e;

		status_json(d, json, sizeof(json));
		p = strstr(json, want);
		e = p ? strstr(p, "\"events\":") : NULL;
		ev = e ? strtoull(e + strlen("\"events\":"), NULL, 10) : 0;
		if (ev >= n)
			return;
		ASSERT_MSG(mono_s() - t0 < 60, "job %s: %" PRIu64 " records in 60 s, want %" PRIu64, id, ev, n);
		sleep_ms(50);
	}
}

/*
 * A process that outlives its job and is then selected by the next one (a long-lived process
 * taken by pid twice): the second job's store needs the stacks as much as the first did. The
 * BPF side remembers which stacks went out per process and job run (ffm_job_cfg.gen); when it
 * remembered them per process only, every wait of the second job came without a call site.
 * The workload spends 80% of its time in its sync, so the first job most likely ends inside
 * one: that call's return half never runs, and the thread's state must start over in the
 * second job (it once hid all of the thread's later waits).
 */
TEST(process_in_two_jobs_has_call_sites_in_both)
{
	/* Never ends by itself: killed below, whatever the machine's load made of its pace. */
	const char *const args[] = { "--iters", "100000000", "--kernel-us", "800", "--cpu-us", "200", NULL };
	char exe[PATH_MAX], id[2][64], pid_s[32];
	struct wl run;
	int st;

	need_driver();
	wl_path("unnecessary_sync", exe, sizeof(exe));
	wl_prepare(&run, exe, args, FAKE, NULL, NULL);
	snprintf(pid_s, sizeof(pid_s), "%d", run.pid);
	for (int j = 0; j < 2; j++) {
		snprintf(id[j], sizeof(id[j]), "twojobs-%d", ++seq);
		job_start(&MAIN_D, id[j], id[j], "--pid", pid_s);
		if (j == 0)
			wl_go(&run);
		/* At least 800 ms, and until ffmd has read 300 records of the job: a fixed time
		 * gave a workload slowed by a busy machine too few waits to tell a lost call site. */
		wait_job_events(&MAIN_D, id[j], 300, 800);
		ASSERT_MSG(kill(run.pid, 0) == 0, "the workload ended before job %d ended", j + 1);
		job_end(&MAIN_D, id[j]);
	}
	kill(run.pid, SIGKILL);
	st = wl_wait(&run);
	ASSERT(WIFSIGNALED(st));
	for (int j = 0; j < 2; j++) {
		struct view v;
		size_t at_site, nosite = 0;

		view_load(&v, &MAIN_D, id[j], 0);
		at_site = view_site(&v, FFM_EV_WAIT, SITE_US, "cuCtxSynchronize", NULL);
		for (size_t i = 0; i < v.n; i++)
			nosite += v.ev[i].e.kind == FFM_EV_WAIT && !v.ev[i].site[0];
		printf("# job %d: %zu waits at %s, %zu without a call site\n", j + 1, at_site, SITE_US, nosite);
		if (!at_site || nosite)
			view_print_sites(&v);
		ASSERT_MSG(at_site > 100, "job %d: %zu waits at the workload's sync", j + 1, at_site);
		ASSERT_MSG(nosite == 0, "job %d: %zu waits without a call site", j + 1, nosite);
		view_free(&v);
	}
}

/*
 * SIGKILL of ffmd in the middle of a job. Durability bound (see daemon/server.c): the store
 * keeps every record ffmd read more than flush_ms (200 ms) before the kill, and ffmd reads the
 * ring buffer at least every 100 ms; so the waits stored must run, without a gap, from the
 * first one to at most 300 ms before the kill (checked with twice that: 600 ms), and the file
 * passes an integrity check. The restarted ffmd closes the interrupted run (aborted, partial),
 * resumes the job from its journal, and records the next run of it.
 */
static char ffm_test_proc_state(pid_t pid);

TEST(ffmd_sigkill_loses_at_most_the_last_batch)
{
	const char *const args[] = { "--iters", "4000", "--kernel-us", "200", "--cpu-us", "800",
				     NULL };
	char exe[PATH_MAX], id[64], json[1 << 16], want[128], trace[PATH_MAX];
	const char *env[] = { "FFM_WL_TRACE", trace, NULL };
	struct ffm_store_run old;
	uint64_t last_end = 0, prev = 0, maxgap = 0, kill_ns, t;
	size_t n = 0, before = 0, syncs = 0;
	struct view v;
	struct wl run;
	FILE *f;
	int st;

	need_driver();
	wl_path("unnecessary_sync", exe, sizeof(exe));
	snprintf(id, sizeof(id), "sigkill-%d", ++seq);
	snprintf(trace, sizeof(trace), "%s/trace-%d", T, seq);
	job_start(&MAIN_D, id, id, "--exe", exe);
	wl_prepare(&run, exe, args, FAKE, NULL, env);
	wl_go(&run);
	/* In the middle of the workload: at least 1 s in, and 200 records read by ffmd. */
	wait_job_events(&MAIN_D, id, 200, 1000);
	ASSERT_MSG(kill(run.pid, 0) == 0 && ffm_test_proc_state(run.pid) != 'Z',
		   "the workload ended before the kill: make it longer");
	kill_ns = (uint64_t)(mono_s() * 1e9);
	ASSERT(daemon_stop(&MAIN_D, SIGKILL) != 0);
	st = wl_wait(&run);
	ASSERT_MSG(WIFEXITED(st) && !WEXITSTATUS(st), "the workload failed when ffmd was killed: %#x", st);

	view_load(&v, &MAIN_D, id, 0);
	ASSERT_OK(ffm_store__check(v.s, true));
	ASSERT_MSG(v.r.end_ns == 0, "the interrupted run is marked ended");
	for (size_t i = 0; i < v.n; i++) {
		const struct ffm_store_event *e = &v.ev[i].e;

		if (e->kind != FFM_EV_WAIT || strcmp(v.ev[i].site, SITE_US))
			continue;
		/* Events come in start order. */
		if (prev && e->start_ns - prev > maxgap)
			maxgap = e->start_ns - prev;
		prev = e->start_ns;
		last_end = e->start_ns + e->dur_ns;
		n++;
	}
	/* What the workload did: the time each iteration's sync returned (FFM_WL_TRACE). Every
	 * sync that returned before the last stored wait ended must be stored: a gap in the
	 * stored waits is lost records only where the workload did not pause (a busy machine
	 * left it without a CPU for 100-300 ms, which a gap threshold took for a loss). */
	f = fopen(trace, "rb");
	ASSERT_MSG(f, "the workload wrote no trace %s", trace);
	while (fread(&t, sizeof(t), 1, f) == 1) {
		before += t < last_end;
		syncs++;
	}
	fclose(f);
	printf("# %zu waits stored of %zu syncs; %zu syncs returned before the last stored wait ended, "
	       "which ended %.0f ms before the kill; largest gap %.1f ms\n", n, syncs, before,
	       (double)((int64_t)kill_ns - (int64_t)last_end) / 1e6, maxgap / 1e6);
	ASSERT_MSG(n > 0, "nothing stored");
	ASSERT_MSG(n == before + 1, "%zu waits stored up to the last one, the workload's syncs up to it: %zu",
		   n, before + 1);
	ASSERT_MSG(last_end + 600000000ull >= kill_ns, "the last stored wait ended %.0f ms before the kill",
		   (double)(kill_ns - last_end) / 1e6);
	old = v.r;
	view_free(&v);

	/* ffmd restarts and goes on. */
	daemon_start(&MAIN_D, "main", NULL);
	status_json(&MAIN_D, json, sizeof(json));
	snprintf(want, sizeof(want), "\"job\":\"%s\"", id);
	json_has(json, want);
	wl_run(exe, ITERS, FAKE, NULL, NULL, NULL, NULL, NULL);
	job_end(&MAIN_D, id);
	view_load(&v, &MAIN_D, id, old.id);
	ASSERT_MSG(v.r.end_ns && (v.r.flags & FFM_RUN_ABORTED) && (v.r.flags & FFM_RUN_PARTIAL),
		   "the interrupted run: end %" PRIu64 ", flags %#x", v.r.end_ns, v.r.flags);
	view_free(&v);
	view_load(&v, &MAIN_D, id, 0);
	ASSERT_MSG(v.run > old.id, "no new run after the restart");
	ASSERT_EQ(v.r.stage, old.stage); /* the interrupted stage is done again */
	expect_count(&v, FFM_EV_WAIT, SITE_US, "cuCtxSynchronize", N_ITERS);
	view_free(&v);
}

/*
 * Start ffmd @name (a state directory of its own, so that nothing is cached) whose first
 * calibration waits 5 s first. A hold lasts as long as the driver's calibration, which takes a
 * second or two: on a busy machine it could end before a test got to act on it; the wait makes
 * the hold outlast the test's reaction, whatever the load.
 */
static void daemon_start_slow_calib(struct dmn *d, const char *name)
{
	char wrap[PATH_MAX], once[PATH_MAX], text[3 * PATH_MAX];

	snprintf(wrap, sizeof(wrap), "%s/calib-slow-%s.sh", T, name);
	snprintf(once, sizeof(once), "%s/calib-slow-%s.once", T, name);
	snprintf(text, sizeof(text), "#!/bin/sh\nmkdir '%s' 2>/dev/null && sleep 5\nexec '%s/ffm-calib-probe' \"$@\"\n",
		 once, B);
	write_file(wrap, text);
	ASSERT(chmod(wrap, 0755) == 0);
	setenv("FFM_CALIB_PROG", wrap, 1);
	daemon_start(d, name, "");
	unsetenv("FFM_CALIB_PROG");
}

/*
 * ffmd @name with a slow first calibration, a job of the unnecessary_sync workload, and that
 * workload started in @run: true once ffmd lists it as held (within 10 s), the driver it
 * brought being calibrated. The list of holds names it while it is held (daemon/holds.c).
 */
static bool start_held_workload(struct dmn *d, const char *name, struct wl *run)
{
	char exe[PATH_MAX], held[PATH_MAX + 16], want[64];
	double t0;

	daemon_start_slow_calib(d, name);
	snprintf(held, sizeof(held), "%s/ffmd-held", d->state);
	wl_path("unnecessary_sync", exe, sizeof(exe));
	job_start(d, "held", "held", "--exe", exe);
	wl_prepare(run, exe, ITERS, FAKE, NULL, NULL);
	wl_go(run);
	snprintf(want, sizeof(want), "%d ", run->pid);
	for (t0 = mono_s(); mono_s() - t0 < 10 && !log_has(held, want); sleep_ms(2))
		;
	return log_has(held, want);
}

/*
 * ffmd killed while it holds a process (here: while it calibrates the driver the process
 * brought; a state directory of its own, so that nothing is cached) must not leave that
 * process stopped: the next ffmd lets it go, and the workload runs to its end.
 */
TEST(ffmd_killed_while_holding_lets_the_process_go)
{
	static struct dmn hk;
	char want[128];
	struct wl run;
	double t0;
	char st = 0;
	int ws = 0;

	need_driver();
	ASSERT_MSG(start_held_workload(&hk, "holdkill", &run), "ffmd never listed process %d as held",
		   run.pid);
	daemon_stop(&hk, SIGKILL);
	for (t0 = mono_s(); mono_s() - t0 < 2 && st != 'T'; sleep_ms(5))
		st = ffm_test_proc_state(run.pid);
	if (st != 'T') {
		kill(run.pid, SIGCONT);
		wl_wait(&run);
		FAIL("process %d was not stopped when ffmd was killed (state %c): the hold was over", run.pid,
		     st ? st : '?');
	}
	daemon_start(&hk, "holdkill", NULL);
	for (t0 = mono_s(); mono_s() - t0 < 20 && waitpid(run.pid, &ws, WNOHANG) == 0; sleep_ms(20))
		;
	if (mono_s() - t0 >= 20) {
		kill(run.pid, SIGCONT);
		wl_wait(&run);
		daemon_stop(&hk, SIGTERM);
		FAIL("the restarted ffmd left process %d stopped", run.pid);
	}
	daemon_stop(&hk, SIGTERM);
	ASSERT_MSG(WIFEXITED(ws) && !WEXITSTATUS(ws), "the workload ended with status %#x", ws);
	snprintf(want, sizeof(want), "process %d was held by an ffmd that died: let go", run.pid);
	ASSERT_MSG(log_has(hk.log, want), "the restarted ffmd's log does not say it let %d go", run.pid);
}

/* Wait until @d's status shows the driver file @lib usable with its probes attached (system-wide
 * scope: the file's own probes). */
static void wait_driver_attached(const struct dmn *d, const char *lib)
{
	char json[1 << 16], want[PATH_MAX + 64];
	double t0 = mono_s();

	snprintf(want, sizeof(want), "\"path\":\"%s\",\"usable\":true", lib);
	for (;;) {
		const char *p, *pr;

		status_json(d, json, sizeof(json));
		p = strstr(json, want);
		pr = p ? strstr(p, "\"probes\":") : NULL;
		if (pr && atoi(pr + strlen("\"probes\":")) > 0)
			return;
		ASSERT_MSG(mono_s() - t0 < 30, "driver %s not ready with probes in 30 s: %s", lib, json);
		sleep_ms(20);
	}
}

/*
 * Overwhelm the collector: a 64 KiB ring buffer that BPF never wakes ffmd for, and a workload of
 * 3000 back-to-back syncs run while ffmd reads nothing at all (stopped: it would otherwise read
 * every 100 ms, and a workload slowed by a busy machine then never filled the buffer: "nothing
 * was lost"). Lost records are counted in the run's drops and flag it, never vanish: stored
 * waits + lost records >= the waits that happened. System-wide probes, so that the workload is
 * measured from its first call with ffmd stopped: a first, short run of it makes the driver
 * ready and attached (the per-process scope would need ffmd to give it its probes).
 */
TEST(flood_drops_are_counted)
{
	static struct dmn fl;
	const char *const args[] = { "--iters", "3000", "--kernel-us", "0", "--cpu-us", "0", NULL };
	const char *const primer[] = { "--iters", "1", NULL };
	const size_t happened = 3000 + 4;
	char exe[PATH_MAX], cmd[4 * PATH_MAX], id[64], lib[PATH_MAX];
	struct ffm_store_drops dr;
	struct view v;
	size_t stored = 0;
	pid_t pid;

	need_driver();
	snprintf(fl.dir, sizeof(fl.dir), "%s/flood", T);
	snprintf(fl.state, sizeof(fl.state), "%s/state", fl.dir);
	snprintf(fl.run, sizeof(fl.run), "%s/run", fl.dir);
	snprintf(fl.log, sizeof(fl.log), "%s/ffmd.log", fl.dir);
	snprintf(fl.conf, sizeof(fl.conf), "%s/ffmd.conf", fl.dir);
	/* The calibration is cached per build-id: take the main daemon's. */
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s' && cp -r '%s/drivers' '%s/'", fl.state, MAIN_D.state, fl.state);
	ASSERT(system(cmd) == 0);
	daemon_start(&fl, "flood", "ringbuf_kib = 64\nringbuf_wakeup_kib = 65536\nprobe_scope = system\n");
	{
		char json[1 << 16];

		status_json(&fl, json, sizeof(json));
		json_has(json, "\"probe_scope\":\"system\"");
	}
	wl_path("unnecessary_sync", exe, sizeof(exe));
	snprintf(id, sizeof(id), "flood-%d", ++seq);
	job_start(&fl, id, id, "--exe", exe);
	wl_run(exe, primer, FAKE, NULL, NULL, NULL, NULL, NULL);
	snprintf(cmd, sizeof(cmd), "%s/libcuda.so.1", FAKE);
	ASSERT(realpath(cmd, lib));
	wait_driver_attached(&fl, lib);
	ASSERT(kill(fl.pid, SIGSTOP) == 0);
	wl_run(exe, args, FAKE, NULL, NULL, &pid, NULL, NULL);
	ASSERT(kill(fl.pid, SIGCONT) == 0);
	job_end(&fl, id);
	ASSERT_EQ(daemon_stop(&fl, SIGTERM), 0);
	view_load(&v, &fl, id, 0);
	for (size_t i = 0; i < v.n; i++)
		stored += v.ev[i].e.kind == FFM_EV_WAIT && v.ev[i].e.tgid == (uint32_t)pid;
	ASSERT_OK(ffm_store__get_drops(v.s, v.run, &dr));
	printf("# %zu of %zu waits stored, %" PRIu64 " records lost (ring buffer full), %" PRIu64 " other\n", stored,
	       happened, dr.count[FFM_DROP_RINGBUF_FULL], dr.count[FFM_DROP_OTHER]);
	ASSERT_MSG(dr.count[FFM_DROP_RINGBUF_FULL] > 0, "nothing was lost: the flood was too weak");
	ASSERT_MSG(v.r.flags & FFM_RUN_DROPPED, "run flags %#x lack DROPPED", v.r.flags);
	/* Not "fewer than happened": what was lost may be other records of the run (stacks, the
	 * process records) while every wait fit; the invariant is that none vanishes. */
	ASSERT_MSG(stored <= happened, "%zu waits stored, only %zu happened", stored, happened);
	ASSERT_MSG(stored + dr.count[FFM_DROP_RINGBUF_FULL] >= happened, "%zu stored + %" PRIu64 " lost < %zu",
		   stored, dr.count[FFM_DROP_RINGBUF_FULL], happened);
	view_free(&v);
}

/* Run 1 of a key is stage 1, run 2 stage 2 (API calls with their waits and launches). */
TEST(stage_escalation_run1_stage1_run2_stage2)
{
	char exe[PATH_MAX], key[64], id[128], wlog[PATH_MAX];
	const char *const env[] = { "FAKECUDA_WAIT_LOG", wlog, NULL };
	uint64_t *truth;
	size_t ntruth;
	struct view v;
	double med, tmed;

	need_driver();
	wl_path("unnecessary_sync", exe, sizeof(exe));
	snprintf(key, sizeof(key), "esc-%d", ++seq);
	snprintf(wlog, sizeof(wlog), "%s/waits-%s", T, key);
	for (int r = 1; r <= 2; r++) {
		snprintf(id, sizeof(id), "%s-run%d", key, r);
		job_start(&MAIN_D, id, key, "--exe", exe);
		unlink(wlog);
		wl_run(exe, ITERS, FAKE, NULL, env, NULL, NULL, NULL);
		job_end(&MAIN_D, id);
	}
	view_load(&v, &MAIN_D, key, 0);
	ASSERT_EQ(v.r.stage, 2);
	expect_count(&v, FFM_EV_API, SITE_US, "cuCtxSynchronize", N_ITERS);
	view_site(&v, FFM_EV_API, SITE_US, "cuCtxSynchronize", &med);
	/* Against the driver's own measure of run 2's waits (see the top of this file): all but
	 * 4 of them are the loop's syncs, so their median is the syncs'. */
	ntruth = read_wait_log(wlog, &truth);
	ASSERT_MSG(ntruth >= N_ITERS, "the driver logged %zu waits", ntruth);
	qsort(truth, ntruth, sizeof(*truth), cmp_u64);
	tmed = truth[ntruth / 2] / 1e3;
	free(truth);
	ASSERT_MSG(med >= 0.7 * 500 - 100 && med <= tmed + 50 && med >= 0.9 * tmed - 300,
		   "stage 2: median wait in the sync %.0f us, the driver's own measure %.0f us", med, tmed);
	ASSERT_MSG(view_site(&v, FFM_EV_LAUNCH, NULL, "cuLaunchKernel", NULL) >= N_ITERS, "stage 2 recorded %zu launches",
		   view_site(&v, FFM_EV_LAUNCH, NULL, "cuLaunchKernel", NULL));
	view_free(&v);
	view_load(&v, &MAIN_D, key, 1);
	ASSERT_EQ(v.r.stage, 1);
	expect_count(&v, FFM_EV_WAIT, SITE_US, "cuCtxSynchronize", N_ITERS);
	view_free(&v);
}

/*
 * A key whose copies repeat (its stage 3 saw duplicates) gets monitoring runs that time the
 * copies besides stage 1's records (stages/ffm_plan.h): the fifth run of dup_transfer, a
 * monitoring run, records the waits the first did, at the same sites, and every copy of the
 * loop, but no launch (the rest of stage 2's probes stay off). System-wide probes (the
 * fallback of older kernels) serve stage >= 2 only: there the run is stage 1 as it was.
 */
TEST(monitoring_run_of_a_key_with_duplicates_times_its_copies)
{
	const char *const args[] = { "--iters", N_ITERS_S, "--in-words", "262144", NULL };
	const char *site = "tests/workloads/dup_transfer.c:35";
	char exe[PATH_MAX], key[64], id[128];
	size_t w1, w5, s1, s5, copies, launches, want;
	char json[1 << 16];
	struct view v;

	need_driver();
	status_json(&MAIN_D, json, sizeof(json));
	want = strstr(json, "\"probe_scope\":\"process\"") ? N_ITERS : 0;
	wl_path("dup_transfer", exe, sizeof(exe));
	snprintf(key, sizeof(key), "dupmon-%d", ++seq);
	for (int r = 1; r <= 5; r++) {
		snprintf(id, sizeof(id), "%s-run%d", key, r);
		job_start(&MAIN_D, id, key, "--exe", exe);
		wl_run(exe, args, FAKE, NULL, NULL, NULL, NULL, NULL);
		job_end(&MAIN_D, id);
	}
	view_load(&v, &MAIN_D, key, 0);
	ASSERT_EQ(v.r.stage, 1);
	w5 = view_site(&v, FFM_EV_WAIT, NULL, NULL, NULL);
	s5 = view_site(&v, FFM_EV_WAIT, site, NULL, NULL);
	copies = view_site(&v, FFM_EV_TRANSFER, site, NULL, NULL);
	launches = view_site(&v, FFM_EV_LAUNCH, NULL, NULL, NULL);
	if ((want ? copies < want : copies) || launches || s5 < N_ITERS)
		view_print_sites(&v);
	view_free(&v);
	view_load(&v, &MAIN_D, key, 1);
	ASSERT_EQ(v.r.stage, 1);
	w1 = view_site(&v, FFM_EV_WAIT, NULL, NULL, NULL);
	s1 = view_site(&v, FFM_EV_WAIT, site, NULL, NULL);
	view_free(&v);
	ASSERT_MSG(want ? copies >= want : !copies, "the monitoring run timed %zu copies at %s (%s probes)",
		   copies, site, want ? "per-process" : "system-wide");
	ASSERT_MSG(!launches, "the monitoring run recorded %zu launches", launches);
	ASSERT_MSG(w5 == w1 && s5 == s1, "waits: %zu (%zu at the copy) in the monitoring run, %zu (%zu) in the first",
		   w5, s5, w1, s1);
}

/* Jobs of @key in @d whose id starts with @prefix and that are no longer running. */
struct prefix_ctx {
	const char *prefix;
	int done, running;
	char last[128];
};

static int on_job_prefix(const struct ffm_store_job_info *j, void *ctx)
{
	struct prefix_ctx *p = ctx;

	if (strncmp(j->job_id, p->prefix, strlen(p->prefix)))
		return 0;
	if (j->state == FFM_JOB_RUNNING)
		p->running++;
	else
		p->done++;
	snprintf(p->last, sizeof(p->last), "%s", j->job_id);
	return 0;
}

static struct prefix_ctx jobs_with_prefix(const struct dmn *d, const char *key, const char *prefix)
{
	struct ffm_store_opts so = { .sz = sizeof(so), .read_only = true };
	struct prefix_ctx p = { .prefix = prefix };
	struct ffm_store *s = NULL;

	if (ffm_store__open_key(d->state, &(struct ffm_store_key){ .key = key }, &so, &s) == 0) {
		ffm_store__for_each_job(s, on_job_prefix, &p);
		ffm_store__free(s);
	}
	return p;
}

/* Poll until @want jobs of @prefix are done (rule jobs end when their process tree exits). */
static struct prefix_ctx wait_jobs_done(const struct dmn *d, const char *key, const char *prefix, int want)
{
	struct prefix_ctx p = {};
	double t0 = mono_s();

	while (mono_s() - t0 < 10) {
		p = jobs_with_prefix(d, key, prefix);
		if (p.done >= want && !p.running)
			break;
		sleep_ms(50);
	}
	return p;
}

static void reload_and_wait(struct dmn *d, const char *conf, const char *needle, bool present)
{
	char json[1 << 16];
	double t0 = mono_s();

	write_conf(d->conf, conf);
	kill(d->pid, SIGHUP);
	for (;;) {
		status_json(d, json, sizeof(json));
		if (!!strstr(json, needle) == present)
			return;
		ASSERT_MSG(mono_s() - t0 < 10, "after SIGHUP, status %s %s: %s", present ? "lacks" : "still has",
			   needle, json);
		sleep_ms(50);
	}
}

/*
 * [rule] sections applied by SIGHUP: every run of a matching executable becomes a job of its
 * own ("<rule>-<pid>-<start>"), ended when the process exits; runs of the rule's key escalate
 * (stage 1, then 2); a rule without key uses ffm_job_key(uid, exe, args). Reloads in the middle
 * of an active job lose none of its waits; a removed rule makes no more jobs.
 */
TEST(config_rules_and_sighup_reload)
{
	char bin1[PATH_MAX], bin2[PATH_MAX], src[PATH_MAX], exe[PATH_MAX], conf[4 * PATH_MAX], key[64];
	char rule_key[64], derived[32], prefix[64], id[64];
	char *argv2[] = { "--iters", N_ITERS_S, NULL };
	struct prefix_ctx p;
	struct view v;
	struct wl run;
	int st;

	need_driver();
	snprintf(bin1, sizeof(bin1), "%s/rule-wl-%d", T, ++seq);
	snprintf(bin2, sizeof(bin2), "%s/rule-wl-derived-%d", T, seq);
	wl_path("unnecessary_sync", src, sizeof(src));
	copy_file(src, bin1, 0755);
	copy_file(src, bin2, 0755);
	snprintf(rule_key, sizeof(rule_key), "rule-key-%d", seq);
	snprintf(conf, sizeof(conf), "[rule nightly]\nexe = %s\nkey = %s\n\n[rule derived]\nexe = %s\n", bin1, rule_key,
		 bin2);
	reload_and_wait(&MAIN_D, conf, "\"rule\":\"derived\"", true);

	for (int r = 1; r <= 2; r++) {
		wl_run(bin1, ITERS, FAKE, NULL, NULL, NULL, NULL, NULL);
		p = wait_jobs_done(&MAIN_D, rule_key, "nightly-", r);
		ASSERT_MSG(p.done == r && !p.running, "rule nightly: %d jobs done, %d running after run %d", p.done,
			   p.running, r);
	}
	view_load(&v, &MAIN_D, rule_key, 0);
	ASSERT_EQ(v.r.stage, 2);
	{
		/* Until ffmd moves the process out of the rule's slot (it reads the exec record,
		 * milliseconds, more on a loaded machine) the process is held at its mmap of the
		 * driver (FFM_JOB_RULE): every loop sync is a stage-2 call, none a stage-1 wait
		 * (before, 6 to 19 of 200 were under load), and none is lost. */
		size_t api = view_site(&v, FFM_EV_API, SITE_US, "cuCtxSynchronize", NULL);
		size_t early = view_site(&v, FFM_EV_WAIT, NULL, "cuCtxSynchronize", NULL);

		printf("# rule job at stage 2: %zu syncs traced as calls at %s, %zu as waits before the move\n", api,
		       SITE_US, early);
		ASSERT_MSG(api == N_ITERS && api + early <= N_ITERS + 1,
			   "%zu calls + %zu early waits, want %d (+1)", api, early, N_ITERS);
	}
	view_free(&v);
	/* Stage-1 runs from here on share the driver file with the stage-2 probes (attached,
	 * or lingering): the kernel's return-probe trampoline then hides the application's
	 * call site from the rbp walk (a known bug, reported), so they are counted by public
	 * function: the loop's syncs and the one after it. */
	view_load(&v, &MAIN_D, rule_key, 1);
	ASSERT_EQ(v.r.stage, 1);
	expect_count(&v, FFM_EV_WAIT, NULL, "cuCtxSynchronize", N_ITERS + 1);
	view_free(&v);

	wl_run(bin2, ITERS, FAKE, NULL, NULL, NULL, NULL, NULL);
	{
		/* A rule's key: uid, and the comm and argument block of the exec it matched. */
		char block[4096], comm[16];
		size_t len = (size_t)snprintf(block, sizeof(block), "%s", bin2) + 1; /* argv[0] */

		for (int i = 0; argv2[i]; i++)
			len += (size_t)snprintf(block + len, sizeof(block) - len, "%s", argv2[i]) + 1;
		snprintf(comm, sizeof(comm), "%s", strrchr(bin2, '/') + 1);
		ffm_job_key_exec(0, comm, ffm_args_block_hash(block, len), derived, sizeof(derived));
	}
	p = wait_jobs_done(&MAIN_D, derived, "derived-", 1);
	ASSERT_MSG(p.done == 1, "rule derived: no job done under key %s (uid 0 + %s + args)", derived, bin2);
	view_load(&v, &MAIN_D, derived, 0);
	expect_count(&v, FFM_EV_WAIT, NULL, "cuCtxSynchronize", N_ITERS + 1);
	view_free(&v);

	/* Reloads while a job runs: none of its waits is lost. */
	{
		const char *const args[] = { "--iters", "300", NULL };
		char conf2[2 * PATH_MAX];

		wl_path("unnecessary_sync", exe, sizeof(exe));
		snprintf(id, sizeof(id), "reload-%d", ++seq);
		snprintf(key, sizeof(key), "%s", id);
		job_start(&MAIN_D, id, key, "--exe", exe);
		wl_prepare(&run, exe, args, FAKE, NULL, NULL);
		wl_go(&run);
		snprintf(conf2, sizeof(conf2), "[rule derived]\nexe = %s\n", bin2);
		for (int i = 0; i < 4; i++) {
			sleep_ms(60);
			write_conf(MAIN_D.conf, i % 2 ? conf : conf2);
			kill(MAIN_D.pid, SIGHUP);
		}
		st = wl_wait(&run);
		ASSERT(WIFEXITED(st) && !WEXITSTATUS(st));
		job_end(&MAIN_D, id);
		view_load(&v, &MAIN_D, key, 0);
		expect_count(&v, FFM_EV_WAIT, NULL, NULL, 300 + 4);
		expect_count(&v, FFM_EV_WAIT, NULL, "cuCtxSynchronize", 300 + 1);
		view_free(&v);

		/* The rule removed: no more jobs of it (the reloads above are let settle first:
		 * a SIGHUP still pending must not re-read a file this one replaced). */
		sleep_ms(300);
		reload_and_wait(&MAIN_D, conf2, "\"rule\":\"nightly\"", false);
		sleep_ms(300);
		reload_and_wait(&MAIN_D, conf2, "\"rule\":\"nightly\"", false);
		wl_run(bin1, ITERS, FAKE, NULL, NULL, NULL, NULL, NULL);
		sleep_ms(300);
		snprintf(prefix, sizeof(prefix), "nightly-");
		p = jobs_with_prefix(&MAIN_D, rule_key, prefix);
		ASSERT_MSG(p.done == 2 && !p.running, "after the rule was removed: %d jobs done, %d running", p.done,
			   p.running);
		reload_and_wait(&MAIN_D, "# no rules\n", "\"rule\":\"derived\"", false);
	}
	ASSERT_MSG(kill(MAIN_D.pid, 0) == 0, "ffmd died");
}

/* Two libcuda files (two copies, two inodes) used at the same time by two processes of a job. */
TEST(two_driver_files_at_once)
{
	char da[PATH_MAX], db[PATH_MAX], exe[PATH_MAX], id[64], json[1 << 16], want[PATH_MAX + 64];
	struct wl a, b;
	struct view v;
	bool guard;
	int st;

	need_driver();
	new_driver_dir("drv-a", da, sizeof(da));
	new_driver_dir("drv-b", db, sizeof(db));
	wl_path("unnecessary_sync", exe, sizeof(exe));
	snprintf(id, sizeof(id), "twodrv-%d", ++seq);
	job_start(&MAIN_D, id, id, "--exe", exe);
	wl_prepare(&a, exe, ITERS, da, NULL, NULL);
	wl_prepare(&b, exe, ITERS, db, NULL, NULL);
	wl_go(&a);
	wl_go(&b);
	st = wl_wait(&a);
	ASSERT(WIFEXITED(st) && !WEXITSTATUS(st));
	st = wl_wait(&b);
	ASSERT(WIFEXITED(st) && !WEXITSTATUS(st));
	status_json(&MAIN_D, json, sizeof(json));
	guard = strstr(json, "\"map_guard\":true") != NULL;
	snprintf(want, sizeof(want), "\"path\":\"%s/libcuda.so.1\",\"usable\":true", da);
	json_has(json, want);
	snprintf(want, sizeof(want), "\"path\":\"%s/libcuda.so.1\",\"usable\":true", db);
	json_has(json, want);
	job_end(&MAIN_D, id);
	view_load(&v, &MAIN_D, id, 0);
	for (int k = 0; k < 2; k++) {
		pid_t p = k ? b.pid : a.pid;
		size_t n = 0;

		for (size_t i = 0; i < v.n; i++)
			n += v.ev[i].e.tgid == (uint32_t)p && v.ev[i].e.kind == FFM_EV_WAIT &&
			     !strcmp(v.ev[i].api, "cuCtxSynchronize");
		/* Both drivers are new and ffmd makes them ready one after the other: the
		 * second process is held at its libcuda mmap by the map guard, else it may
		 * run a few calls before ffmd reads its exec (a known gap without it). */
		ASSERT_MSG(n + (guard ? 0 : 5) >= N_ITERS + 1 && n <= N_ITERS + 1,
			   "process %d (driver %s): %zu cuCtxSynchronize waits, want %d%s", p, k ? db : da, n,
			   N_ITERS + 1, guard ? "" : " (at most 5 fewer)");
		printf("# process %d, driver %s: %zu of %d syncs\n", p, k ? db : da, n, N_ITERS + 1);
	}
	view_free(&v);
}

/*
 * A libcuda ffmd cannot foresee when the process execs (LD_PRELOAD'ed from a directory of its
 * own: ffmd follows the loader's search path, not preloads; dlopen by absolute path is the
 * same): the map guard holds the process at the file's mmap until its probes are in place, so
 * that no call is lost. Without the guard every call would be: only the exec's driver (the
 * build's, known) would be made ready.
 */
TEST(unforeseen_driver_held_at_its_mmap)
{
	char dir[PATH_MAX], lib[PATH_MAX + 16], exe[PATH_MAX], id[64], json[1 << 16], want[PATH_MAX + 64];
	char held[64];
	size_t n = 0;
	struct view v;
	pid_t pid;

	need_driver();
	status_json(&MAIN_D, json, sizeof(json));
	if (!strstr(json, "\"map_guard\":true"))
		SKIP("this kernel gives ffmd no map guard (the mmap syscall tracepoint)");
	new_driver_dir("drv-preload", dir, sizeof(dir));
	snprintf(lib, sizeof(lib), "%s/libcuda.so.1", dir);
	wl_path("unnecessary_sync", exe, sizeof(exe));
	snprintf(id, sizeof(id), "preload-%d", ++seq);
	job_start(&MAIN_D, id, id, "--exe", exe);
	wl_run(exe, ITERS, FAKE, NULL, (const char *const[]){ "LD_PRELOAD", lib, NULL }, &pid, NULL, NULL);
	status_json(&MAIN_D, json, sizeof(json));
	snprintf(want, sizeof(want), "\"path\":\"%s\",\"usable\":true", lib);
	json_has(json, want);
	job_end(&MAIN_D, id);
	snprintf(held, sizeof(held), "process %d maps a libcuda ", pid);
	ASSERT_MSG(log_has(MAIN_D.log, held), "ffmd's log does not say it held process %d at its mmap", pid);
	view_load(&v, &MAIN_D, id, 0);
	for (size_t i = 0; i < v.n; i++)
		n += v.ev[i].e.kind == FFM_EV_WAIT && v.ev[i].e.tgid == (uint32_t)pid;
	ASSERT_MSG(n == N_ITERS + 4, "%zu waits of the workload, want %d", n, N_ITERS + 4);
	expect_count(&v, FFM_EV_WAIT, SITE_US, "cuCtxSynchronize", N_ITERS);
	view_free(&v);
}

/*
 * A launcher that maps libcuda and forks its worker without exec (FFM_WL_FORK=1): the worker's
 * calls are all there. In per-process scope the child does not inherit its parent's probes;
 * ffmd must give it its own before it runs (BPF stops it at the fork).
 */
TEST(forked_child_without_exec_loses_no_call)
{
	const char *const env[] = { "FFM_WL_FORK", "1", NULL };
	char exe[PATH_MAX], id[64];
	size_t child = 0, parent = 0;
	struct view v;
	pid_t pid;

	need_driver();
	wl_path("unnecessary_sync", exe, sizeof(exe));
	snprintf(id, sizeof(id), "fork-%d", ++seq);
	job_start(&MAIN_D, id, id, "--exe", exe);
	wl_run(exe, ITERS, FAKE, NULL, env, &pid, NULL, NULL);
	job_end(&MAIN_D, id);
	view_load(&v, &MAIN_D, id, 0);
	for (size_t i = 0; i < v.n; i++)
		if (v.ev[i].e.kind == FFM_EV_WAIT) {
			parent += v.ev[i].e.tgid == (uint32_t)pid;
			child += v.ev[i].e.tgid != (uint32_t)pid;
		}
	ASSERT_MSG(child == N_ITERS + 4 && parent == 0, "%zu waits of the forked child, %zu of the parent; want %d, 0",
		   child, parent, N_ITERS + 4);
	expect_count(&v, FFM_EV_WAIT, SITE_US, "cuCtxSynchronize", N_ITERS);
	view_free(&v);
}

/* The first byte of the wait function as process @pid sees it (0xcc: a breakpoint there), -1 if
 * it maps no such file. */
static int wait_byte(pid_t pid, const char *lib, uint64_t wait_off)
{
	char path[64], line[PATH_MAX + 256];
	int byte = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (byte < 0 && fgets(line, sizeof(line), f)) {
		unsigned long long lo, hi, off;
		char perms[8], name[PATH_MAX];
		unsigned char b;
		int fd;

		if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %4095s", &lo, &hi, perms, &off, name) != 5 ||
		    strcmp(name, lib) || perms[2] != 'x' || wait_off < off || wait_off >= off + (hi - lo))
			continue;
		snprintf(path, sizeof(path), "/proc/%d/mem", pid);
		fd = open(path, O_RDONLY);
		if (fd >= 0 && pread(fd, &b, 1, (off_t)(lo + wait_off - off)) == 1)
			byte = b;
		if (fd >= 0)
			close(fd);
	}
	fclose(f);
	return byte;
}

static void wait_in_sync(pid_t pid)
{
	double t0;

	/* hang starts its releasing thread right before the sync: main, engine, releaser. */
	for (t0 = mono_s(); nthreads(pid) < 3 && mono_s() - t0 < 10; sleep_ms(10))
		;
	ASSERT_MSG(nthreads(pid) >= 3, "hang (%d, %d threads, state %c) did not reach its sync in 10 s", pid, nthreads(pid), ffm_test_proc_state(pid));
}

/* Whether ffmd's status @json says the bridge is on no driver (or there is none). */
static bool bridge_off(const char *json)
{
	const char *b = strstr(json, "\"bridge\":{"), *e = b ? strchr(b, '}') : NULL, *k;

	if (!b || !e)
		return true;
	k = strstr(b, "\"drivers\":0");
	return k && k < e;
}

/*
 * What a process outside every job pays: in per-process scope nothing, for the kernel plants the
 * wait probe's breakpoint in the job's process only; system-wide, it traps as the job's does.
 * Seen in the processes' memory: the first byte of the wait function. (Per process, once the
 * bridge is off: while a stage-1 job starts processes it is a system-wide wait probe,
 * docs/OVERHEAD.md "The bridge"; it goes 1 s after the job's last young process, whose own
 * probe is then attached.)
 */
TEST(untracked_process_has_no_breakpoint)
{
	const char *const args[] = { "--hold-ms", "8000", NULL };
	const char *const env[] = { "FFM_SCHED", "blocking", NULL };
	char exe[PATH_MAX], id[64], lib[PATH_MAX], json[1 << 16], *p;
	struct wl in, out;
	uint64_t wait_off;
	bool per_process;
	int b_in, b_out;

	need_driver();
	wl_path("hang", exe, sizeof(exe));
	snprintf(id, sizeof(id), "untracked-%d", ++seq);
	snprintf(json, sizeof(json), "%s/libcuda.so.1", FAKE);
	ASSERT(realpath(json, lib));
	wl_prepare(&in, exe, args, FAKE, NULL, env);
	{
		char pidbuf[32];

		snprintf(pidbuf, sizeof(pidbuf), "%d", in.pid);
		job_start(&MAIN_D, id, id, "--pid", pidbuf);
	}
	wl_go(&in);
	wait_in_sync(in.pid);
	for (double t0 = mono_s(); mono_s() - t0 < 5; sleep_ms(50)) {
		status_json(&MAIN_D, json, sizeof(json));
		if (bridge_off(json))
			break;
	}
	ASSERT_MSG(bridge_off(json), "the bridge still on 5 s after the job's process started: %s", json);
	wl_prepare(&out, exe, args, FAKE, NULL, env);
	wl_go(&out);
	wait_in_sync(out.pid);
	status_json(&MAIN_D, json, sizeof(json));
	per_process = strstr(json, "\"probe_scope\":\"process\"") != NULL;
	p = strstr(json, "\"wait_offset\":\"");
	ASSERT_MSG(p, "no wait_offset in ffmd's status: %s", json);
	wait_off = strtoull(p + strlen("\"wait_offset\":\""), NULL, 16);
	b_in = wait_byte(in.pid, lib, wait_off);
	b_out = wait_byte(out.pid, lib, wait_off);
	/* The bridge's link goes through the detacher's queue (tens of ms a detach, behind those
	 * of earlier tests' processes): its breakpoint may stay a while after status says off. */
	for (double t0 = mono_s(); per_process && b_out == 0xcc && mono_s() - t0 < 5; sleep_ms(50))
		b_out = wait_byte(out.pid, lib, wait_off);
	kill(in.pid, SIGKILL);
	kill(out.pid, SIGKILL);
	wl_wait(&in);
	wl_wait(&out);
	job_end(&MAIN_D, id);
	printf("# probe scope %s: wait function's first byte %#x in the job's process, %#x outside\n",
	       per_process ? "process" : "system", b_in, b_out);
	ASSERT_MSG(b_in == 0xcc, "no breakpoint in the job's process (first byte %#x)", b_in);
	if (per_process)
		ASSERT_MSG(b_out >= 0 && b_out != 0xcc, "a breakpoint in a process outside the jobs (%#x)", b_out);
	else
		ASSERT_MSG(b_out == 0xcc, "system-wide probes, yet no breakpoint outside the jobs (%#x)", b_out);
}

/*
 * A job that names ffmd's own process (its pid here; a cgroup it runs in likewise) while a
 * driver is being made ready: ffmd maps that libcuda then, so it would hold itself until the
 * driver is ready, and a stopped ffmd lets nothing go, itself least. It tracks the job's other
 * processes, never itself. (The calibration is made slow so that the driver is still pending
 * when the job starts.)
 */
TEST(job_naming_ffmd_itself_does_not_stop_it)
{
	static struct dmn sh;
	char pidbuf[32], out[4096];
	struct wl run;
	bool was_held;
	char st;
	int rc;

	need_driver();
	was_held = start_held_workload(&sh, "selfhold", &run);
	snprintf(pidbuf, sizeof(pidbuf), "%d", sh.pid);
	rc = CTL(&sh, out, "--timeout", "10", "job", "start", "self", "--pid", pidbuf);
	st = ffm_test_proc_state(sh.pid);
	if (st == 'T')
		kill(sh.pid, SIGCONT); /* so that it can let the workload go and stop */
	wl_wait(&run);
	daemon_stop(&sh, SIGTERM);
	ASSERT_MSG(st != 'T', "ffmd stopped itself (job start: exit %d: %s)", rc, out);
	ASSERT_MSG(was_held, "ffmd never held process %d: no driver was pending", run.pid);
	ASSERT_MSG(rc == 0, "ffmctl job start self --pid %s: exit %d: %s", pidbuf, rc, out);
}

TEST_MAIN()
