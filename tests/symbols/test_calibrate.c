/* SPDX-License-Identifier: MIT */
/*
 * symbols/ffm_calibrate.h on the simulated driver: the wait function found must be the
 * unstripped build's fake_wait, verified, in all schedule modes, quickly; the cache per
 * build-id (hit, miss after the driver is replaced on disk, unverified results redone); and a
 * stack captured from a process blocked in the driver unwinds to its own function and line.
 */
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>

#include "symbols/elfutil.h"
#include "symbols/ffm_calibrate.h"
#include "symbols/ffm_node_model.h"
#include "common/ffm_json.h"
#include "symbols/ffm_stack.h"
#include "tests/testutil.h"

static char tmpdir[128];
static char stripped[256], unstripped[300], probe[256];

static const char *mktmp(void)
{
	if (!tmpdir[0]) {
		snprintf(tmpdir, sizeof(tmpdir), "/tmp/ffm-test-calib-XXXXXX");
		if (!mkdtemp(tmpdir))
			FAIL("mkdtemp: %s", strerror(errno));
	}
	return tmpdir;
}

static void need_fakecuda(bool need_root)
{
	snprintf(stripped, sizeof(stripped), "%s/fakecuda/libcuda.so.1", ffm_test_build_dir());
	snprintf(unstripped, sizeof(unstripped), "%s.unstripped", stripped);
	snprintf(probe, sizeof(probe), "%s/ffm-calib-probe", ffm_test_build_dir());
	if (access(stripped, R_OK) || access(unstripped, R_OK))
		SKIP("simulated driver not built (make)");
	if (access(probe, X_OK))
		SKIP("ffm-calib-probe not built (make)");
	if (need_root && geteuid() != 0)
		SKIP("needs root (ptrace and uprobe counters)");
}

/* File offset of the unstripped build's fake_wait. */
static uint64_t wait_symbol_offset(void)
{
	int fd = open(unstripped, O_RDONLY);
	Elf *e;
	Elf_Scn *scn = NULL;
	uint64_t addr = 0, off = 0;
	struct ffm_elf *fe;

	ASSERT(fd >= 0);
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ, NULL);
	while (e && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *data;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB)
			continue;
		data = elf_getdata(scn, NULL);
		for (size_t i = 0; data && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			const char *n;

			if (gelf_getsym(data, i, &s) && (n = elf_strptr(e, sh.sh_link, s.st_name)) &&
			    !strcmp(n, "fake_wait"))
				addr = s.st_value;
		}
	}
	elf_end(e);
	close(fd);
	ASSERT_MSG(addr, "no fake_wait in %s", unstripped);
	ASSERT_OK(ffm_elf_open(unstripped, &fe));
	ASSERT_OK(ffm_elf_vaddr_to_offset(fe, addr, &off));
	ffm_elf_close(fe);
	return off;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

