/* SPDX-License-Identifier: MIT */
/*
 * ffmctl calibrate [--driver PATH] [--json] [--force]
 *
 * Finds libcuda's internal wait function (symbols/ffm_calibrate.h) for the system's driver or
 * the one given, verifies it, and caches the result per build-id under the state directory.
 * Exit 0 with a verified result, 1 when calibration failed or could not be verified, 2 on usage.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/ffmctl.h"
#include "daemon/driver_setup.h"
#include "daemon/resolve.h"
#include "store/ffm_store.h"
#include "symbols/ffm_calibrate.h"
#include "symbols/ffm_driver.h"
#include "symbols/ffm_node_model.h"
#include "common/ffm_json.h"

static void print_size(uint64_t b)
{
	if (b >= (1u << 20))
		printf(" %6" PRIu64 "M", b >> 20);
	else
		printf(" %6" PRIu64 "K", b >> 10);
}

/* One node model: copy times, staging, migration and exit latency, in microseconds. */
static void print_node_model(const struct ffm_node_model *nm)
{
	printf("node model:     %s (measured in %.2f s)\n", nm->gpu, nm->seconds);
	printf("  copy, us          ");
	for (int i = 0; i < nm->nsizes; i++)
		print_size(nm->size[i]);
	printf("\n");
	for (int d = 0; d < FFM_COPY_DIRS; d++)
		for (int k = 0; k <= FFM_MEM_KINDS; k++) {
			printf("  %s %-14s", ffm_copy_dir_name(d),
			       k < FFM_MEM_KINDS ? ffm_mem_kind_name(k) : "staging");
			for (int i = 0; i < nm->nsizes; i++)
				printf(" %7.0f", (k < FFM_MEM_KINDS ? nm->copy_ns[d][k][i]
					: ffm_node_model__staging_ns(nm, d, nm->size[i])) / 1e3);
			printf("\n");
		}
	printf("  managed pages     to device %.2f us, to host (fault) %.2f us per %" PRIu64
	       "-byte page\n", nm->to_device_ns_per_page / 1e3, nm->to_host_ns_per_page / 1e3,
	       nm->page_size);
	if (nm->host_pages_per_fault > 0)
		printf("                    %.1f pages back per host fault\n", nm->host_pages_per_fault);
	else
		printf("                    pages back per host fault not counted (taken as 1)\n");
	printf("  exit latency, us  ");
	for (int i = 0; i < nm->nwaits; i++)
		printf(" %6.0fu", nm->wait_ns[i] / 1e3);
	printf("  (wait length)\n");
	for (int m = 0; m < FFM_SCHED_MODES; m++) {
		printf("  %-17s", ffm_sched_mode_name(m));
		for (int i = 0; i < nm->nwaits; i++)
			printf(" %7.1f", nm->exit_ns[m][i] / 1e3);
		printf("\n");
	}
}

static void print_text(const struct ffm_calibration *c)
{
	const json_t *ev = ffm_calibration__evidence(c);
	int stacks = 0, counts = 0;
	json_t *e;
	size_t i;

	json_array_foreach(ev, i, e) {
		const char *kind = ffm_json_get_str(e, "kind", "");

		stacks += !strcmp(kind, "stack");
		counts += !strcmp(kind, "count");
	}
	printf("driver:         %s\n", ffm_calibration__driver_path(c));
	printf("version:        %s\n", ffm_calibration__driver_version(c));
	printf("build-id:       %s\n", ffm_calibration__build_id(c));
	printf("wait function:  file offset %#" PRIx64 ", %" PRIu64 " bytes\n",
	       ffm_calibration__wait_offset(c), ffm_calibration__wait_size(c));
	if (ffm_calibration__verified(c))
		printf("verified:       yes (every synchronizing call entered it, no other call did)\n");
	else
		printf("verified:       NO: %s\n", ffm_calibration__reason(c));
	printf("evidence:       %d waiting stack%s sampled, %d call%s counted\n", stacks,
	       ffmctl_s((uint64_t)stacks), counts, ffmctl_s((uint64_t)counts));
	/* The per-call counts, one line each. */
	json_array_foreach(ev, i, e) {
		if (strcmp(ffm_json_get_str(e, "kind", ""), "count"))
			continue;
		printf("  %-28s %-9s %-6s hits %-4lld %s\n", ffm_json_get_str(e, "call", ""),
		       ffm_json_get_str(e, "mode", ""),
		       ffm_json_get_bool(e, "synchronizing", false) ? "sync" : "nosync",
		       (long long)json_integer_value(json_object_get(e, "hits")),
		       ffm_json_get_bool(e, "ok", false) ? "ok" : "WRONG");
	}
	{
		size_t n;
		const struct ffm_node_model *nm = ffm_calibration__node_models(c, &n);

		for (size_t k = 0; k < n; k++)
			print_node_model(&nm[k]);
		if (!n)
			printf("node model:     none%s%s\n",
			       ffm_calibration__node_model_error(c)[0] ? ": " : "",
			       ffm_calibration__node_model_error(c));
	}
	printf("time:           %.2f s%s\n", ffm_calibration__seconds(c),
	       ffm_calibration__from_cache(c) ? " (cached result)" : "");
}

