/* SPDX-License-Identifier: MIT */
/*
 * ffmd's core: jobs, drivers, the collector and the control socket behind one event loop.
 * daemon/ffmd.c parses the command line and the config (daemon/config.h), then runs this.
 * How the core is cut into files: daemon/ffmd_int.h.
 */
#ifndef FFM_SERVER_H
#define FFM_SERVER_H

#include "daemon/config.h"

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