TEST(calibrate_fakecuda)
{
	char cache[256];
	struct ffm_calibration *c, *c2;
	static const char *const modes[] = { "spin", "yield", "blocking", "auto", NULL };
	uint64_t want;
	double t0;
	char *json;

	need_fakecuda(true);
	want = wait_symbol_offset();
	snprintf(cache, sizeof(cache), "%s/cache", mktmp());
	struct ffm_calibrate_opts o = { .sz = sizeof(o), .driver_path = stripped,
					.probe_path = probe, .cache_dir = cache, .modes = modes };
	t0 = now();
	ASSERT_OK(ffm_calibrate(&o, &c));
	printf("# wait function at %#llx (fake_wait at %#llx), %.2f s, verified %d %s\n",
	       (unsigned long long)ffm_calibration__wait_offset(c), (unsigned long long)want,
	       now() - t0, ffm_calibration__verified(c), ffm_calibration__reason(c));
	ASSERT_EQ(ffm_calibration__wait_offset(c), want);
	ASSERT(ffm_calibration__verified(c));
	ASSERT(!ffm_calibration__from_cache(c));
	ASSERT(ffm_calibration__wait_size(c) > 0);
	ASSERT(now() - t0 < 30);
	/* Evidence covers every mode with stacks and counts. */
	json = json_dumps(ffm_calibration__evidence(c), FFM_JSON_FLAGS);
	ASSERT(json);
	for (int i = 0; modes[i]; i++) {
		char key[64];

		snprintf(key, sizeof(key), "\"mode\":\"%s\"", modes[i]);
		ASSERT(strstr(json, key));
	}
	ASSERT(strstr(json, "\"kind\":\"count\",\"call\":\"launch\""));
	ASSERT(strstr(json, "\"kind\":\"stack\",\"call\":\"ctx_sync\""));
	free(json);
	ASSERT_OK(ffm_calibration__to_json(c, &json));
	ASSERT(strstr(json, "\"verified\":true"));
	ASSERT(strstr(json, "\"wait_function\":{\"offset\":"));
	free(json);

	/* The second time it comes from the cache, the same. */
	ASSERT_OK(ffm_calibrate(&o, &c2));
	ASSERT(ffm_calibration__from_cache(c2));
	ASSERT_EQ(ffm_calibration__wait_offset(c2), want);
	ASSERT(ffm_calibration__verified(c2));
	ASSERT_STREQ(ffm_calibration__build_id(c2), ffm_calibration__build_id(c));
	ffm_calibration__free(c2);

	/* A cached result that failed verification is never used: calibration runs again. */
	{
		char path[512];
		FILE *f;

		snprintf(path, sizeof(path), "%s/%s.json", cache, ffm_calibration__build_id(c));
		f = fopen(path, "w");
		fprintf(f, "{\"build_id\":\"%s\",\"driver_path\":\"x\",\"driver_version\":\"unknown\","
			   "\"wait_function\":{\"offset\":16,\"size\":4},\"verified\":false,"
			   "\"reason\":\"test\",\"seconds\":1,\"evidence\":[]}\n",
			ffm_calibration__build_id(c));
		fclose(f);
		ASSERT_OK(ffm_calibration__load_cached(cache, ffm_calibration__build_id(c), &c2));
		ASSERT(!ffm_calibration__verified(c2));
		ASSERT_EQ(ffm_calibration__wait_offset(c2), 16);
		ASSERT_STREQ(ffm_calibration__reason(c2), "test");
		ffm_calibration__free(c2);
		static const char *const two[] = { "spin", "blocking", NULL };
		o.modes = two;
		ASSERT_OK(ffm_calibrate(&o, &c2));
		ASSERT(!ffm_calibration__from_cache(c2));
		ASSERT(ffm_calibration__verified(c2));
		ASSERT_EQ(ffm_calibration__wait_offset(c2), want);
		ffm_calibration__free(c2);
	}
	ffm_calibration__free(c);
	ASSERT_EQ(ffm_calibration__load_cached(cache, "0123456789abcdef", &c2), -ENOENT);
	ffm_calibration__free(NULL);
}

