/* SPDX-License-Identifier: MIT */
/*
 * ffmctl's verbs. Each verb is a function that takes the arguments after its name
 * (argv[0] is the verb itself, so getopt_long works as usual) and returns the exit code:
 * 0 ok, 1 failure, 2 usage error. Verbs print one specific error on a bad argument, not
 * the whole help. Output that is data has a --json form.
 */
#ifndef FFMCTL_H
#define FFMCTL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "analysis/ffm_analysis.h"

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

struct ffmctl_verb {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary; /* what it does, one line of `ffmctl help` */
};

/* Global options shared by the verbs (set before the verb runs). */
struct ffmctl_globals {
	const char *runtime_dir; /* --runtime-dir or $FFM_RUNTIME_DIR or /run/ffm */
	const char *state_dir;   /* --state-dir or $FFM_STATE_DIR or /var/lib/ffm */
	int timeout_ms;          /* --timeout: how long to wait for ffmd's answer */
	bool verbose;            /* --verbose: libbpf's own messages too (profile) */
	bool json;               /* -j/--json before the verb: the verb's --json (as bpftool) */
};
extern struct ffmctl_globals ffmctl_g;



int ffmctl_profile(int argc, char **argv);
int ffmctl_report(int argc, char **argv);
int ffmctl_diff(int argc, char **argv);
/* How to continue a profile (its key and command): the report's "next" names the command. */
struct ffmctl_next {
	const char *key;
	char *const *cmd; /* NULL-terminated */
};
/* Print the report of a job to @o (shared by report and profile; @next may be NULL); 0 or
 * -errno. */
int ffmctl_report_job(FILE *o, const char *job_id, bool json, const struct ffmctl_next *next);

int ffmctl_calibrate(int argc, char **argv);

/* Verbs that talk to ffmd (cli/job.c, cli/status.c) and read stores (cli/export.c). */
int ffmctl_job(int argc, char **argv);
int ffmctl_status(int argc, char **argv);
int ffmctl_jobs(int argc, char **argv);
int ffmctl_export(int argc, char **argv);

/* A long analysis's progress on stderr (cli/progress.c): shown after a second, where stderr is a
 * terminal. Pass &an as the analysis's opts.progress. */
struct ffmctl_progress {
	struct ffm_an_progress an;
	const char *verb, *job;
	_Atomic unsigned node, nodes;
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	double t0, after_s;
	bool running, stop, shown;
};
void ffmctl_progress__start(struct ffmctl_progress *p, const char *verb, const char *job);
/* The analysis of node @node (0-based) of @nodes begins: its counts start again. */
void ffmctl_progress__node(struct ffmctl_progress *p, size_t node, size_t nodes);
/* Stop, and clear the line shown (if any). */
void ffmctl_progress__stop(struct ffmctl_progress *p);

/* Print "ffmctl VERB: message" to stderr. */
void ffmctl_err(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* getopt_long's error @c (':' a missing argument, else an unknown option; option strings start
 * with ':') said as "ffmctl VERB: ..." with the hint where the options are listed. Returns
 * EXIT_USAGE. */
int ffmctl_opt_err(const char *verb, int c, char **argv);
/* After the options: 0 when one job id is left (argv[optind]), else EXIT_USAGE, said. */
int ffmctl_one_jobid(const char *verb, int argc, char **argv);
/* A verb's options when --json and --help are all it has, then one job id (@jobid) or nothing:
 * -1 to go on, else the exit code (the usage printed for --help, a bad argument said). */
int ffmctl_json_opts(const char *verb, const char *usage, int argc, char **argv, bool *json,
		     bool jobid);
/* "s" after a count other than 1: "1 call", "2 calls". */
static inline const char *ffmctl_s(uint64_t n)
{
	return n == 1 ? "" : "s";
}
/* --top N (1..1000000) into *top: 0, or -EINVAL, said. */
int ffmctl_parse_top(const char *verb, const char *arg, int *top);

#endif
