/* SPDX-License-Identifier: MIT */
/* ffmctl: the command-line front of ffm. See cli/ffmctl.h for the verb conventions. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/ffmctl.h"
#include "common/termsafe.h"
#include "daemon/version.h"

struct ffmctl_globals ffmctl_g;

/* A verb's options are said in one place, its own usage (`ffmctl help VERB`, which the bash
 * completion reads too): this list names the verbs only. */
static const struct ffmctl_verb verbs[] = {
	{ "profile", ffmctl_profile, "run a command once per stage with no daemon, then report" },
	{ "report", ffmctl_report, "what to fix in a job, by expected benefit" },
	{ "diff", ffmctl_diff, "predicted vs actual change between two jobs (before and after a fix)" },
	{ "export", ffmctl_export, "a job's runs as a chrome trace or a Hatchet tree" },
	{ "jobs", ffmctl_jobs, "every recorded job, newest last" },
	{ "status", ffmctl_status, "ffmd's drivers, active jobs, events/s and drops" },
	{ "job", ffmctl_job, "start or end a job on this node (a scheduler's prolog and epilog)" },
	{ "calibrate", ffmctl_calibrate, "find and verify libcuda's internal wait function" },
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

int ffmctl_opt_err(const char *verb, int c, char **argv)
{
	const char *arg = argv[optind - 1];
	char shrt[3] = { '-', (char)optopt, 0 };
	int n = verb ? (int)strcspn(verb, " ") : 0; /* "job start": help job */
	const char *name = optopt && strncmp(arg, "--", 2) ? shrt : arg;
	int len = (int)strcspn(name, "=");

	if (c == ':')
		ffmctl_err(verb, "option '%.*s' needs an argument (ffmctl help%s%.*s)", len, name,
			   n ? " " : "", n, verb ? verb : "");
	else if (optopt && name == arg) /* a known long option given "=VALUE" */
		ffmctl_err(verb, "option '%.*s' takes no argument (ffmctl help%s%.*s)", len, name,
			   n ? " " : "", n, verb ? verb : "");
	else
		ffmctl_err(verb, "unknown option '%.*s' (ffmctl help%s%.*s lists them)", len, name,
			   n ? " " : "", n, verb ? verb : "");
	return EXIT_USAGE;
}

int ffmctl_one_jobid(const char *verb, int argc, char **argv)
{
	if (optind == argc - 1)
		return 0;
	if (optind >= argc)
		ffmctl_err(verb, "no job id given (ffmctl jobs lists them)");
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

	*json |= ffmctl_g.json;
	while ((c = getopt_long(argc, argv, ":jh", opts, NULL)) == 'j')
		*json = true;
	if (c == 'h') {
		fputs(usage, stdout);
		return EXIT_OK;
	}
	if (c != -1)
		return ffmctl_opt_err(verb, c, argv);
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

static const char GLOBAL_HELP[] =
	"\n"
	"Options, before the verb:\n"
	"  --runtime-dir DIR     where ffmd's control socket is\n"
	"  --state-dir DIR       where the job stores and driver calibrations are\n"
	"  --timeout SEC         how long to wait for ffmd's answer, up to 3600 (default 30)\n"
	"  --py-library PATTERNS, --src-library PATTERNS\n"
	"                        the library files that never name a call site (below)\n"
	"  -j, --json            the verb's --json (ffmctl -j report JOB, as in bpftool); a\n"
	"                        verb's own -j is short for its --json too\n"
	"  -v, --verbose         libbpf's own messages too (profile)\n"
	"  -V, --version         the release, and the versions of the store, protocol, BPF ABI\n"
	"man ffmctl has the details.\n";

static void usage(FILE *f)
{
	fprintf(f, "Usage: ffmctl [--runtime-dir DIR] [--state-dir DIR] [--timeout SEC] "
		   "[--py-library PATTERNS] [--src-library PATTERNS] [-j|--json] [--verbose] "
		   "[--version] VERB [ARGS]\n\n"
		   "Verbs:\n");
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		fprintf(f, "  %-10s %s\n", verbs[i].name, verbs[i].summary);
	fprintf(f, "  %-10s %s\n", "help", "this list, or a verb's usage and options: ffmctl "
		   "help VERB");
	fputs(GLOBAL_HELP, f);
	fprintf(
	    f,
	    "\nEnvironment: FFM_RUNTIME_DIR (default /run/ffm), FFM_STATE_DIR (default "
	    "/var/lib/ffm),\n"
	    "FFM_PY_LIBRARY (= --py-library: ':'-separated fnmatch patterns of the Python files "
	    "that\n"
	    "are installed libraries, never a Python program's call site; default: site-packages,\n"
	    "dist-packages, */lib/python3*/, <frozen *>, */torch/*),\n"
	    "FFM_SRC_LIBRARY (= --src-library: the same for C and C++ source files, whose inlined\n"
	    "code names no call site; default: the CUDA toolkit's headers (Thrust, CUB, crt/),\n"
	    "nvcc's launch stubs (*.cudafe1.stub.c), */include/c++/*, /usr/include/*,\n"
	    "/usr/lib/gcc/*; paths are matched with their . and .. resolved)\n");
}

static FILE *raw_stdout, *raw_stderr;

/* At exit: the escaping streams flushed and closed, the plain ones back for what follows. */
static void unescape_output(void)
{
	if (stdout != raw_stdout) {
		fclose(stdout);
		stdout = raw_stdout;
	}
	if (stderr != raw_stderr) {
		fclose(stderr);
		stderr = raw_stderr;
	}
}

/* Names a job's user chose reach every output: control characters are escaped on the way
 * (common/termsafe.h). Only the progress line writes to the terminal directly. */
static int escape_output(void)
{
	FILE *out = ffm_termsafe_stream(STDOUT_FILENO, isatty(STDOUT_FILENO) ? _IOLBF : _IOFBF);
	FILE *err = ffm_termsafe_stream(STDERR_FILENO, _IONBF);

	if (!out || !err || atexit(unescape_output)) {
		if (out)
			fclose(out);
		if (err)
			fclose(err);
		return -ENOMEM;
	}
	raw_stdout = stdout;
	raw_stderr = stderr;
	stdout = out;
	stderr = err;
	return 0;
}

/* Reads the options before the verb into ffmctl_g and the environment: -1 to go on, else the
 * exit code to return (help, version, usage). */
static int global_options(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "runtime-dir", required_argument, NULL, 'r' },
		{ "state-dir", required_argument, NULL, 's' },
		{ "timeout", required_argument, NULL, 't' },
		{ "py-library", required_argument, NULL, 'p' },
		{ "src-library", required_argument, NULL, 'S' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{},
	};
	char *end;
	double t;
	int c;

	/* '+': stop at the verb, its options are its own. */
	opterr = 0; /* ffmctl_opt_err says it, verb and hint included */
	while ((c = getopt_long(argc, argv, "+:hjvV", opts, NULL)) != -1) {
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
		case 'v':
			ffmctl_g.verbose = true;
			break;
		case 'j':
			ffmctl_g.json = true;
			break;
		case 'h':
			usage(stdout);
			return EXIT_OK;
		case 'V':
			ffm_print_version(stdout, "ffmctl");
			return EXIT_OK;
		default:
			return ffmctl_opt_err(NULL, c, argv);
		}
	}
	return -1;
}

