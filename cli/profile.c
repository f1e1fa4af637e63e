/* SPDX-License-Identifier: MIT */
/*
 * ffmctl profile [--stages A-B | --next] [--key K] [--job-id ID] [--json] -- CMD ARGS...
 *
 * The profile's runs are a job key of their own ("profile-<job id>"), so that its report uses
 * only what it measured; --key K continues key K instead (e.g. --stages 3-4 after a --stages
 * 1-2 profile of the same --key, or runs of ffmd's jobs of that key). --next runs CMD once, at
 * the stage the key's plan gives its next run (stages/ffm_plan.h), as ffmd's next job of the
 * key would: the next stage not done, or once stages 1-4 are, a monitoring run, whose records
 * join the key's pool (the hidden-wait baseline, the copies' prices).
 *
 * Diogenes' own workflow without a daemon: run CMD once per FFM stage with an embedded collector
 * (the daemon's collector library), each run escalating on what the previous ones stored, then
 * print the report. Each stage is a run of the daemon's job API (daemon/jobrun.h: begin, arm,
 * records, disarm, end), the sequence ffmd's jobs go through. Needs root, or CAP_BPF +
 * CAP_PERFMON (BPF programs, uprobe links) and CAP_SYS_ADMIN (calibrating a new driver, and
 * uprobes on kernels without uprobe links): daemon/collector.h, symbols/uprobe_count.h.
 *
 * The command is forked and held before exec until its pid is tracked and the stage's probes
 * are attached, so its first driver call is seen. Its children inherit the job. With --json
 * the command's standard output is sent to standard error: standard output is the report's.
 */
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "analysis/ffm_analysis.h"
#include "cli/ffmctl.h"
#include "common/termsafe.h"
#include "common/util.h"
#include "daemon/apis.h"
#include "daemon/collector.h"
#include "daemon/driver_setup.h"
#include "daemon/jobrun.h"
#include "daemon/memtrace.h"
#include "daemon/probes.h"
#include "daemon/resolve.h"
#include "stages/ffm_plan.h"
#include "store/ffm_store.h"
#include "symbols/ffm_driver.h"
#include "symbols/ffm_stack.h"

#define SLOT 0

static const char *const stage_names[] = {
	[1] = "baseline: waits and which calls synchronize",
	[2] = "detailed tracing: every sync, transfer, alloc, free, memset, launch",
	[3] = "memory tracing and transfer hashing",
	[4] = "sync-use timing",
};

/* What every stage of a profile shares. */
struct profile {
	struct ffm_collector *col;
	struct ffm_jobrun *jr;
	int err;
	char **cmd;
	bool json, quiet;
	/* The program's first exit status other than 0 (128 + signal) and its stage: ffmctl
	 * profile exits with it, as time(1) and nsys profile pass the program's status on. */
	int app_status, app_status_stage;
	char key[128], job_id[64], drv_path[PATH_MAX], exe[PATH_MAX];
	struct ffm_ready_driver rd;
	struct ffm_symbolizer *sym;
	struct ffm_apis *apis;
	int ep;
};

static int on_record(void *ctx, const void *rec, size_t size)
{
	struct profile *p = ctx;
	const struct ffm_rec_hdr *h = rec;
	int err;

	if (!p->jr || h->job != SLOT)
		return 0;
	err = ffm_jobrun__record(p->jr, rec, size);
	if (err < 0 && !p->err)
		p->err = err;
	return 0;
}

static int parse_stages(const char *s, int *from, int *to)
{
	char *end;
	long a = strtol(s, &end, 10), b = a;

	if (end == s)
		return -EINVAL;
	if (*end == '-') {
		const char *q = end + 1;

		b = strtol(q, &end, 10);
		if (end == q)
			return -EINVAL;
	}
	if (*end || a < 1 || b > 4 || a > b)
		return -EINVAL;
	*from = (int)a;
	*to = (int)b;
	return 0;
}

