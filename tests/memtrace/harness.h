/* SPDX-License-Identifier: MIT */
/*
 * Runs of a command at a given FFM stage with an embedded collector, as `ffmctl profile` does,
 * but with the probes attached once for many runs: attaching is cheap, detaching a uprobe costs
 * ~0.1 s of kernel time each and is serialized in the kernel (41 probes: 10 s), which would make
 * a test of 8 workloads x 2 stages last minutes. Header-only: used by test_stages34.c and
 * bench_stages.c.
 *
 * The probe set is what the stage would probe after a stage-1 run that found the workloads'
 * synchronizing functions (h_sync_names).
 */
#ifndef FFM_TEST_MEMTRACE_HARNESS_H
#define FFM_TEST_MEMTRACE_HARNESS_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon/apis.h"
#include "daemon/collector.h"
#include "daemon/driver_setup.h"
#include "daemon/jobrun.h"
#include "daemon/memtrace.h"
#include "daemon/probes.h"
#include "stages/ffm_plan.h"
#include "store/ffm_store.h"
#include "symbols/ffm_driver.h"
#include "symbols/ffm_stack.h"

#define H_SLOT 0

/* What stage 1 finds waiting in the workloads (tests/workloads/README.md). */
static const char *const h_sync_names[] = {
	"cuCtxSynchronize", "cuMemFree", "cuMemFreeHost", "cuMemcpyDtoH", "cuMemcpyHtoD",
	"cuMemcpyDtoHAsync", "cuMemsetD32", "cuDevicePrimaryCtxRelease",
};

struct h_env {
	char state[PATH_MAX];
	char drv[PATH_MAX];
	const char *build;
	struct ffm_collector *col;
	struct ffm_ready_driver rd;
	struct ffm_apis *apis;
	struct ffm_symbolizer *sym;
	struct ffm_attachment *att;
	struct ffm_jobrun *jr;
	int ep;
	int err;
};

static int h_on_record(void *ctx, const void *rec, size_t size)
{
	struct h_env *e = ctx;
	const struct ffm_rec_hdr *h = rec;
	int err;

	if (!e->jr || h->job != H_SLOT)
		return 0;
	err = ffm_jobrun__record(e->jr, rec, size);
	if (err < 0 && !e->err)
		e->err = err;
	return 0;
}

static double h_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* 0, or -errno with a reason in why (the caller decides whether that is a skip). */
static int h_setup(struct h_env *e, char *why, size_t len)
{
	int err;

	memset(e, 0, sizeof(*e));
	e->ep = -1;
	e->build = getenv("FFM_BUILD") ? getenv("FFM_BUILD") : "build";
	snprintf(e->state, sizeof(e->state), "/tmp/ffm-test-memtrace-XXXXXX");
	if (!mkdtemp(e->state)) {
		snprintf(why, len, "mkdtemp: %s", strerror(errno));
		return -errno;
	}
	snprintf(e->drv, sizeof(e->drv), "%s/fakecuda/libcuda.so.1", e->build);
	if (!getenv("FFM_CALIB_PROG")) {
		char prog[PATH_MAX];

		snprintf(prog, sizeof(prog), "%s/ffm-calib-probe", e->build);
		setenv("FFM_CALIB_PROG", prog, 0);
	}
	err = ffm_collector__open(&(struct ffm_collector_opts){ .sz = sizeof(struct ffm_collector_opts),
								.on_record = h_on_record, .ctx = e },
				  &e->col);
	if (err < 0) {
		snprintf(why, len, "cannot load the collector: %s", strerror(-err));
		return err;
	}
	if (!ffm_collector__has_memtrace(e->col)) {
		snprintf(why, len, "this kernel does not load the stage 3-4 BPF programs");
		return -EOPNOTSUPP;
	}
	err = ffm_driver_ready(e->drv, e->state, 0, &e->rd, why, len);
	if (err < 0)
		return err;
	if ((err = ffm_apis__new(&e->apis)) < 0 || (err = ffm_symbolizer__new(NULL, &e->sym)) < 0) {
		snprintf(why, len, "out of memory");
		return err;
	}
	e->ep = epoll_create1(EPOLL_CLOEXEC);
	if (e->ep < 0 || epoll_ctl(e->ep, EPOLL_CTL_ADD, ffm_collector__fd(e->col),
				   &(struct epoll_event){ .events = EPOLLIN }) < 0) {
		snprintf(why, len, "epoll: %s", strerror(errno));
		return -errno;
	}
	return 0;
}

/* Attach (replacing what was attached) the probes of @stage. */
static int h_attach(struct h_env *e, int stage)
{
	struct ffm_probe_set ps;
	int err;

	e->att = ffm_attachment__free(e->att);
	err = ffm_probe_set__build(&ps, e->rd.drv, e->apis, ffm_plan__probes(stage), e->rd.wait_off,
				   h_sync_names, sizeof(h_sync_names) / sizeof(h_sync_names[0]));
	if (err < 0)
		return err;
	err = ffm_collector__attach(e->col, e->drv, -1, ps.p, ps.n, &e->att);
	ffm_probe_set__release(&ps);
	return err;
}