/* The node model measured by the probe reflects what the simulated driver plants. */
TEST(node_model_measured_on_fakecuda)
{
	static const char *const knobs[][2] = {
		{ "FAKECUDA_PAGEABLE_GBPS", "0.5" }, { "FAKECUDA_MIGRATE_PAGE_US", "20" },
		{ "FAKECUDA_FAULT_PAGE_US", "40" }, { "FAKECUDA_EXIT_BLOCK_US", "300" },
		{ "FAKECUDA_EXIT_LONG_US", "20000" }, { "FAKECUDA_EXIT_LONG_AFTER_US", "800" },
	};
	const struct ffm_node_model *nm;
	struct ffm_calibration *c, *c2;
	char cache[256], *json;
	double pin, page, blk, spin;
	size_t n;
	int err;

	need_fakecuda(true);
	snprintf(cache, sizeof(cache), "%s/model", mktmp());
	struct ffm_calibrate_opts o = { .sz = sizeof(o), .driver_path = stripped,
					.probe_path = probe, .cache_dir = cache };
	for (size_t i = 0; i < sizeof(knobs) / sizeof(knobs[0]); i++)
		ASSERT_OK(setenv(knobs[i][0], knobs[i][1], 1));
	/* Timing on a shared machine: figures planted well above its noise, measured again when
	 * they are off all the same. */
	for (int attempt = 0;; attempt++) {
		o.force = attempt > 0;
		err = ffm_calibrate(&o, &c);
		ASSERT_OK(err);
		ASSERT(ffm_calibration__verified(c));
		nm = ffm_calibration__node_model(c, NULL);
		ASSERT_MSG(nm, "no node model: %s", ffm_calibration__node_model_error(c));
		ASSERT_STREQ(nm->gpu, "ffm simulated GPU sm_90 81920MiB");
		ASSERT_OK(ffm_node_model__complete(nm));
		pin = ffm_node_model__copy_ns(nm, FFM_COPY_H2D, FFM_MEM_PINNED, 1 << 20);
		page = ffm_node_model__copy_ns(nm, FFM_COPY_H2D, FFM_MEM_PAGEABLE, 1 << 20);
		blk = ffm_node_model__exit_ns(nm, FFM_SCHED_BLOCKING, 5000000) -
		      ffm_node_model__exit_ns(nm, FFM_SCHED_BLOCKING, 20000);
		spin = ffm_node_model__exit_ns(nm, FFM_SCHED_SPIN, 5000000) -
		       ffm_node_model__exit_ns(nm, FFM_SCHED_SPIN, 20000);
		printf("# 1 MiB H2D pinned %.0f us, pageable %.0f us; pages to device %.1f us, to "
		       "host %.1f us; exit 5 ms - 20 us: blocking %.0f us, spin %.0f us; %.2f s\n",
		       pin / 1e3, page / 1e3, nm->to_device_ns_per_page / 1e3,
		       nm->to_host_ns_per_page / 1e3, blk / 1e3, spin / 1e3, nm->seconds);
		ASSERT(nm->seconds > 0 && nm->seconds < 10);
		if ((page > 2e6 && page > 2 * pin && blk > 15e6 && blk < 60e6 && spin < 10e6 &&
		     nm->to_device_ns_per_page > 10000 && nm->to_device_ns_per_page < 60000 &&
		     nm->to_host_ns_per_page > 36000 && nm->to_host_ns_per_page < 500000) ||
		    attempt == 2)
			break;
		ffm_calibration__free(c);
	}
	for (size_t i = 0; i < sizeof(knobs) / sizeof(knobs[0]); i++)
		unsetenv(knobs[i][0]);
	/* 0.5 GB/s pageable: 2.1 ms, pinned at 12 GB/s: 0.09 ms plus memmove's time. */
	ASSERT(page > 2e6 && page > 2 * pin);
	ASSERT(nm->to_device_ns_per_page > 10000 && nm->to_device_ns_per_page < 60000);
	ASSERT(nm->to_host_ns_per_page > 36000 && nm->to_host_ns_per_page < 500000);
	/* the simulated driver faults each page back on its own (a signal per page) */
	ASSERT_MSG(nm->host_pages_per_fault >= 0.9 && nm->host_pages_per_fault <= 1.1,
		   "pages per fault %.2f", nm->host_pages_per_fault);
	ASSERT(blk > 15e6 && blk < 60e6); /* 20 ms planted */
	ASSERT(spin < 10e6);
	o.force = false;

	/* Cached with the result; a cache without a model is calibrated again. */
	ASSERT_OK(ffm_calibrate(&o, &c2));
	ASSERT(ffm_calibration__from_cache(c2));
	ffm_calibration__node_models(c2, &n);
	ASSERT_EQ(n, 1);
	ASSERT_OK(ffm_calibration__to_json(c2, &json));
	ASSERT(strstr(json, "\"node_models\":[{\"version\":1,\"gpu\":\"ffm simulated GPU"));
	free(json);
	ffm_calibration__free(c2);
	o.skip_node_model = true;
	ASSERT_OK(ffm_calibrate(&o, &c2));
	ASSERT(ffm_calibration__from_cache(c2));
	ffm_calibration__free(c2);
	ffm_calibration__free(c);
}

