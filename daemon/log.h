/* SPDX-License-Identifier: MIT */
/*
 * Logging for ffmd and sd_notify. Messages go to stderr; under systemd (JOURNAL_STREAM set)
 * each line carries a "<N>" syslog priority prefix so the journal keeps the level.
 */
#ifndef FFM_LOG_H
#define FFM_LOG_H

#include <stdarg.h>
#include <syslog.h>

#include <bpf/libbpf.h>

void ffm_log(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define log_err(...) ffm_log(LOG_ERR, __VA_ARGS__)
#define log_warn(...) ffm_log(LOG_WARNING, __VA_ARGS__)
#define log_info(...) ffm_log(LOG_INFO, __VA_ARGS__)
#define log_debug(...) ffm_log(LOG_DEBUG, __VA_ARGS__)
extern int ffm_log_level;

/* libbpf's messages (libbpf_set_print) as ffmd's debug lines: shown with --verbose only. They
 * tell of attempts ffmd may then make another way (on a node without tracefs mounted, the map
 * guard's tracepoint fails once, 2 lines of "libbpf: ... No such file or directory" at every
 * start, before ffmd mounts tracefs and attaches it), and ffmd says in its own words what
 * failed for good. libbpf's own debug level (the verifier's log, every map) stays out. */
int ffm_log_libbpf(enum libbpf_print_level level, const char *fmt, va_list ap);

/* sd_notify(3): libsystemd's when linked, else the documented datagram protocol itself
 * (static builds have no libsystemd). No-op without $NOTIFY_SOCKET. */
int ffm_notify(const char *state);
/* WatchdogSec in microseconds, 0 when the watchdog is off (sd_watchdog_enabled(3)). */
unsigned long long ffm_watchdog_usec(void);

#endif
