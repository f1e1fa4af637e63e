/* SPDX-License-Identifier: MIT */
/* Capabilities: the effective set, what of a need it lacks, and the words for it (caps.h). */
#include <errno.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/caps.h"

static const struct {
	int cap;
	const char *name;
} names[] = {
	{ CAP_SYS_ADMIN, "CAP_SYS_ADMIN" },	{ CAP_BPF, "CAP_BPF" },
	{ CAP_PERFMON, "CAP_PERFMON" },		{ CAP_SYS_PTRACE, "CAP_SYS_PTRACE" },
	{ CAP_DAC_READ_SEARCH, "CAP_DAC_READ_SEARCH" }, { CAP_KILL, "CAP_KILL" },
	{ CAP_SYS_RESOURCE, "CAP_SYS_RESOURCE" },
};

int ffm_caps_effective(uint64_t *eff)
{
	char line[256];
	FILE *f = fopen("/proc/self/status", "re");
	int err = -ENOENT;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %" SCNx64, eff) == 1) {
			err = 0;
			break;
		}
	fclose(f);
	return err;
}

uint64_t ffm_caps_lacking(uint64_t need, uint64_t eff)
{
	if (eff & FFM_CAP(CAP_SYS_ADMIN))
		eff |= FFM_CAP(CAP_BPF) | FFM_CAP(CAP_PERFMON);
	return need & ~eff;
}

/* Append to @buf (of @len, *@p used so far), truncating. */
static void __attribute__((format(printf, 4, 5))) put(char *buf, size_t len, size_t *p,
						      const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*p >= len)
		return;
	va_start(ap, fmt);
	n = vsnprintf(buf + *p, len - *p, fmt, ap);
	va_end(ap);
	*p = n < 0 ? len : *p + (size_t)n;
}

/* "A", "A and B", "A, B and C" of the capabilities in @mask. */
static void put_names(char *buf, size_t len, size_t *p, uint64_t mask)
{
	int n = 0, total = __builtin_popcountll(mask);

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (mask & FFM_CAP(names[i].cap)) {
			n++;
			put(buf, len, p, "%s%s", n == 1 ? "" : n == total ? " and " : ", ", names[i].name);
			mask &= ~FFM_CAP(names[i].cap);
		}
	for (int c = 0; mask && c < 64; c++)
		if (mask & FFM_CAP(c)) {
			n++;
			put(buf, len, p, "%scapability %d", n == 1 ? "" : n == total ? " and " : ", ", c);
			mask &= ~FFM_CAP(c);
		}
}

const char *ffm_caps_hint(uint64_t need, uint64_t eff, char *buf, size_t len)
{
	uint64_t implied = FFM_CAP(CAP_BPF) | FFM_CAP(CAP_PERFMON), lack;
	size_t p = 0;

	if (!len)
		return buf;
	buf[0] = '\0';
	put(buf, len, &p, "needs ");
	put_names(buf, len, &p, need);
	if ((need & implied) && !(need & FFM_CAP(CAP_SYS_ADMIN)))
		put(buf, len, &p, " (or CAP_SYS_ADMIN)");
	if (eff == UINT64_MAX && ffm_caps_effective(&eff) < 0)
		return buf;
	lack = ffm_caps_lacking(need, eff);
	if (lack) {
		put(buf, len, &p, "; this process lacks ");
		put_names(buf, len, &p, lack);
	} else {
		put(buf, len, &p, ", which this process has: the kernel refused for another reason "
				  "(lockdown, an LSM, a seccomp filter)");
	}
	return buf;
}
