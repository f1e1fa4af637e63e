/* SPDX-License-Identifier: MIT */
/*
 * ffmctl job start <jobid> [--key K] [--stage N] [--user UID] [--json]
 *                          (--cgroup PATH | --pid PID | --uid UID | --exe PATH)...
 * ffmctl job end <jobid> [--json]
 *
 * Tell ffmd that a scheduler job begins or ends on this node (the prolog/epilog's calls). ffmd
 * decides from the caller's SO_PEERCRED whether it may: root or members of the configured
 * admin group. Selectors say which processes belong to the job; each may repeat. Paths are
 * made absolute here, since ffmd resolves them in its own working directory.
 *
 * --user UID names the job's owner (who may see it in `ffmctl status`); without it ffmd takes
 * the uid of a --uid selector or of a --pid process.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/client.h"
#include "cli/ffmctl.h"
#include "common/ffm_json.h"

#define JOB_START_USAGE                                                                            \
	"Usage: ffmctl job start <jobid> [--key K] [--stage 1..4] [--user UID] [--json]\n"         \
	"                        (--cgroup PATH | --pid PID | --uid UID | --exe PATH)...\n"
#define JOB_END_USAGE "Usage: ffmctl job end <jobid> [--wait SEC] [--json]\n"
#define JOB_HELP \
	"\n" \
	"Tell ffmd that a scheduler job begins or ends on this node (a prolog's and an " \
	"epilog's\n" \
	"call); root and ffmd's admin_group may. The selectors say which processes are the " \
	"job's;\n" \
	"each may repeat, at least one is needed.\n" \
	"\n" \
	"Options of start:\n" \
	"  --key K         the job key whose runs go through the stages (default: the job id)\n" \
	"  --stage 1..4    run this stage instead of the key's next one\n" \
	"  --user UID      the job's owner, who may read it (default: the uid of --uid, else\n" \
	"                  the owner of a --pid process when root starts the job, else the\n" \
	"                  caller)\n" \
	"  --cgroup PATH   selector: the processes in this cgroup (v2) and below it\n" \
	"  --pid PID       selector: this process and those it starts\n" \
	"  --uid UID       selector: the processes of this user that start a program from now\n" \
	"                  on\n" \
	"  --exe PATH      selector: the processes that execute this file\n" \
	"  -j, --json      ffmd's answer as JSON (start and end)\n" \
	"\n" \
	"Options of end:\n" \
	"  --wait SEC      wait this long at most for the job's report to be in place for its\n" \
	"                  owner (its analysis stored and copied; default: three quarters of\n" \
	"                  --timeout; 0: do not wait); after that, end says the report is being\n" \
	"                  written, and the owner's ffmctl report waits for it\n"

/* A decimal id (uid or pid) in min..max; the text itself is sent, so "007" is refused. */
static int check_id(const char *s, unsigned long min, unsigned long max)
{
	char *end;
	unsigned long v;

	if (!*s || *s == '-' || *s == '+' || (s[0] == '0' && s[1]))
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	return errno || *end || v < min || v > max ? -EINVAL : 0;
}

/* The options whose value is an id: --user (the owner, not a selector), --uid, --pid. */
struct id_opt {
	int opt;
	const char *flag, *arg, *what;
	unsigned long min, max;
	int selector;
};

static const struct id_opt *id_opt(int c)
{
	static const struct id_opt ids[] = {
		{ 'U', "user", "owner", "a numeric uid", 0, 4294967294ul, 0 },
		{ 'u', "uid", "uid", "a numeric uid", 0, 4294967294ul, 1 },
		{ 'p', "pid", "pid", "a positive number", 1, 2147483647ul, 1 },
	};

	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
		if (ids[i].opt == c)
			return &ids[i];
	return &ids[0];
}

/* Send the request and print ffmd's answer; the body is JSON with "job", "key", "stage". */
static int call_and_print(const char *verb, enum ffm_verb v, const struct ffm_proto_arg *args,
			  size_t nargs, bool json)
{
	struct ffm_reply *rep = ffmctl_call(verb, v, args, nargs);
	json_t *body = NULL;

	if (!rep)
		return EXIT_FAIL;
	if (json) {
		fputs(rep->body, stdout);
	} else if ((body = ffm_json_parse(rep->body, rep->body_len, NULL))) {
		const char *id = ffm_json_get_str(body, "job", "?");
		const char *key = ffm_json_get_str(body, "key", "?");
		int stage = (int)ffm_json_get_num(body, "stage", 0);

		if (v == FFM_VERB_JOB_START)
			printf("job %s started: key %s, stage %d, run %.0f\n", id, key, stage,
			       ffm_json_get_num(body, "run", 0));
		else if (ffm_json_get_bool(body, "published", true))
			printf("job %s ended: key %s, stage %d (see: ffmctl report %s)\n", id, key,
			       stage, id);
		else
			printf("job %s ended: key %s, stage %d; its report is being written (ffmctl "
			       "report %s waits for it)\n", id, key, stage, id);
	} else {
		/* An answer without the expected body is still ffmd's "ok". */
		printf("%s\n", rep->message);
	}
	json_decref(body);
	ffm_reply__free(rep);
	return EXIT_OK;
}