/* That @path (shown as @shown) is a libcuda, an ELF file that exports cuInit: 0, or -1 (said). */
static int check_libcuda(const char *path, const char *shown)
{
	struct ffm_driver_opts o = { .sz = sizeof(o), .display_path = shown };
	struct ffm_driver *d = NULL;
	struct ffm_driver_sym sym;
	int err = ffm_driver__open(path, &o, &d);

	if (!err)
		err = ffm_driver__lookup(d, "cuInit", &sym) < 0 ? -ESRCH : 0;
	ffm_driver__free(d);
	if (!err)
		return 0;
	ffmctl_err("calibrate", "%s is not libcuda: %s (the NVIDIA driver's library is "
		   "libcuda.so.1; without --driver, the one a program would load is taken)", shown,
		   err == -ENOEXEC ? "not an ELF file" :
		   err == -ENODATA ? "an ELF file with no dynamic symbols" :
		   err == -ESRCH ? "it exports no cuInit" : strerror(-err));
	return -1;
}

static const char CALIBRATE_HELP[] =
	"Usage: ffmctl calibrate [--driver PATH] [--json] [--force]\n"
	"\n"
	"Find and verify libcuda's internal wait function and measure the node model (copy\n"
	"speeds, managed-page migration, wait exit latency) of the GPU; the result is cached per\n"
	"build-id in STATE_DIR/drivers/, the model per GPU.\n"
	"\n"
	"Options:\n"
	"  --driver PATH   the libcuda file to calibrate (default: the libcuda.so.1 a\n"
	"                  program's loader would pick); a file that is not libcuda is refused\n"
	"  -j, --json      the result and its evidence as JSON\n"
	"  --force         calibrate again even when a verified result is cached\n";

/* What the command line asked for. */
struct calibrate_args {
	const char *driver;
	bool json, force;
};

