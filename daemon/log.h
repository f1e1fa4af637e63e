/* SPDX-License-Identifier: MIT */
/*
 * Logging for ffmd and sd_notify. Messages go to stderr; under systemd (JOURNAL_STREAM set)
 * each line carries a "<N>" syslog priority prefix so the journal keeps the level.
 */
#ifndef FFM_LOG_H
#define FFM_LOG_H

#include <syslog.h>

void ffm_log(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define log_err(...) ffm_log(LOG_ERR, __VA_ARGS__)
#define log_warn(...) ffm_log(LOG_WARNING, __VA_ARGS__)
#define log_info(...) ffm_log(LOG_INFO, __VA_ARGS__)
#define log_debug(...) ffm_log(LOG_DEBUG, __VA_ARGS__)
extern int ffm_log_level;

/* sd_notify(3): libsystemd's when linked, else the documented datagram protocol itself
 * (static builds have no libsystemd). No-op without $NOTIFY_SOCKET. */
int ffm_notify(const char *state);
/* WatchdogSec in microseconds, 0 when the watchdog is off (sd_watchdog_enabled(3)). */
unsigned long long ffm_watchdog_usec(void);

#endif