static int job_start(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "key", required_argument, NULL, 'k' },
		{ "stage", required_argument, NULL, 'S' },
		{ "user", required_argument, NULL, 'U' },
		{ "cgroup", required_argument, NULL, 'c' },
		{ "pid", required_argument, NULL, 'p' },
		{ "uid", required_argument, NULL, 'u' },
		{ "exe", required_argument, NULL, 'e' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	/* Resolved paths must outlive the argument array. */
	static char paths[FFM_PROTO_MAX_ARGS][PATH_MAX];
	struct ffm_proto_arg args[FFM_PROTO_MAX_ARGS];
	size_t nargs = 1, nsel = 0, npaths = 0;
	bool json = ffmctl_g.json;
	int c;

#define ADD(n, v)                                                                                  \
	do {                                                                                       \
		if (nargs == FFM_PROTO_MAX_ARGS) {                                                 \
			ffmctl_err("job start", "too many options (at most %d)",                   \
				   FFM_PROTO_MAX_ARGS - 1);                                        \
			return EXIT_USAGE;                                                         \
		}                                                                                  \
		snprintf(args[nargs].name, sizeof(args[nargs].name), "%s", n);                     \
		args[nargs++].value = (v);                                                         \
	} while (0)

	while ((c = getopt_long(argc, argv, ":k:S:U:c:p:u:e:jh", opts, NULL)) != -1) {
		switch (c) {
		case 'k':
			if (!*optarg) {
				ffmctl_err("job start", "--key must not be empty");
				return EXIT_USAGE;
			}
			ADD("key", optarg);
			break;
		case 'S':
			if (strlen(optarg) != 1 || optarg[0] < '1' || optarg[0] > '4') {
				ffmctl_err("job start", "--stage must be 1, 2, 3 or 4, not '%s'", optarg);
				return EXIT_USAGE;
			}
			ADD("stage", optarg);
			break;
		case 'U':
		case 'u':
		case 'p': {
			const struct id_opt *o = id_opt(c);

			if (check_id(optarg, o->min, o->max) < 0) {
				ffmctl_err("job start", "--%s must be %s, not '%s'", o->flag, o->what, optarg);
				return EXIT_USAGE;
			}
			ADD(o->arg, optarg);
			nsel += o->selector;
			break;
		}
		case 'c':
		case 'e':
			if (npaths == FFM_PROTO_MAX_ARGS || !realpath(optarg, paths[npaths])) {
				ffmctl_err("job start", "--%s %s: %s", c == 'c' ? "cgroup" : "exe", optarg,
					   strerror(errno ? errno : ENOSPC));
				return EXIT_USAGE;
			}
			ADD(c == 'c' ? "cgroup" : "exe", paths[npaths]);
			npaths++;
			nsel++;
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			fputs(JOB_START_USAGE JOB_HELP, stdout);
			return EXIT_OK;
		default:
			return ffmctl_opt_err("job start", c, argv);
		}
	}
#undef ADD
	if (ffmctl_one_jobid("job start", argc, argv))
		return EXIT_USAGE;
	if (!nsel) {
		ffmctl_err("job start", "no selector: give at least one of --cgroup, --pid, --uid, --exe");
		return EXIT_USAGE;
	}
	snprintf(args[0].name, sizeof(args[0].name), "job");
	args[0].value = argv[optind];
	return call_and_print("job start", FFM_VERB_JOB_START, args, nargs, json);
}

static int job_end(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "wait", required_argument, NULL, 'w' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	struct ffm_proto_arg args[2] = { { .name = "job" }, { .name = "wait_ms" } };
	/* By default within our own timeout, with a quarter of it left for the answer. */
	long wait_ms = ffmctl_g.timeout_ms / 4 * 3;
	bool json = ffmctl_g.json;
	char wait[24], *end;
	double w;
	int c, r;

	while ((c = getopt_long(argc, argv, ":w:jh", opts, NULL)) != -1) {
		switch (c) {
		case 'w':
			w = strtod(optarg, &end);
			if (end == optarg || *end || !(w >= 0 && w <= 3600)) {
				ffmctl_err("job end", "--wait wants seconds in [0, 3600], not '%s'", optarg);
				return EXIT_USAGE;
			}
			wait_ms = (long)(w * 1000);
			/* the answer comes within the wait: our timeout covers it */
			if (wait_ms + 2000 > ffmctl_g.timeout_ms)
				ffmctl_g.timeout_ms = (int)wait_ms + 2000;
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			fputs(JOB_END_USAGE JOB_HELP, stdout);
			return EXIT_OK;
		default:
			return ffmctl_opt_err("job end", c, argv);
		}
	}
	if ((r = ffmctl_one_jobid("job end", argc, argv)))
		return r;
	args[0].value = argv[optind];
	snprintf(wait, sizeof(wait), "%ld", wait_ms);
	args[1].value = wait;
	return call_and_print("job end", FFM_VERB_JOB_END, args, 2, json);
}

int ffmctl_job(int argc, char **argv)
{
	if (argc < 2) {
		ffmctl_err("job", "no action given: start or end (ffmctl help job)");
		return EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fputs(JOB_START_USAGE JOB_END_USAGE JOB_HELP, stdout);
		return EXIT_OK;
	}
	if (!strcmp(argv[1], "start"))
		return job_start(argc - 1, argv + 1);
	if (!strcmp(argv[1], "end"))
		return job_end(argc - 1, argv + 1);
	ffmctl_err("job", "unknown action '%s': start or end (ffmctl help job)", argv[1]);
	return EXIT_USAGE;
}
