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
 * SIGHUP re-reads cfg->config_path (see apply_config in server.c).
 */
int ffmd__run(struct ffmd *d);
struct ffmd *ffmd__free(struct ffmd *d);

#endif
