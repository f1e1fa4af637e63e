/* SPDX-License-Identifier: MIT */
/* Helpers shared by the C tests (linked into every test binary). */
#define _XOPEN_SOURCE 700 /* nftw */
#include <bpf/bpf.h>
#include <errno.h>
#include <ftw.h>
#include <linux/bpf.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/testutil.h"

int ffm_test_can_bpf(char *why, size_t len)
{
	/* Try the real thing: load a two-instruction socket filter program. */
	struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	int fd = bpf_prog_load(BPF_PROG_TYPE_SOCKET_FILTER, "ffm_probe", "GPL", insns, 2, NULL);

	if (fd < 0) {
		snprintf(why, len, "this process may not load BPF programs (%s; run as root or with CAP_BPF+CAP_PERFMON)",
			 strerror(errno));
		return 0;
	}
	close(fd);
	return 1;
}

static int rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return (type == FTW_DP ? rmdir(path) : unlink(path)) ? -errno : 0;
}

int ffm_test_rmtree(const char *dir)
{
	if (!dir)
		return 0;
	return nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int ffm_test_cut_short;

/* LeakSanitizer (make sanitize) asks this hook at exit. A case that FAIL or SKIP cut short
 * never freed what it had allocated: checking then would report the test's own leftovers and
 * turn a skip into a failure. Binaries whose cases all ran to the end are checked. */
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
	return ffm_test_cut_short;
}
