/* SPDX-License-Identifier: MIT */
/* ffmctl: the command-line front of ffm. See cli/ffmctl.h for the verb conventions. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/ffmctl.h"
#include "daemon/version.h"

struct ffmctl_globals ffmctl_g;

static const struct ffmctl_verb verbs[] = {
	{ "calibrate", ffmctl_calibrate, "calibrate [--driver PATH] [--json] [--force]" },
	{ "export", ffmctl_export,
	  "export <jobid> --format chrome-trace|hatchet [--run ID] [--node NAME] [-o FILE]" },
	{ "diff", ffmctl_diff, "diff <jobid-before> <jobid-after> [--json] [--top N]" },
	{ "job", ffmctl_job, "job start <jobid> [--key K] [--stage N] [--user UID] "
			     "(--cgroup PATH | --pid PID | --uid UID | --exe PATH)... [--json]" },
	{ "job", ffmctl_job, "job end <jobid> [--json]" },
	{ "jobs", ffmctl_jobs, "jobs [--json]" },
	{ "profile", ffmctl_profile, "profile [--stages A-B] [--key K] [--job-id ID] [--json] [-o FILE] -- CMD [ARGS...]" },
	{ "report", ffmctl_report, "report <jobid> [--json] [--group point|function|sequence] [--subsequence ID:FROM:TO] [--top N]" },
	{ "status", ffmctl_status, "status [--json]" },
};

void ffmctl_err(const char *verb, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "ffmctl%s%s: ", verb ? " " : "", verb ? verb : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int ffmctl_one_jobid(const char *verb, int argc, char **argv)
{
	if (optind == argc - 1)
		return 0;
	if (optind >= argc)
		ffmctl_err(verb, "no job id given");
	else
		ffmctl_err(verb, "one job id, please (unexpected '%s')", argv[optind + 1]);
	return EXIT_USAGE;
}

int ffmctl_json_opts(const char *verb, const char *usage, int argc, char **argv, bool *json,
		     bool jobid)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	int c;

	while ((c = getopt_long(argc, argv, "jh", opts, NULL)) == 'j')
		*json = true;
	if (c == 'h')
		fputs(usage, stdout);
	if (c != -1)
		return c == 'h' ? EXIT_OK : EXIT_USAGE;
	if (jobid)
		return ffmctl_one_jobid(verb, argc, argv) ?: -1;
	if (optind != argc) {
		ffmctl_err(verb, "unexpected argument '%s'", argv[optind]);
		return EXIT_USAGE;
	}
	return -1;
}

int ffmctl_parse_top(const char *verb, const char *arg, int *top)
{
	char *end;
	long v = strtol(arg, &end, 10);

	if (end == arg || *end || v < 1 || v > 1000000) {
		ffmctl_err(verb, "--top wants a count from 1, not '%s'", arg);
		return -EINVAL;
	}
	*top = (int)v;
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "Usage: ffmctl [--runtime-dir DIR] [--state-dir DIR] [--timeout SEC] [--py-library PATTERNS] [--src-library PATTERNS] [--version] VERB [ARGS]\n\nVerbs:\n");
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		fprintf(f, "  ffmctl %s\n", verbs[i].grammar);
	fprintf(f, "  ffmctl help [VERB]\n");
	fprintf(f, "\n-j is short for --json, as in bpftool.\n");
	fprintf(f, "\nEnvironment: FFM_RUNTIME_DIR (default /run/ffm), FFM_STATE_DIR (default /var/lib/ffm),\n"
		   "FFM_PY_LIBRARY (= --py-library: ':'-separated fnmatch patterns of the Python files that\n"
		   "are installed libraries, never a Python program's call site; default: site-packages,\n"
		   "dist-packages, */lib/python3*/, <frozen *>, */torch/*),\n"
		   "FFM_SRC_LIBRARY (= --src-library: the same for C and C++ source files, whose inlined\n"
		   "code names no call site; default: the CUDA toolkit's headers (Thrust, CUB, crt/),\n"
		   "*/include/c++/*, /usr/include/*, /usr/lib/gcc/*)\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "runtime-dir", required_argument, NULL, 'r' },
		{ "state-dir", required_argument, NULL, 's' },
		{ "timeout", required_argument, NULL, 't' },
		{ "py-library", required_argument, NULL, 'p' },
		{ "src-library", required_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{},
	};
	bool help;
	char *end;
	double t;
	int c;

	/* Long enough for ffmd to calibrate a new driver while starting a job (seconds). */
	ffmctl_g.timeout_ms = 30000;
	ffmctl_g.runtime_dir = getenv("FFM_RUNTIME_DIR");
	ffmctl_g.state_dir = getenv("FFM_STATE_DIR");
	if (!ffmctl_g.runtime_dir || !*ffmctl_g.runtime_dir)
		ffmctl_g.runtime_dir = "/run/ffm";
	if (!ffmctl_g.state_dir || !*ffmctl_g.state_dir)
		ffmctl_g.state_dir = "/var/lib/ffm";

	/* '+': stop at the verb, its options are its own. */
	while ((c = getopt_long(argc, argv, "+hV", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			ffmctl_g.runtime_dir = optarg;
			break;
		case 's':
			ffmctl_g.state_dir = optarg;
			break;
		case 't':
			t = strtod(optarg, &end);
			if (end == optarg || *end || !(t > 0 && t <= 3600)) {
				ffmctl_err(NULL, "--timeout wants seconds in (0, 3600], not '%s'", optarg);
				return EXIT_USAGE;
			}
			ffmctl_g.timeout_ms = (int)(t * 1000) > 0 ? (int)(t * 1000) : 1;
			break;
		case 'p':
			/* Read by the analysis (analysis/pyframes.c) in every verb that names sites. */
			if (setenv("FFM_PY_LIBRARY", optarg, 1) < 0) {
				ffmctl_err(NULL, "--py-library: %s", strerror(errno));
				return EXIT_USAGE;
			}
			break;
		case 'S':
			/* The same for native headers (analysis/pyframes.c). */
			if (setenv("FFM_SRC_LIBRARY", optarg, 1) < 0) {
				ffmctl_err(NULL, "--src-library: %s", strerror(errno));
				return EXIT_USAGE;
			}
			break;
		case 'h':
			usage(stdout);
			return EXIT_OK;
		case 'V':
			ffm_print_version(stdout, "ffmctl");
			return EXIT_OK;
		default:
			return EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		ffmctl_err(NULL, "no verb given (try --help)");
		return EXIT_USAGE;
	}
	/* `ffmctl help [VERB]`: the usage, or the verb's own --help. */
	help = !strcmp(argv[optind], "help");
	if (help && optind + 1 >= argc) {
		usage(stdout);
		return EXIT_OK;
	}
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++) {
		char *hargv[] = { (char *)verbs[i].name, "--help", NULL };
		char **vargv = help ? hargv : argv + optind;
		int vargc = help ? 2 : argc - optind;

		if (strcmp(argv[optind + help], verbs[i].name))
			continue;
		optind = 0; /* reset getopt for the verb */
		return verbs[i].run(vargc, vargv);
	}
	if (help)
		ffmctl_err("help", "unknown verb '%s' (ffmctl help lists them)", argv[optind + 1]);
	else
		ffmctl_err(NULL, "unknown verb '%s' (try --help)", argv[optind]);
	return EXIT_USAGE;
}