TEST(driver_replaced_on_disk)
{
	char cache[256], lib[256], cmd[700];
	struct ffm_calibration *c;
	static const char *const spin[] = { "spin", "blocking", NULL };
	char old_id[FFM_BUILD_ID_HEX_MAX], new_id[FFM_BUILD_ID_HEX_MAX];

	need_fakecuda(true);
	snprintf(cache, sizeof(cache), "%s/cache2", mktmp());
	snprintf(lib, sizeof(lib), "%s/libcuda.so.1", mktmp());
	snprintf(cmd, sizeof(cmd), "cp -f %s %s", stripped, lib);
	ASSERT_EQ(system(cmd), 0);
	struct ffm_calibrate_opts o = { .sz = sizeof(o), .driver_path = lib, .probe_path = probe,
					.cache_dir = cache, .modes = spin };
	ASSERT_OK(ffm_calibrate(&o, &c));
	ASSERT(ffm_calibration__verified(c));
	snprintf(old_id, sizeof(old_id), "%s", ffm_calibration__build_id(c));
	ffm_calibration__free(c);

	/* A new driver build on disk (here: the same code under another build-id, written to a
	 * new file renamed over the old, as package managers do). */
	{
		struct ffm_elf *e;
		uint8_t *buf;
		size_t len;
		FILE *f = fopen(lib, "rb");
		char tmp[300];
		uint8_t idbytes[20];

		ASSERT(f);
		fseek(f, 0, SEEK_END);
		len = ftell(f);
		rewind(f);
		buf = malloc(len);
		ASSERT(fread(buf, 1, len, f) == len);
		fclose(f);
		for (int i = 0; i < 20; i++)
			sscanf(old_id + 2 * i, "%2hhx", &idbytes[i]);
		uint8_t *at = memmem(buf, len, idbytes, 20);
		ASSERT(at);
		at[0] ^= 0xff;
		snprintf(tmp, sizeof(tmp), "%s.new", lib);
		f = fopen(tmp, "wb");
		ASSERT(fwrite(buf, 1, len, f) == len);
		fclose(f);
		free(buf);
		ASSERT_EQ(rename(tmp, lib), 0);
		ASSERT_OK(ffm_elf_open(lib, &e));
		snprintf(new_id, sizeof(new_id), "%s", e->build_id);
		ffm_elf_close(e);
	}
	ASSERT(strcmp(old_id, new_id));
	ASSERT_EQ(ffm_calibration__load_cached(cache, new_id, &c), -ENOENT);
	ASSERT_OK(ffm_calibrate(&o, &c));
	ASSERT(!ffm_calibration__from_cache(c)); /* a miss: calibrated again */
	ASSERT_STREQ(ffm_calibration__build_id(c), new_id);
	ASSERT_EQ(ffm_calibration__wait_offset(c), wait_symbol_offset());
	ASSERT(ffm_calibration__verified(c));
	ffm_calibration__free(c);
	ASSERT_OK(ffm_calibration__load_cached(cache, new_id, &c));
	ffm_calibration__free(c);
	ASSERT_OK(ffm_calibration__load_cached(cache, old_id, &c)); /* the old one stays */
	ffm_calibration__free(c);
}

TEST(calibrate_errors)
{
	struct ffm_calibration *c;
	char p[256];

	need_fakecuda(false);
	struct ffm_calibrate_opts o = { .sz = sizeof(o), .driver_path = "/nonexistent/libcuda.so.1",
					.probe_path = probe };
	ASSERT_EQ(ffm_calibrate(&o, &c), -ENOENT);
	static const char *const spin_only[] = { "spin", NULL };
	o.modes = spin_only;
	ASSERT_EQ(ffm_calibrate(&o, &c), -EINVAL);
	o.modes = NULL;
	/* A probe program that is not there: the child fails, we see it die. */
	o.driver_path = stripped;
	snprintf(p, sizeof(p), "%s/no-such-probe", mktmp());
	o.probe_path = p;
	o.timeout_ms = 3000;
	ASSERT_EQ(ffm_calibrate(&o, &c), -ESRCH);
	ASSERT(c == NULL);
}

