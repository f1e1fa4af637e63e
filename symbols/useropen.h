/* SPDX-License-Identifier: MIT */
/*
 * Internal to symbols/ and daemon/resolve.c: opening a file that a job's user names (the
 * binaries a process maps, the debug files their .gnu_debuglink and build-id point to, the
 * process's environment and LD_LIBRARY_PATH entries) the way that user could, without ever
 * blocking the caller for long. ffmd runs as root; a plain open would follow the user's
 * links to any file or device, and a FIFO or a stalled FUSE file system would hold its loop.
 *
 * How: each open runs in a short-lived helper thread that takes the process's file-system
 * credentials (fsuid, fsgid, supplementary groups, as /proc/PID/status gave them when the
 * address space was made) with the raw syscalls SYS_setgroups, SYS_setfsgid, SYS_setfsuid,
 * which change that thread only (glibc's setgroups would change every thread). Leaving fsuid 0
 * drops the file-system capabilities (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER...)
 * from the thread's effective set, so the kernel's own checks decide: modes, ACLs, search
 * rights on every directory, links followed as that user. Root's processes (uid 0) keep
 * root's credentials but everything else below applies to them too. A caller that is not root
 * (ffmctl profile run by a user) keeps its own credentials: it has no rights to lend.
 *
 * In the thread: an O_PATH open (no side effect of a device's open, no FIFO wait), S_ISREG,
 * then the reopen O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC through /proc/self/fd (the file
 * checked is the file opened). User-named paths are resolved with RESOLVE_NO_MAGICLINKS (no
 * /proc/PID/fd or /proc/PID/root jumps, which CAP_SYS_PTRACE would still allow); with
 * FFM_UOPEN_IN_ROOT the path is resolved inside @dirfd as its root (openat2 RESOLVE_IN_ROOT:
 * absolute links and ".." stay inside the process's root, also after the process exits).
 *
 * The caller waits FFM_USER_OPEN_DEADLINE_MS at most: past it the open fails with -ETIMEDOUT
 * and the thread is left to finish and close what it opened itself. At most
 * FFM_USER_OPEN_MAX_STUCK such threads may be out at once; beyond that opens fail at once with
 * -EAGAIN, so a stalled file system costs the caller one deadline per stuck thread, no more.
 * And per user: once the caller has waited 1 s in a 10 s window on that user's slow opens
 * (100 ms or more each), the user's opens fail at once with -EAGAIN until the window ends (a
 * server that answers just before each deadline cannot stall the caller file after file).
 *
 * FUSE (f_type FUSE_SUPER_MAGIC): the user's server could stall any later read, and the file is
 * mmapped and read by libelf/libdw on the caller's thread. Such a file is copied by the helper
 * thread, within the deadline and FFM_USER_OPEN_FUSE_MAX bytes, into a memfd that is returned
 * instead (its reads never reach the server again); larger ones fail with -EFBIG. Copying
 * rather than refusing keeps squashfuse-style container images (apptainer) symbolized.
 *
 * Credentials switching needs CAP_SETUID and CAP_SETGID; without them the open fails with
 * -EPERM (never falls back to root's rights).
 */
#ifndef FFM_SYMBOLS_USEROPEN_H
#define FFM_SYMBOLS_USEROPEN_H

#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#define FFM_USER_MAX_GROUPS 64 /* more supplementary groups are dropped (fewer rights) */
#define FFM_USER_OPEN_DEADLINE_MS 250
#define FFM_USER_OPEN_MAX_STUCK 4
#define FFM_USER_OPEN_FUSE_MAX (64u << 20)

struct ffm_user {
	uint32_t uid, gid; /* file-system ids */
	int ngroups;
	uint32_t groups[FFM_USER_MAX_GROUPS];
};

/* uid 0: root's own opens (paths ffm's own caller gave, root's processes). */
extern const struct ffm_user ffm_user_root;
/* The overflow user (65534, no groups): for a process whose credentials cannot be read. */
extern const struct ffm_user ffm_user_nobody;

/*
 * The fs credentials of @pid from <proc_root>/<pid>/status. On failure *u is
 * ffm_user_nobody and -errno is returned.
 */
int ffm_user_of_pid(const char *proc_root, pid_t pid, struct ffm_user *u);

enum {
	FFM_UOPEN_IN_ROOT = 1u << 0,   /* resolve @path inside @dirfd as the root directory */
	FFM_UOPEN_MAGICLINKS = 1u << 1, /* allow /proc magic links (ffm's own /proc paths only) */
};

/*
 * Open @path (relative to @dirfd, or AT_FDCWD) read-only as @u. Returns the fd or -errno:
 * -EINVAL not a regular file (-EISDIR a directory), -EACCES/-EPERM/-ELOOP/-ENOENT as the
 * kernel says for @u, -ETIMEDOUT past the deadline, -EAGAIN too many stuck opens or @u's
 * slow-open budget spent, -EFBIG a
 * FUSE file over the copy limit. @st (optional): the stat of the file opened (for a FUSE copy,
 * of the original file, not of the memfd).
 */
int ffm_user_open(const struct ffm_user *u, int dirfd, const char *path, unsigned flags,
		  struct stat *st);

/* Helper threads past their deadline that have not finished yet. */
int ffm_user_open_stuck(void);

/* Tests only: @hook runs in the helper thread before the open; a deadline other than the
 * default (0 = default). And, read from the environment of ffm's own process (never a job's),
 * FFM_TEST_OPEN_DELAY=SUFFIX:MS: each open of a path ending in SUFFIX is held MS in its helper
 * thread first, as on a stalled file system (and says so on stderr). */
void ffm_user_open__set_test_hook(void (*hook)(const char *path));
void ffm_user_open__set_deadline_ms(unsigned ms);

#endif
