/* SPDX-License-Identifier: MIT */
/*
 * ffmd's configuration: what /etc/ffm/ffmd.conf (daemon/config.c) and the command line give
 * the daemon, and the job selectors that rules and job-start requests share. Types only and
 * the file's reader: what the daemon does with them is daemon/server.h's business.
 */
#ifndef FFM_CONFIG_H
#define FFM_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bpf/ffm.h"
#include "daemon/recorder.h"

/*
 * A [rule NAME] holds one of the FFM_MAX_JOBS BPF job slots for as long as it is configured,
 * and every job (by request, or a process a rule matched) needs one more. With as many rules
 * as slots no job could ever start, so the config may name at most half as many rules: the
 * other half stays for jobs (systemd/ffmd.conf says so too).
 */
#define FFM_MAX_RULES (FFM_MAX_JOBS / 2)
#define FFM_MAX_SELECTORS 32

enum ffm_sel_type { FFM_SEL_CGROUP, FFM_SEL_PID, FFM_SEL_UID, FFM_SEL_EXE };

struct ffm_selector {
	enum ffm_sel_type type;
	char value[1024]; /* cgroup path, pid, uid or executable path as given */
};

/* A selector type's name as requests, the journal and the status say it ("cgroup", "pid",
 * "uid", "exe"), and back: -EINVAL for another name. */
const char *ffm_selector_name(enum ffm_sel_type t);
int ffm_selector_type(const char *name, enum ffm_sel_type *t);

#define FFMD_DEFAULT_CONFIG "/etc/ffm/ffmd.conf"
#define FFMD_DEFAULT_STATE_DIR "/var/lib/ffm"
#define FFM_MAX_TRUSTED_DIRS 16
#define FFM_TRUSTED_DIRS_MAX 4096 /* the setting's length */

struct ffmd_config {
	char config_path[4096];   /* the file read ("" = none); SIGHUP reads it again */
	char state_dir[4096];
	char runtime_dir[4096];
	char admin_group[64];     /* members may start/end jobs and see all of them */
	char metrics_dir[4096];   /* Prometheus textfile directory ("" = no metrics) */
	/* directories whose root-owned drivers are trusted on any file system (driver_setup.h) */
	char trusted_driver_dirs[FFM_TRUSTED_DIRS_MAX];
	bool create_state_dir;    /* --create: make a missing state directory */
	uint32_t flush_ms;        /* store flush period */
	uint32_t wakeup_kib;      /* ring buffer bytes pending before BPF wakes ffmd */
	uint32_t ringbuf_kib;     /* ring buffer size (power of two, >= 64); 0 = default 64 MiB */
	bool system_scope;        /* probe_scope = system: uprobes system-wide, not per process */
	bool analysis_on_read;    /* analysis = reader: no analysis at a run's end on the node */
	double sample_budget;     /* adaptive stage 1: fraction of a process's time (0: trace all) */
	double wait_cost_us;      /* one traced wait's cost to a process on this node */
	/* Resource bounds per job and user (daemon/config.c's second table; docs/SECURITY.md):
	 * what a job's run may take (the stores' bytes in MiB in the file), how long one consume
	 * of the ring buffer may hold the loop, how many processes one user may have tracked. */
	struct ffm_run_limits limits;
	uint32_t consume_ms;
	uint32_t user_procs;
	/* [rule NAME] sections: processes matching them become jobs of their own. */
	struct ffmd_rule {
		char name[64];
		char key[128];    /* "" = derived from uid + executable + arguments */
		int stage;        /* 0 = the plan decides */
		int nsel;
		struct ffm_selector sel[FFM_MAX_SELECTORS];
	} rules[FFM_MAX_RULES];
	int nrules;
};

/* Defaults, then @path (NULL: no file). -errno; @err gets "file:line: reason". */
int ffmd_config_load(struct ffmd_config *cfg, const char *path, char *err, size_t errlen);

#endif