/* A cache file as the previous writer made it (its escapes, "%.3f" seconds) reads, and
 * what is read is saved and read back the same: strings with every kind of escape included. */
TEST(cache_file_round_trip)
{
	static const char id[] = "00112233445566778899aabbccddeeff00112233";
	char cache[256], cache2[256], path[600], *json, *json2;
	struct ffm_calibration *c, *c2;
	FILE *f;

	snprintf(cache, sizeof(cache), "%s/old-format", mktmp());
	snprintf(cache2, sizeof(cache2), "%s/resaved", mktmp());
	ASSERT_EQ(mkdir(cache, 0755), 0);
	snprintf(path, sizeof(path), "%s/%s.json", cache, id);
	f = fopen(path, "w");
	ASSERT(f);
	fprintf(f, "{\"build_id\":\"%s\",\"driver_path\":\"/opt/a \\\"b\\\" \\\\c\","
		   "\"driver_version\":\"550.54\",\"wait_function\":{\"offset\":4660,"
		   "\"offset_hex\":\"0x1234\",\"size\":96},\"verified\":false,"
		   "\"reason\":\"tab\\tnl\\nctl\\u0001 caf\\u00e9 \\u2713 \\ud83d\\ude00\","
		   "\"seconds\":1.250,\"from_cache\":false,\"evidence\":[{\"kind\":\"count\","
		   "\"call\":\"launch\",\"mode\":\"spin\",\"synchronizing\":false,\"hits\":0,"
		   "\"ok\":true}]}\n", id);
	fclose(f);
	ASSERT_OK(ffm_calibration__load_cached(cache, id, &c));
	ASSERT(ffm_calibration__from_cache(c));
	ASSERT(!ffm_calibration__verified(c));
	ASSERT_EQ(ffm_calibration__wait_offset(c), 4660);
	ASSERT_EQ(ffm_calibration__wait_size(c), 96);
	ASSERT(ffm_calibration__seconds(c) == 1.25);
	ASSERT_STREQ(ffm_calibration__driver_path(c), "/opt/a \"b\" \\c");
	ASSERT_STREQ(ffm_calibration__reason(c),
		     "tab\tnl\nctl\x01 caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80");
	ASSERT_EQ(json_array_size(ffm_calibration__evidence(c)), 1);
	ASSERT_OK(ffm_calibration__save(c, cache2));
	ASSERT_OK(ffm_calibration__load_cached(cache2, id, &c2));
	ASSERT_STREQ(ffm_calibration__reason(c2), ffm_calibration__reason(c));
	ASSERT_STREQ(ffm_calibration__driver_path(c2), ffm_calibration__driver_path(c));
	ASSERT_OK(ffm_calibration__to_json(c, &json));
	ASSERT_OK(ffm_calibration__to_json(c2, &json2));
	ASSERT_STREQ(json, json2);
	ASSERT(strstr(json, "\"wait_function\":{\"offset\":4660,\"offset_hex\":\"0x1234\","
			    "\"size\":96},\"verified\":false,"));
	ASSERT(strstr(json, "\"seconds\":1.25,\"from_cache\":true,\"evidence\":[{\"kind\":"));
	free(json);
	free(json2);
	ffm_calibration__free(c);
	ffm_calibration__free(c2);

	/* Another build's file, and files that are not a result, are refused. */
	ASSERT_EQ(ffm_calibration__load_cached(cache, "ffeeddccbbaa99887766554433221100ffeeddcc",
					       &c), -ENOENT);
	static const char *const bad[] = { "", "{", "[]", "{\"build_id\":\"other\"}",
					   "{\"build_id\":\"%s\",\"driver_path\":\"x\"}" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		f = fopen(path, "w");
		ASSERT(f);
		fprintf(f, bad[i], id);
		fclose(f);
		ASSERT_MSG(ffm_calibration__load_cached(cache, id, &c) == -EINVAL, "accepted %s",
			   bad[i]);
		ASSERT(c == NULL);
	}
}

