/* SPDX-License-Identifier: MIT */
/*
 * Text that is safe to show on a terminal. Names a job's user controls (job ids, keys, paths,
 * function and file names read from their binaries) reach ffmctl's output; a name holding
 * "ESC ]2;...BEL" or "ESC [2J" would retitle or clear the terminal of whoever reads the
 * report, root included. Every control character is written as an escape, as systemd does:
 *   C0 (0x00-0x1f) but newline and tab           ->  \xHH
 *   C1 as UTF-8 (U+0080-U+009F)                  ->  \u00HH   (the same character in JSON)
 *   a lone byte 0x80-0x9f (an 8-bit C1 control)  ->  \xHH
 * Everything else, UTF-8 included, passes as it is. JSON output is unchanged by this: jansson
 * writes no raw C0 character and \u00HH is JSON's own escape of a C1 character (inside a string,
 * where alone they can occur). DEL (0x7f) passes: terminals ignore it, and jansson writes it
 * raw inside strings, where \x7f would not be JSON.
 */
#ifndef FFM_TERMSAFE_H
#define FFM_TERMSAFE_H

#include <stddef.h>
#include <stdio.h>

/*
 * A stream that writes to @fd (not closed by fclose) with every control character escaped
 * as above; @mode is setvbuf's (_IOFBF, _IOLBF, _IONBF). NULL with errno set on failure.
 */
FILE *ffm_termsafe_stream(int fd, int mode);

/*
 * @s (NULL: "") escaped into @buf of @len bytes, always NUL-terminated when @len > 0, cut at
 * an escape's boundary; returns @buf.
 */
char *ffm_termsafe_str(const char *s, char *buf, size_t len);

#endif