/* Runs the verb at argv[optind] with the arguments after it (`help VERB`: its --help). */
static int run_verb(int argc, char **argv)
{
	bool help;

	if (optind >= argc) {
		ffmctl_err(NULL, "no verb given (ffmctl help lists them)");
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
		ffmctl_err(NULL, "unknown verb '%s' (ffmctl help lists them)", argv[optind]);
	return EXIT_USAGE;
}

int main(int argc, char **argv)
{
	int rc;

	if (escape_output() < 0) {
		fprintf(stderr, "ffmctl: out of memory\n");
		return EXIT_FAIL;
	}
	/* Long enough for ffmd to calibrate a new driver while starting a job (seconds). */
	ffmctl_g.timeout_ms = 30000;
	ffmctl_g.runtime_dir = getenv("FFM_RUNTIME_DIR");
	ffmctl_g.state_dir = getenv("FFM_STATE_DIR");
	if (!ffmctl_g.runtime_dir || !*ffmctl_g.runtime_dir)
		ffmctl_g.runtime_dir = "/run/ffm";
	if (!ffmctl_g.state_dir || !*ffmctl_g.state_dir)
		ffmctl_g.state_dir = "/var/lib/ffm";
	rc = global_options(argc, argv);
	if (rc >= 0)
		return rc;
	return run_verb(argc, argv);
}