/* Reads the options into @a: -1 to go on, else the exit code to return (help, usage). */
static int parse_args(int argc, char **argv, struct calibrate_args *a)
{
	static const struct option opts[] = {
		{ "driver", required_argument, NULL, 'd' },
		{ "json", no_argument, NULL, 'j' },
		{ "force", no_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	int ch;

	while ((ch = getopt_long(argc, argv, ":d:jfh", opts, NULL)) != -1) {
		switch (ch) {
		case 'd':
			a->driver = optarg;
			break;
		case 'j':
			a->json = true;
			break;
		case 'f':
			a->force = true;
			break;
		case 'h':
			fputs(CALIBRATE_HELP, stdout);
			return EXIT_OK;
		default:
			return ffmctl_opt_err("calibrate", ch, argv);
		}
	}
	if (optind < argc) {
		ffmctl_err("calibrate", "unexpected argument '%s' (ffmctl help calibrate)", argv[optind]);
		return EXIT_USAGE;
	}
	return -1;
}

/* The driver to calibrate: @driver when given, else the one a program's loader would take (in
 * @found); NULL when there is none (said). */
static const char *pick_driver(const char *driver, char *found, size_t len)
{
	if (driver)
		return driver;
	/* The one a program's loader would take, as ffmctl profile finds it:
	 * LD_LIBRARY_PATH, then ld.so.cache and the usual directories. */
	if (ffm_resolve_libcuda(getenv("LD_LIBRARY_PATH"), NULL, NULL, found, len) < 0) {
		ffmctl_err("calibrate", "no libcuda.so.1 found in LD_LIBRARY_PATH, ld.so.cache or "
			   "the usual directories (install the NVIDIA driver or pass --driver PATH)");
		return NULL;
	}
	return found;
}

/* Opens @driver once, to be calibrated as that open file, and checks that it is a libcuda this
 * user may run: the descriptor (its /proc path in @fdpath, whether it is trusted in @trusted),
 * or -1 (said). */
static int open_driver(const char *driver, bool *trusted, char *fdpath, size_t len)
{
	char why[256];
	int fd;

	/* As root, only a trusted file is run (daemon/driver_setup.h); another user runs it with
	 * their own privileges, and their result is not cached where ffmd would take it. */
	/* As root, ffmd's trusted_driver_dirs too (the default config's); none if it is bad. */
	if (geteuid() == 0 && ffm_driver_trust_config(NULL, why, sizeof(why)) < 0)
		fprintf(stderr, "ffmctl calibrate: warning: no trusted_driver_dirs: %s\n", why);
	fd = ffm_driver_file_open(driver, trusted, why, sizeof(why));
	if (fd < 0) {
		ffmctl_err("calibrate", "cannot open %s: %s", driver, why);
		return -1;
	}
	/* read, never run: said before anything else about the file */
	snprintf(fdpath, len, "/proc/%d/fd/%d", (int)getpid(), fd);
	if (check_libcuda(fdpath, driver) < 0) {
		close(fd);
		return -1;
	}
	if (!*trusted && geteuid() == 0) {
		ffmctl_err("calibrate", "refusing to run %s as root: it is %s (calibrate a root-owned "
			   "copy in a root-owned directory of a file system mounted without nosuid: "
			   "install -o root -m 0644 %s COPY; the result serves every file of the "
			   "same build-id)", driver, why, driver);
		close(fd);
		return -1;
	}
	return fd;
}

/* Says that calibrating @driver failed with @err, and the likely cause. */
static void say_failure(const char *driver, int err)
{
	const char *hint =
	    err == -EPERM || err == -EACCES
		? " (run as root: ptrace and uprobes are needed)"
	    : err == -ENODATA ? " (no libcuda function was common to all waiting stacks)"
	    : err == -EPROTO
		? " (the probe program reported an error: is there a usable GPU?)"
	    : err == -ETIMEDOUT ? " (the probe program stopped answering)"
				: "";
	ffmctl_err("calibrate", "calibrating %s failed: %s%s", driver, strerror(-err), hint);
}

/* Prints @c as text or JSON: EXIT_OK when it is verified, else EXIT_FAIL (said in text). */
static int print_result(const struct ffm_calibration *c, const char *driver, bool json)
{
	int rc;

	if (json) {
		char *j;

		if (ffm_calibration__to_json(c, &j) == 0) {
			printf("%s\n", j);
			free(j);
		}
	} else {
		print_text(c);
	}
	rc = ffm_calibration__verified(c) ? EXIT_OK : EXIT_FAIL;
	if (!json && rc != EXIT_OK)
		ffmctl_err("calibrate", "the wait function of %s could not be verified: %s", driver,
			   ffm_calibration__reason(c));
	return rc;
}

int ffmctl_calibrate(int argc, char **argv)
{
	struct calibrate_args a = { .json = ffmctl_g.json };
	char probe[PATH_MAX], found[PATH_MAX], fdpath[64], cache[PATH_MAX];
	struct ffm_calibration *c = NULL;
	const char *driver;
	bool trusted;
	int err, rc, fd;

	rc = parse_args(argc, argv, &a);
	if (rc >= 0)
		return rc;
	driver = pick_driver(a.driver, found, sizeof(found));
	if (!driver)
		return EXIT_FAIL;
	if (ffm_calib_probe_path(probe, sizeof(probe)) < 0) {
		ffmctl_err("calibrate", "cannot find the ffm-calib-probe program in $FFM_CALIB_PROG, "
			   "next to ffmctl or in the libexec directory (is ffm installed completely?)");
		return EXIT_FAIL;
	}
	fd = open_driver(driver, &trusted, fdpath, sizeof(fdpath));
	if (fd < 0)
		return EXIT_FAIL;
	if (ffm_state_path(ffmctl_g.state_dir, FFM_STATE_DRIVERS, NULL, cache, sizeof(cache)) < 0)
		cache[0] = 0;
	struct ffm_calibrate_opts o = {
		.sz = sizeof(o),
		.driver_path = fdpath,
		.display_path = driver,
		.probe_path = probe,
		.cache_dir = trusted && cache[0] ? cache : NULL,
		.force = a.force,
	};
	err = ffm_calibrate(&o, &c);
	close(fd);
	if (err) {
		say_failure(driver, err);
		return EXIT_FAIL;
	}
	rc = print_result(c, driver, a.json);
	ffm_calibration__free(c);
	return rc;
}