/* Stop a process blocked in cuCtxSynchronize, copy its stack like the collector does, unwind. */
TEST(unwind_process_blocked_in_driver)
{
	int to[2], from[2];
	pid_t pid;
	char line[256];
	long tid = 0;
	FILE *in;
	struct user_regs_struct regs;
	static uint8_t stack[16384];
	int st;

	need_fakecuda(true);
	ASSERT(pipe(to) == 0 && pipe(from) == 0);
	pid = fork();
	ASSERT(pid >= 0);
	if (pid == 0) {
		dup2(to[0], 0);
		dup2(from[1], 1);
		close(to[1]);
		close(from[0]);
		execl(probe, probe, stripped, (char *)NULL);
		_exit(127);
	}
	close(to[0]);
	close(from[1]);
	in = fdopen(from[0], "r");
	ASSERT(fgets(line, sizeof(line), in) && !strncmp(line, "READY", 5));
	ASSERT(write(to[1], "RUN ctx_sync blocking\n", 22) == 22);
	ASSERT(fgets(line, sizeof(line), in) && sscanf(line, "BLOCKING ctx_sync blocking %ld", &tid) == 1);
	usleep(50000);
	ASSERT_EQ(ptrace(PTRACE_ATTACH, (pid_t)tid, NULL, NULL), 0);
	ASSERT_EQ(waitpid((pid_t)tid, &st, __WALL), (pid_t)tid);
	ASSERT_EQ(ptrace(PTRACE_GETREGS, (pid_t)tid, NULL, &regs), 0);
	/* [sp, sp+16K), cut at the top of the stack mapping. */
	size_t len = sizeof(stack);
	struct iovec local = { stack, len }, remote = { (void *)regs.rsp, len };
	ssize_t got;
	while ((got = process_vm_readv(pid, &local, 1, &remote, 1, 0)) < 0 && len > 4096) {
		len -= 4096;
		local.iov_len = remote.iov_len = len;
	}
	ptrace(PTRACE_DETACH, (pid_t)tid, NULL, NULL);
	ASSERT(got > 0);

	struct ffm_stack_snapshot snap = { pid, regs.rip, regs.rsp, regs.rbp, stack, (size_t)got };
	struct ffm_symbolizer *s;
	struct ffm_addr_space *as;
	struct ffm_frame f[64];
	int n, found = -1;

	ASSERT_OK(ffm_symbolizer__new(NULL, &s));
	ASSERT_OK(ffm_addr_space__new(pid, NULL, &as));
	n = ffm_stack__unwind(s, as, &snap, f, 64);
	ASSERT_OK(n);
	for (int i = 0; i < n; i++) {
		const struct ffm_sym *sym;

		if (ffm_symbolizer__symbolize(s, as, f[i].pc, i > 0, &sym))
			continue;
		printf("# #%d %#llx slot %#llx %s+%#llx %s:%d (%s)\n", i, (unsigned long long)f[i].pc,
		       (unsigned long long)f[i].ra_slot, sym->function ? sym->function : "?",
		       (unsigned long long)sym->offset, sym->file ? sym->file : "?", sym->line,
		       sym->module);
		if (found < 0 && sym->function && !strcmp(sym->function, "do_call")) {
			found = i;
			ASSERT(sym->file && strstr(sym->file, "ffm-calib-probe.c"));
			ASSERT(sym->line > 0);
		}
	}
	ASSERT(write(to[1], "RELEASE\n", 8) == 8);
	ASSERT(fgets(line, sizeof(line), in) && !strncmp(line, "DONE", 4));
	ASSERT(write(to[1], "QUIT\n", 5) == 5);
	waitpid(pid, &st, 0);
	/* The process is gone; its address space is still usable for symbolization. */
	ASSERT_MSG(found > 0, "the probe's do_call frame was not found in %d frames", n);
	{
		const struct ffm_sym *sym;

		ASSERT_OK(ffm_symbolizer__symbolize(s, as, f[found].pc, true, &sym));
		ASSERT_STREQ(sym->function, "do_call");
	}
	fclose(in);
	close(to[1]);
	ffm_addr_space__free(as);
	ffm_symbolizer__free(s);
}

TEST_MAIN()
