/* SPDX-License-Identifier: MIT */
/*
 * ffm-synth: write a synthetic store with known answers (tests/report/synth.h) for the report's
 * shell tests and benchmark.
 *   ffm-synth --state DIR --key K --job ID [--node NAME] [--stages N] [--iters N]
 *             [--scenarios unnecessary,misplaced,dup,control,sequence] [--threads N] [--tgid N]
 *             [--fast] [--expected] [--sync-api NAME] [--copy-us N] [--run-flags N]
 *             [--exit-status N]
 * --expected prints "scenario expected_benefit_s planted_line" per scenario instead of writing.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/report/synth.h"

static const char *const names[SYN__MAX] = { "unnecessary", "misplaced", "dup", "control",
					      "sequence", "host_read" };

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "state", required_argument, NULL, 's' }, { "key", required_argument, NULL, 'k' },
		{ "job", required_argument, NULL, 'j' },   { "node", required_argument, NULL, 'n' },
		{ "stages", required_argument, NULL, 'S' }, { "iters", required_argument, NULL, 'i' },
		{ "scenarios", required_argument, NULL, 'c' },
		{ "threads", required_argument, NULL, 't' }, { "tgid", required_argument, NULL, 'p' },
		{ "k-us", required_argument, NULL, 'K' },  { "fast", no_argument, NULL, 'f' },
		{ "c-us", required_argument, NULL, 'W' },  { "k2-us", required_argument, NULL, 'Y' },
		{ "c2-us", required_argument, NULL, 'Z' },
		{ "expected", no_argument, NULL, 'e' },
		{ "sync-api", required_argument, NULL, 'A' },
		{ "copy-us", required_argument, NULL, 'C' },
		{ "run-flags", required_argument, NULL, 'F' },
		{ "exit-status", required_argument, NULL, 'X' },
		{},
	};
	struct synth_opts o = { .stages = 4, .iters = 100, .scenarios = 1u << SYN_UNNECESSARY };
	bool expected = false;
	int c, err;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's': o.state_dir = optarg; break;
		case 'k': o.key = optarg; break;
		case 'j': o.job_id = optarg; break;
		case 'n': o.node = optarg; break;
		case 'S': o.stages = (uint32_t)atoi(optarg); break;
		case 'i': o.iters = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 't': o.threads = (uint32_t)atoi(optarg); break;
		case 'p': o.tgid = (uint32_t)atoi(optarg); break;
		case 'K': o.k_us = (uint32_t)atoi(optarg); break;
		case 'W': o.c_us = (uint32_t)atoi(optarg); break;
		case 'Y': o.k2_us = (uint32_t)atoi(optarg); break;
		case 'Z': o.c2_us = (uint32_t)atoi(optarg); break;
		case 'f': o.fast = true; break;
		case 'e': expected = true; break;
		case 'A': o.sync_api = optarg; break;
		case 'C': o.copy_us = (uint32_t)atoi(optarg); break;
		case 'F': o.run_flags = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'X': o.exit_status = atoi(optarg); break;
		case 'c': {
			char *dup = strdup(optarg), *save = NULL;

			o.scenarios = 0;
			for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
				int k;

				for (k = 0; k < SYN__MAX && strcmp(t, names[k]); k++)
					;
				if (k == SYN__MAX) {
					fprintf(stderr, "ffm-synth: unknown scenario '%s'\n", t);
					return 2;
				}
				o.scenarios |= 1u << k;
			}
			free(dup);
			break;
		}
		default: return 2;
		}
	}
	if (expected) {
		for (int k = 0; k < SYN__MAX; k++)
			if (o.scenarios & (1u << k))
				printf("%s %.9f %u\n", names[k],
				       synth__expected(&o, k) * (o.threads ? o.threads : 1) / 1e9,
				       synth__line(k));
		return 0;
	}
	if (!o.state_dir || !o.key || !o.job_id) {
		fprintf(stderr, "ffm-synth: --state, --key and --job are required\n");
		return 2;
	}
	err = synth__write(&o);
	if (err) {
		fprintf(stderr, "ffm-synth: %s\n", strerror(-err));
		return 1;
	}
	return 0;
}
