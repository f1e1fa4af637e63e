/* SPDX-License-Identifier: MIT */
/*
 * ffmd's core: jobs, drivers, the collector and the control socket behind one event loop.
 * daemon/ffmd.c parses the command line and the config, then runs this.
 */
#ifndef FFM_SERVER_H
#define FFM_SERVER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "bpf/ffm.h"

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

struct ffmd_config {
	char config_path[4096];   /* the file read ("" = none); SIGHUP reads it again */
	char state_dir[4096];
	char runtime_dir[4096];
	char admin_group[64];     /* members may start/end jobs and see all of them */
	uint32_t flush_ms;        /* store flush period */
	uint32_t wakeup_kib;      /* ring buffer bytes pending before BPF wakes ffmd */
	uint32_t ringbuf_kib;     /* ring buffer size (power of two, >= 64); 0 = default 64 MiB */
	bool system_scope;        /* probe_scope = system: uprobes system-wide, not per process */
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

struct ffmd;

int ffmd__new(const struct ffmd_config *cfg, struct ffmd **ret);
/*
 * The event loop; returns when SIGTERM/SIGINT arrives (0) or on a fatal error (-errno).
 * SIGHUP re-reads cfg->config_path (see ffmd__reload).
 */
int ffmd__run(struct ffmd *d);
/*
 * Apply @cfg to a running daemon: rules are replaced (an unchanged rule keeps its slot; a
 * removed one stops matching new processes, the jobs it created run on), flush_ms and
 * admin_group take effect; state_dir, runtime_dir and the ring buffer settings need a restart. Active jobs keep running and no record is lost. -errno if a rule cannot be applied
 * (the old rules then stay).
 */
int ffmd__reload(struct ffmd *d, const struct ffmd_config *cfg);
struct ffmd *ffmd__free(struct ffmd *d);

#endif