/* Fork CMD held before exec; returns the pid and the fd that releases it. With
 * @stdout_to_stderr the command's standard output goes to our standard error, so that ours
 * carries only the report (--json). */
static pid_t spawn_held(char **argv, int *release_fd, bool stdout_to_stderr)
{
	int pfd[2];
	pid_t pid;

	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		int err = -errno;

		close(pfd[0]);
		close(pfd[1]);
		return err;
	}
	if (pid == 0) {
		char c;

		close(pfd[1]);
		/* Wait until the parent has tracked us and attached the probes. EOF without a
		 * byte means the parent gave up: do not run untraced. */
		if (read(pfd[0], &c, 1) != 1)
			_exit(127);
		if (stdout_to_stderr && dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
			_exit(127);
		execvp(argv[0], argv);
		fprintf(stderr, "ffmctl profile: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(pfd[0]);
	*release_fd = pfd[1];
	return pid;
}

static volatile sig_atomic_t interrupted;
static void on_sigint(int sig)
{
	interrupted = sig;
}

/* The command as the job key sees it: its resolved executable (@exe), as execvp finds it. */
static int resolve_exe(const char *cmd, char *exe, size_t len)
{
	char *path = getenv("PATH"), *dup, *save = NULL;
	char real[PATH_MAX];
	struct stat st = { 0 };

	snprintf(exe, len, "%s", cmd);
	if (!strchr(cmd, '/') && path && (dup = strdup(path))) {
		for (char *d = strtok_r(dup, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
			char cand[PATH_MAX];

			snprintf(cand, sizeof(cand), "%s/%s", d, cmd);
			if (access(cand, X_OK) == 0) {
				snprintf(exe, len, "%s", cand);
				break;
			}
		}
		free(dup);
	}
	if (access(exe, X_OK) < 0) {
		ffmctl_err("profile", "cannot run '%s': %s", cmd, strerror(errno));
		return -1;
	}
	if (stat(exe, &st) < 0 || !S_ISREG(st.st_mode)) {
		ffmctl_err("profile", "cannot run '%s': %s", cmd,
			   S_ISDIR(st.st_mode) ? "it is a directory" : "not a regular file");
		return -1;
	}
	if (realpath(exe, real))
		snprintf(exe, len, "%s", real);
	return 0;
}

/* libbpf's own lines (a failed load says it four times over) only with --verbose: ffmctl's
 * one line says what failed and what to do. */
static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (!ffmctl_g.verbose || level == LIBBPF_DEBUG)
		return 0;
	return vfprintf(stderr, fmt, ap); /* its lines begin with "libbpf: " */
}

/* The collector, the driver the command will load (made ready), the API table, the
 * symbolizer, the epoll set: what every stage uses. */
static int profile_open(struct profile *p)
{
	char why[512] = "";
	int err;

	libbpf_set_print(libbpf_print);
	err = ffm_collector__open(&(struct ffm_collector_opts){ .sz = sizeof(struct ffm_collector_opts),
							       .on_record = on_record, .ctx = p },
				  &p->col);
	if (err < 0) {
		char caps[256];

		if (err == -EPERM || err == -EACCES)
			ffmctl_err("profile", "cannot load the BPF collector: %s: profile %s", strerror(-err),
				   ffm_caps_hint(FFM_COLLECTOR_OPEN_CAPS, UINT64_MAX, caps, sizeof(caps)));
		else
			ffmctl_err("profile", "cannot load the BPF collector: %s (is BPF enabled in this kernel?)",
				   strerror(-err));
		return -1;
	}
	err = ffm_resolve_libcuda(getenv("LD_LIBRARY_PATH"), NULL, NULL, p->drv_path, sizeof(p->drv_path));
	if (err < 0) {
		ffmctl_err("profile", "no libcuda.so.1 found in LD_LIBRARY_PATH, ld.so.cache or "
				      "the usual directories");
		return -1;
	}
	if (!p->quiet)
		fprintf(stderr, "ffm: driver %s\n", p->drv_path);
	err = ffm_driver_ready(p->drv_path, ffmctl_g.state_dir,
			       FFM_READY_RUN_UNTRUSTED | FFM_READY_NODE_MODEL, &p->rd,
			       why, sizeof(why));
	if (err < 0) {
		ffmctl_err("profile", "cannot use driver %s: %s", p->drv_path, why[0] ? why : strerror(-err));
		return -1;
	}
	if (!p->quiet && p->rd.calibrated_now)
		fprintf(stderr, "ffm: calibrated %s: wait function at %#llx, %s (%.1f s, cached)\n",
			ffm_driver__build_id(p->rd.drv), (unsigned long long)p->rd.wait_off,
			p->rd.node_model ? "node model measured" :
					   "no node model (fixes are priced by their waits)",
			p->rd.calib_seconds);
	if ((err = ffm_apis__new(&p->apis)) < 0 ||
	    (err = ffm_symbolizer__new(NULL, &p->sym)) < 0) {
		ffmctl_err("profile", "out of memory");
		return -1;
	}
	p->ep = epoll_create1(EPOLL_CLOEXEC);
	if (p->ep < 0 || epoll_ctl(p->ep, EPOLL_CTL_ADD, ffm_collector__fd(p->col),
				   &(struct epoll_event){ .events = EPOLLIN }) < 0) {
		ffmctl_err("profile", "epoll: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* Run the command held until it is tracked, reading records until it exits; its wait status
 * in @status, its wall time returned (< 0: it could not be started). */
static double run_command(struct profile *p, int *status)
{
	int release = -1, err;
	double t0;
	pid_t pid;

	pid = spawn_held(p->cmd, &release, p->json);
	if (pid < 0) {
		ffmctl_err("profile", "fork: %s", strerror(-pid));
		return -1;
	}
	err = ffm_collector__track_pid(p->col, pid, SLOT);
	t0 = ffm_now_s();
	if (err < 0 || write(release, "g", 1) != 1) {
		ffmctl_err("profile", "cannot track pid %d: %s", pid, strerror(err < 0 ? -err : errno));
		kill(pid, SIGKILL);
	}
	close(release);
	for (;;) {
		struct epoll_event ev;
		pid_t w = waitpid(pid, status, WNOHANG);

		if (w == pid)
			break;
		if (interrupted)
			kill(pid, interrupted);
		epoll_wait(p->ep, &ev, 1, 50);
		ffm_collector__consume(p->col);
	}
	return ffm_now_s() - t0;
}

static void print_stage(struct profile *p, int stage, double wall, int exit_status)
{
	struct ffm_recorder_stats st;
	struct ffm_rec_drops d;
	uint64_t lost = 0;

	ffm_recorder__stats(ffm_jobrun__recorder(p->jr), &st);
	ffm_collector__drops(p->col, SLOT, &d);
	for (int i = 0; i < FFM_REC_DROP__MAX; i++)
		if (i != FFM_REC_DROP_UNMATCHED)
			lost += d.n[i];
	fprintf(stderr, "ffm: stage %d: %.2f s, %" PRIu64 " wait%s, %" PRIu64 " call%s, %" PRIu64
		" stack%s, %" PRIu64 " record%s lost, exit %d\n", stage, wall, st.waits,
		ffmctl_s(st.waits), st.calls, ffmctl_s(st.calls), st.stacks, ffmctl_s(st.stacks), lost,
		ffmctl_s(lost), exit_status);
}

static void print_memtrace(struct profile *p, int stage)
{
	struct ffm_memtrace_stats ms;

	/* After end: it closed the last windows. */
	ffm_memtrace__stats(ffm_jobrun__memtrace(p->jr), &ms);
	fprintf(stderr, "ffm: stage %d: %" PRIu64 " syncs (%" PRIu64 " used, %" PRIu64 " unused, %"
		PRIu64 " partially watched), %" PRIu64 " transfers hashed (%" PRIu64 " same-destination "
		"duplicates, %" PRIu64 " elsewhere, %" PRIu64 " unreadable), %" PRIu64 " watched ranges, "
		"first uses timed less %.1f us of watch latency\n",
		stage, ms.syncs, ms.syncs_used, ms.syncs_none, ms.syncs_partial, ms.xfers, ms.dup_same,
		ms.dup_other, ms.xfers_failed, ms.ranges, (double)ms.use_latency_ns / 1e3);
}

/* The copy of the store that readers on other nodes and the store's owner open. */
static void publish(struct profile *p)
{
	uint32_t uid;
	int err = ffm_store__publish(ffm_store__path(ffm_jobrun__store(p->jr)),
				     ffm_jobrun__root(p->jr), &uid);

	if (err < 0)
		ffmctl_err("profile", "cannot publish the store of job %s for other nodes and its "
			   "owner: %s (root reads it on this node)", p->job_id,
			   err == -ENOTSUP ? "the file system takes no POSIX ACL" : ffm_store__strerror(err));
}

/* The analysis of the job as its report shows it, into the store for SQL (docs/STORE.md). */
static void save_results(struct profile *p)
{
	int err = ffm_analysis__store_job(ffm_jobrun__store(p->jr), p->job_id, FFM_VERSION, NULL);

	if (err < 0)
		ffmctl_err("profile", "cannot store the analysis of job %s: %s (the report is not "
			   "affected)", p->job_id, ffm_store__strerror(err));
}

/* What a stage probes, in words: libcuda's internal wait function (where every synchronization
 * waits, the only probe of stage 1) and the driver functions whose calls are recorded, each with
 * its versioned variants (cuMemcpyHtoD, cuMemcpyHtoD_v2). */
static void print_probes(const struct ffm_probe_set *ps, int stage, int to, bool monitor)
{
	size_t wait = 0, points = 0;

	for (size_t i = 0; i < ps->n; i++) {
		size_t k = 0;

		wait += ps->p[i].wait;
		/* a transfer's hashing twin (stage 3) is a second probe on the same entry point */
		while (k < i && (ps->p[k].wait || ps->p[k].offset != ps->p[i].offset))
			k++;
		points += !ps->p[i].wait && k == i;
	}
	fprintf(stderr, "ffm: stage %d of %d (%s%s): probes on %s", stage, to, stage_names[stage],
		monitor ? "; monitoring" : "", wait ? "libcuda's internal wait function" : "");
	if (ps->napis)
		fprintf(stderr, "%s%u driver function%s (%zu entry point%s with their versioned "
			"variants)", wait ? " and " : "", ps->napis, ffmctl_s(ps->napis), points,
			ffmctl_s(points));
	else if (wait)
		fprintf(stderr, " only: it sees every wait, not the calls");
	fputc('\n', stderr);
}

/*
 * One stage: a run of the job (daemon/jobrun.h: the key's plan picks the probes), the stage's
 * probes attached to the driver, the command run once, the run ended. 0, or -1 (said).
 */
static int profile_stage(struct profile *p, int stage, int to)
{
	/* stage 0 (--next): the key's plan picks it, and this run is the last */
	bool last = stage == to;
	struct ffm_jobrun_opts jo = {
		.sz = sizeof(jo), .state_dir = ffmctl_g.state_dir, .key = p->key, .job_id = p->job_id,
		.uid = getuid(), .exe = p->exe, .args_hash = ffm_args_hash(p->cmd + 1),
		.override_stage = stage, .slot = SLOT, .collector = p->col, .sym = p->sym,
		.apis = p->apis, .driver_path = p->drv_path,
		.driver_build_id = ffm_driver__build_id(p->rd.drv),
		.wait_off = p->rd.wait_off, .wait_size = p->rd.wait_size,
		.driver_node_model = p->rd.node_model,
	};
	struct ffm_probe_set ps = {};
	struct ffm_attachment *att = NULL;
	const char *const *names;
	size_t nnames;
	int status = 0, err;
	double wall;

	err = ffm_jobrun__begin(&jo, &p->jr);
	if (err < 0) {
		ffmctl_err("profile", "cannot open the store of key %s under %s: %s", p->key,
			   ffmctl_g.state_dir, strerror(-err));
		return -1;
	}
	if (!stage) {
		stage = (int)ffm_jobrun__plan(p->jr)->stage;
		to = stage;
	}
	names = ffm_jobrun__sync_names(p->jr, &nnames);
	err = ffm_probe_set__build(&ps, p->rd.drv, p->apis, ffm_jobrun__plan(p->jr)->probes,
				   p->rd.wait_off, names, nnames);
	if (!err)
		err = ffm_collector__attach(p->col, p->drv_path, -1, ps.p, ps.n, &att);
	if (err < 0) {
		char caps[256] = "", hint[200];

		if (err == -EPERM || err == -EACCES)
			snprintf(caps, sizeof(caps), " (attaching uprobes in %s mode %s)",
				 ffm_collector__probe_mode(p->col),
				 ffm_caps_hint(ffm_collector__attach_caps(p->col), UINT64_MAX, hint,
					       sizeof(hint)));
		ffmctl_err("profile", "failed to attach uprobes to %s: %s%s", p->drv_path, strerror(-err),
			   caps);
		ffm_probe_set__release(&ps);
		ffm_jobrun__end(p->jr, 0, 0, true, false); /* the job: fail_job */
		return -1;
	}
	ffm_jobrun__arm(p->jr);
	if (!p->quiet)
		print_probes(&ps, stage, to, ffm_jobrun__plan(p->jr)->reason == FFM_PLAN_MONITOR);

	wall = run_command(p, &status);
	if (wall < 0) {
		ffm_attachment__free(att);
		ffm_probe_set__release(&ps);
		return -1;
	}
	/* Records submitted just before the exit may still be in flight. */
	ffm_collector__consume(p->col);
	ffm_attachment__free(att);
	ffm_collector__consume(p->col);
	ffm_probe_set__release(&ps);
	ffm_jobrun__disarm(p->jr);

	/* The program's exit status as a shell has it: 128 + signal when killed. */
	status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	if (!p->quiet)
		print_stage(p, stage, wall, status);
	if (!p->app_status && status) {
		p->app_status = status;
		p->app_status_stage = stage;
	}
	err = ffm_jobrun__end(p->jr, wall, status, interrupted != 0 || p->err != 0,
			      last || interrupted);
	if (!p->quiet && ffm_jobrun__memtrace(p->jr))
		print_memtrace(p, stage);
	if (p->err)
		ffmctl_err("profile", "writing the store failed: %s", strerror(-p->err));
	if (last && err >= 0 && !p->err)
		save_results(p);
	/* the copy after the analysis is in the store */
	if (err >= 0 && !p->err && (last || interrupted))
		publish(p);
	if (err < 0 || p->err) {
		ffmctl_err("profile", "cannot finish the run: %s", strerror(-(err < 0 ? err : p->err)));
		return -1; /* the job: fail_job */
	}
	p->jr = ffm_jobrun__free(p->jr);
	return 0;
}

/* A stage that failed leaves its run ended and the job open: the job ends as failed, never
 * "running" for ever in ffmctl jobs. */
static void fail_job(struct profile *p)
{
	struct ffm_store *s;
	int err;

	if (!p->jr)
		return;
	s = ffm_jobrun__store(p->jr);
	err = ffm_store__job_end(s, p->job_id, FFM_JOB_FAILED, time(NULL));
	if (!err)
		err = ffm_store__flush(s);
	if (err < 0)
		ffmctl_err("profile", "cannot mark job %s failed: %s", p->job_id,
			   ffm_store__strerror(err));
	else
		fprintf(stderr, "ffm: job %s ended as failed\n", p->job_id);
	p->jr = ffm_jobrun__free(p->jr);
}

static void profile_close(struct profile *p)
{
	if (p->ep >= 0)
		close(p->ep);
	ffm_jobrun__free(p->jr);
	ffm_ready_driver__release(&p->rd);
	ffm_symbolizer__free(p->sym);
	ffm_apis__free(p->apis);
	ffm_collector__free(p->col);
}

/* The report of @job_id on stdout, or into @path (-o, as nsys profile -o: created or truncated);
 * its "next" names the command that continues the profile (@nx). */
static int report_to(const char *path, const char *job_id, bool json, const struct ffmctl_next *nx)
{
	FILE *f = stdout;
	int fd = -1, ret;

	/* escaped as standard output is (common/termsafe.h): the file is read on a terminal */
	if (path && ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0 ||
		     !(f = ffm_termsafe_stream(fd, _IOFBF)))) {
		ffmctl_err("profile", "cannot write the report to %s: %s (the data is in job %s)", path,
			   strerror(errno), job_id);
		if (fd >= 0)
			close(fd);
		return EXIT_FAIL;
	}
	ret = ffmctl_report_job(f, job_id, json, nx) == 0 ? EXIT_OK : EXIT_FAIL;
	if (path) {
		bool ok = fclose(f) == 0;

		if (close(fd) == 0 && ok && ret == EXIT_OK)
			fprintf(stderr, "ffm: report of job %s written to %s\n", job_id, path);
		else if (ret == EXIT_OK) {
			ffmctl_err("profile", "cannot write the report to %s: %s (the data is in job %s)",
				   path, strerror(errno), job_id);
			ret = EXIT_FAIL;
		}
	}
	return ret;
}

static const char PROFILE_HELP[] =
	"Usage: ffmctl profile [--stages A-B | --next] [--key K] [--job-id ID] [--json] [--quiet] "
	"[-o FILE] -- CMD [ARGS...]\n"
	"\n"
	"Run CMD once per stage with no daemon, each stage measuring in more detail what the\n"
	"ones before found, then print the report. Needs root, or CAP_BPF and CAP_PERFMON.\n"
	"\n"
	"Options:\n"
	"  --stages A-B      the stages to run, N or A-B within 1-4 (default 1-4): 1 finds the\n"
	"                    calls that wait, 2 times every sync and transfer, 3 watches the\n"
	"                    data the syncs protect, 4 times its first use\n"
	"  --next            run CMD once, at the stage the plan of the key named by --key\n"
	"                    gives its next run (as ffmd would for the next job of the key)\n"
	"  --key K           continue job key K, whose earlier runs the stages build on\n"
	"                    (default: a key of this profile's own, profile-JOBID); the\n"
	"                    report's next: line names the command that continues it\n"
	"  --job-id ID       the job's id (default: a new one, printed at the end)\n"
	"  -j, --json        the report as JSON; CMD's standard output goes to standard error\n"
	"  -q, --quiet       no progress messages\n"
	"  -o, --output FILE\n"
	"                    write the report to FILE instead of standard output\n";

/* What the command line asked for, besides what struct profile holds (json, quiet, the
 * command). */
struct profile_args {
	int from, to;		/* the stages; 0-0 with --next: the key's plan says */
	bool stages, next;	/* --stages, --next given */
	const char *key, *job, *out;
};

/* Reads the options into @a and @p and checks them together: -1 to go on, else the exit code to
 * return (help, usage). */
static int parse_args(int argc, char **argv, struct profile_args *a, struct profile *p)
{
	static const struct option opts[] = {
		{ "stages", required_argument, NULL, 's' },
		{ "next", no_argument, NULL, 'n' },
		{ "key", required_argument, NULL, 'k' },
		{ "job-id", required_argument, NULL, 'i' },
		{ "json", no_argument, NULL, 'j' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	int c;

	while ((c = getopt_long(argc, argv, "+:s:k:i:jqo:h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (parse_stages(optarg, &a->from, &a->to) < 0) {
				ffmctl_err("profile", "--stages wants N or A-B within 1-4, not '%s'", optarg);
				return EXIT_USAGE;
			}
			a->stages = true;
			break;
		case 'n':
			a->next = true;
			break;
		case 'k':
			a->key = optarg;
			break;
		case 'i':
			a->job = optarg;
			break;
		case 'j':
			p->json = true;
			break;
		case 'q':
			p->quiet = true;
			break;
		case 'o':
			a->out = optarg;
			break;
		case 'h':
			fputs(PROFILE_HELP, stdout);
			return EXIT_OK;
		default:
			return ffmctl_opt_err("profile", c, argv);
		}
	}
	if (optind >= argc) {
		ffmctl_err("profile", "no command given (ffmctl profile -- CMD ARGS...)");
		return EXIT_USAGE;
	}
	p->cmd = argv + optind;
	if (a->key && !*a->key) {
		ffmctl_err("profile", "--key must not be empty");
		return EXIT_USAGE;
	}
	if (a->next && a->stages) {
		ffmctl_err("profile", "--next and --stages exclude each other");
		return EXIT_USAGE;
	}
	if (a->next && !a->key) {
		ffmctl_err("profile", "--next continues a key: name it with --key");
		return EXIT_USAGE;
	}
	if (a->next)
		a->from = a->to = 0;
	return -1;
}

/* The job's id (--job-id, or a new one) and its key into @p. */
static void name_job(struct profile *p, const struct profile_args *a)
{
	if (a->job)
		snprintf(p->job_id, sizeof(p->job_id), "%s", a->job);
	else
		snprintf(p->job_id, sizeof(p->job_id), "p%ld-%d", (long)time(NULL), (int)getpid());
	/* A profile is a key of its own unless --key names one to continue: under the command
	 * line's key, a --stages 1-2 profile took stages 3 and 4 from an earlier profile's runs. */
	if (a->key)
		snprintf(p->key, sizeof(p->key), "%s", a->key);
	else
		snprintf(p->key, sizeof(p->key), "profile-%s", p->job_id);
}

int ffmctl_profile(int argc, char **argv)
{
	struct profile_args a = { .from = 1, .to = 4 };
	struct sigaction sa = { .sa_handler = on_sigint };
	struct profile p = { .ep = -1, .json = ffmctl_g.json };
	int ret;

	ret = parse_args(argc, argv, &a, &p);
	if (ret >= 0)
		return ret;
	if (resolve_exe(p.cmd[0], p.exe, sizeof(p.exe)) < 0)
		return EXIT_FAIL;
	name_job(&p, &a);
	ret = EXIT_FAIL;
	if (profile_open(&p) < 0)
		goto out;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	for (int stage = a.from; stage <= a.to && !interrupted; stage++)
		if (profile_stage(&p, stage, a.to) < 0)
			goto out;
	if (interrupted) {
		ffmctl_err("profile", "interrupted; what was recorded is in job %s", p.job_id);
		goto out;
	}
	ret = report_to(a.out, p.job_id, p.json, &(struct ffmctl_next){ p.key, p.cmd });
	if (!p.json && !a.out)
		printf("\njob id: %s (ffmctl report %s)\n", p.job_id, p.job_id);
	if (ret == EXIT_OK && p.app_status) {
		ffmctl_err("profile", "%s exited with status %d (stage %d): ffmctl exits with it", p.cmd[0],
			   p.app_status, p.app_status_stage);
		ret = p.app_status;
	}
out:
	fail_job(&p);
	profile_close(&p);
	return ret;
}
