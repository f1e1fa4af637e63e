/* SPDX-License-Identifier: MIT */
/*
 * Capabilities: which of those an operation needs this process lacks, read from its effective
 * set (CapEff of /proc/self/status), so that a refusal names what is missing instead of
 * guessing. What each operation of ffm needs is said where it is done (the collector, the
 * uprobe counter); this file only reads and names.
 */
#ifndef FFM_CAPS_H
#define FFM_CAPS_H

#include <stddef.h>
#include <stdint.h>

/* A capability's bit in a mask (linux/capability.h numbers: CAP_SYS_ADMIN, CAP_BPF, ...). */
#define FFM_CAP(c) (1ull << (c))

/* The effective set of this process: 0, or -errno. */
int ffm_caps_effective(uint64_t *eff);

/*
 * Of @need, the capabilities @eff lacks. CAP_SYS_ADMIN stands in for CAP_BPF and CAP_PERFMON,
 * as the kernel counts it (bpf_capable(), perfmon_capable(); Linux 5.8+).
 */
uint64_t ffm_caps_lacking(uint64_t need, uint64_t eff);

/*
 * Why an operation that needs @need was refused (EPERM, EACCES), as the end of an error
 * message: "needs CAP_BPF and CAP_PERFMON; this process lacks CAP_PERFMON", or, when nothing is
 * lacking, that the kernel refused it for another reason. @eff: the effective set, or
 * UINT64_MAX to read this process's own. Returns @buf.
 */
const char *ffm_caps_hint(uint64_t need, uint64_t eff, char *buf, size_t len);

#endif
