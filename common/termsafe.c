// SPDX-License-Identifier: MIT
/* Escaping control characters on the way to a terminal: common/termsafe.h. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/termsafe.h"

/* The escaper's state between writes: a 0xc2 lead byte waits for the byte that follows it. */
struct esc {
	bool held_c2;
	int need;    /* continuation bytes still expected */
};

static const char hex[] = "0123456789abcdef";

/* Escape one byte into @out (at least 7 bytes); returns the bytes written. */
static size_t esc_byte(struct esc *e, uint8_t b, char *out)
{
	size_t n = 0;

	if (e->held_c2) {
		e->held_c2 = false;
		if (b >= 0x80 && b <= 0x9f) { /* U+0080-U+009F: a C1 control */
			e->need = 0;
			memcpy(out, "\\u00", 4);
			out[4] = hex[b >> 4];
			out[5] = hex[b & 15];
			return 6;
		}
		out[n++] = (char)0xc2; /* another character: the lead goes out as it came */
	}
	if (b >= 0x80 && b <= 0xbf) {
		if (e->need > 0) {
			e->need--;
			out[n++] = (char)b;
			return n;
		}
		if (b <= 0x9f) { /* a lone 8-bit C1 control */
			out[n++] = '\\';
			out[n++] = 'x';
			out[n++] = hex[b >> 4];
			out[n++] = hex[b & 15];
		} else {
			out[n++] = (char)b;
		}
		return n;
	}
	e->need = 0;
	if (b == 0xc2) {
		e->held_c2 = true;
		e->need = 1;
		return n;
	}
	if (b >= 0xc3 && b <= 0xf4) {
		e->need = b >= 0xf0 ? 3 : b >= 0xe0 ? 2 : 1;
		out[n++] = (char)b;
		return n;
	}
	if (b < 0x20 && b != '\n' && b != '\t') {
		out[n++] = '\\';
		out[n++] = 'x';
		out[n++] = hex[b >> 4];
		out[n++] = hex[b & 15];
		return n;
	}
	out[n++] = (char)b;
	return n;
}

struct esc_stream {
	int fd;
	struct esc e;
};

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static ssize_t esc_write(void *cookie, const char *buf, size_t size)
{
	struct esc_stream *s = cookie;
	char out[4096];
	size_t o = 0;

	for (size_t i = 0; i < size; i++) {
		if (o + 8 > sizeof(out)) {
			if (write_all(s->fd, out, o) < 0)
				return -1;
			o = 0;
		}
		o += esc_byte(&s->e, (uint8_t)buf[i], out + o);
	}
	if (o && write_all(s->fd, out, o) < 0)
		return -1;
	return (ssize_t)size;
}

static int esc_close(void *cookie)
{
	struct esc_stream *s = cookie;
	int ret = 0;

	if (s->e.held_c2) /* a lead byte that nothing followed: out as it came */
		ret = write_all(s->fd, "\xc2", 1);
	free(s);
	return ret;
}

FILE *ffm_termsafe_stream(int fd, int mode)
{
	struct esc_stream *s = calloc(1, sizeof(*s));
	FILE *f;

	if (!s)
		return NULL;
	s->fd = fd;
	f = fopencookie(s, "w", (cookie_io_functions_t){ .write = esc_write, .close = esc_close });
	if (!f) {
		free(s);
		return NULL;
	}
	if (setvbuf(f, NULL, mode, BUFSIZ)) {
		fclose(f);
		errno = ENOMEM;
		return NULL;
	}
	return f;
}

char *ffm_termsafe_str(const char *s, char *buf, size_t len)
{
	struct esc e = { 0 };
	size_t o = 0;
	char one[8];

	if (!len)
		return buf;
	for (const uint8_t *p = (const uint8_t *)(s ? s : ""); *p; p++) {
		size_t n = esc_byte(&e, *p, one);

		if (o + n >= len)
			break;
		memcpy(buf + o, one, n);
		o += n;
	}
	if (e.held_c2 && o + 1 < len)
		buf[o++] = (char)0xc2;
	buf[o] = '\0';
	return buf;
}
