/* SPDX-License-Identifier: MIT */
/* Helpers shared by the C tests (linked into every test binary). */
#include <bpf/bpf.h>
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