struct h_result {
	double wall;
	int status;
	int64_t run;
	struct ffm_memtrace_stats ms;
	char out[4096]; /* the command's stdout (its first 4 KiB) */
};

/*
 * Run argv once. stage 0: no job (a plain run; attach nothing first for a clean baseline);
 * else a run of key @key forced to @stage. The store of the key stays readable under e->state.
 */
static int h_run(struct h_env *e, const char *key, int stage, char *const argv[], struct h_result *res)
{
	int gate[2], outp[2], status = 0, err = 0;
	char libpath[PATH_MAX];
	struct ffm_job_cfg cfg = {};
	size_t got = 0;
	double t0;
	pid_t pid;

	memset(res, 0, sizeof(*res));
	if (stage) {
		struct ffm_jobrun_opts jo = {
			.sz = sizeof(jo), .state_dir = e->state, .key = key, .job_id = key,
			.uid = getuid(), .exe = argv[0], .override_stage = stage, .slot = H_SLOT,
			.collector = e->col, .sym = e->sym, .apis = e->apis, .driver_path = e->drv,
			.driver_build_id = ffm_driver__build_id(e->rd.drv),
			.wait_off = e->rd.wait_off, .wait_size = e->rd.wait_size,
		};

		err = ffm_jobrun__begin(&jo, &e->jr);
		if (err < 0)
			return err;
		cfg.stage = stage;
		cfg.flags = ffm_jobrun__job_flags(e->jr);
		ffm_collector__set_job(e->col, H_SLOT, &cfg);
		ffm_collector__clear_drops(e->col, H_SLOT);
	}
	if (pipe2(gate, O_CLOEXEC) < 0 || pipe2(outp, O_CLOEXEC) < 0)
		return -errno;
	snprintf(libpath, sizeof(libpath), "%s/fakecuda", e->build);
	pid = fork();
	if (pid == 0) {
		char c;

		dup2(outp[1], 1);
		if (read(gate[0], &c, 1) != 1)
			_exit(127);
		setenv("LD_LIBRARY_PATH", libpath, 1);
		execv(argv[0], argv);
		_exit(127);
	}
	close(gate[0]);
	close(outp[1]);
	if (stage)
		ffm_collector__track_pid(e->col, pid, H_SLOT);
	t0 = h_now();
	if (write(gate[1], "g", 1) != 1)
		kill(pid, SIGKILL);
	close(gate[1]);
	fcntl(outp[0], F_SETFL, O_NONBLOCK);
	for (;;) {
		struct epoll_event ev;
		ssize_t n;

		if (waitpid(pid, &status, WNOHANG) == pid)
			break;
		epoll_wait(e->ep, &ev, 1, stage ? 20 : 5);
		ffm_collector__consume(e->col);
		while (got < sizeof(res->out) - 1 &&
		       (n = read(outp[0], res->out + got, sizeof(res->out) - 1 - got)) > 0)
			got += n;
	}
	res->wall = h_now() - t0;
	while (got < sizeof(res->out) - 1) {
		ssize_t n = read(outp[0], res->out + got, sizeof(res->out) - 1 - got);

		if (n <= 0)
			break;
		got += n;
	}
	close(outp[0]);
	res->status = status;
	if (!stage)
		return 0;
	ffm_collector__consume(e->col);
	cfg.flags = 0;
	ffm_collector__set_job(e->col, H_SLOT, &cfg);
	res->run = ffm_jobrun__run_id(e->jr);
	err = ffm_jobrun__end(e->jr, res->wall, WIFEXITED(status) ? WEXITSTATUS(status) : 128, false,
			      true);
	if (ffm_jobrun__memtrace(e->jr))
		ffm_memtrace__stats(ffm_jobrun__memtrace(e->jr), &res->ms);
	e->jr = ffm_jobrun__free(e->jr);
	if (!err && e->err)
		err = e->err;
	e->err = 0;
	return err;
}

/* The value after "NAME " in a command's output (LOOP_S, WALL_S), or -1. */
static inline double h_out_value(const struct h_result *r, const char *name)
{
	const char *p = strstr(r->out, name);

	return p ? atof(p + strlen(name) + 1) : -1;
}

static void h_teardown(struct h_env *e)
{
	char cmd[PATH_MAX + 16];

	e->att = ffm_attachment__free(e->att);
	ffm_jobrun__free(e->jr);
	if (e->ep >= 0)
		close(e->ep);
	ffm_ready_driver__release(&e->rd);
	ffm_symbolizer__free(e->sym);
	ffm_apis__free(e->apis);
	ffm_collector__free(e->col);
	if (e->state[0] && !getenv("FFM_TEST_KEEP")) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", e->state);
		if (system(cmd) != 0)
			fprintf(stderr, "cannot remove %s\n", e->state);
	}
}

#endif
