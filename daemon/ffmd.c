/* SPDX-License-Identifier: MIT */
/*
 * ffmd: ffm's system-wide collector. Runs in the foreground (systemd's Type=notify service
 * runs the same program with the standard directories):
 *
 *     ffmd [--config FILE] [--state-dir DIR] [--runtime-dir DIR] [--create] [--verbose]
 *
 * Command-line values override the config file's. A state directory that does not exist is
 * made only if it is the default or with --create. One ffmd per runtime directory and per
 * node's state: a second one refuses to start, naming the running one's pid. SIGHUP re-reads
 * the config file (rules are replaced, active jobs go on); SIGTERM/SIGINT stop. Exit codes:
 * 0 clean stop, 1 failure, 2 usage.
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "daemon/log.h"
#include "daemon/server.h"
#include "daemon/version.h"

#define DEFAULT_CONFIG FFMD_DEFAULT_CONFIG

static void usage(FILE *f)
{
	fprintf(f, "Usage: ffmd [--config FILE] [--state-dir DIR] [--runtime-dir DIR] [--create]\n"
		   "            [--verbose] [--version]\n"
		   "  --config FILE       default " DEFAULT_CONFIG " (if it exists)\n"
		   "  --state-dir DIR     job stores and calibrations (default " FFMD_DEFAULT_STATE_DIR ")\n"
		   "  --create            make the state directory if it does not exist (the default\n"
		   "                      one is made anyway)\n"
		   "  --runtime-dir DIR   control socket (default /run/ffm)\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "state-dir", required_argument, NULL, 's' },
		{ "runtime-dir", required_argument, NULL, 'r' },
		{ "create", no_argument, NULL, 'C' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{},
	};
	const char *config = NULL, *state = NULL, *runtime = NULL;
	struct ffmd_config cfg;
	struct ffmd *d = NULL;
	char err[512] = "";
	bool create = false;
	int c, r;

	opterr = 0; /* said below, as "ffmd: ..." whatever the path it was started by */
	while ((c = getopt_long(argc, argv, ":c:s:r:CvhV", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			config = optarg;
			break;
		case 's':
			state = optarg;
			break;
		case 'r':
			runtime = optarg;
			break;
		case 'C':
			create = true;
			break;
		case 'v':
			ffm_log_level = LOG_DEBUG;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			ffm_print_version(stdout, "ffmd");
			return 0;
		case ':':
			fprintf(stderr, "ffmd: option '%s' needs an argument (ffmd --help)\n",
				argv[optind - 1]);
			return 2;
		default:
			if (optopt && strncmp(argv[optind - 1], "--", 2))
				fprintf(stderr, "ffmd: unknown option '-%c' (ffmd --help)\n", optopt);
			else if (optopt) /* a long option that takes none given "=VALUE" */
				fprintf(stderr, "ffmd: option '%.*s' takes no argument (ffmd --help)\n",
					(int)strcspn(argv[optind - 1], "="), argv[optind - 1]);
			else
				fprintf(stderr, "ffmd: unknown option '%.*s' (ffmd --help)\n",
					(int)strcspn(argv[optind - 1], "="), argv[optind - 1]);
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "ffmd: unexpected argument '%s' (ffmd --help)\n", argv[optind]);
		return 2;
	}
	libbpf_set_print(ffm_log_libbpf);
	if (!config && access(DEFAULT_CONFIG, F_OK) == 0)
		config = DEFAULT_CONFIG;
	if (ffmd_config_load(&cfg, config, err, sizeof(err)) < 0) {
		log_err("bad configuration: %s", err);
		return 1;
	}
	if (state && snprintf(cfg.state_dir, sizeof(cfg.state_dir), "%s", state) >=
			 (int)sizeof(cfg.state_dir))
		return 2;
	if (runtime && snprintf(cfg.runtime_dir, sizeof(cfg.runtime_dir), "%s", runtime) >=
			   (int)sizeof(cfg.runtime_dir))
		return 2;
	cfg.create_state_dir = create;
	r = ffmd__new(&cfg, &d);
	if (r < 0)
		return 1;
	r = ffmd__run(d);
	ffmd__free(d);
	if (r < 0) {
		log_err("event loop failed: %s", strerror(-r));
		return 1;
	}
	log_info("ffmd stopped");
	return 0;
}
