/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/json.h"

struct ffm_json {
	enum ffm_json_type type;
	char *key;		/* member name inside an object */
	struct ffm_json *first; /* children of an array/object, in order */
	struct ffm_json *last;
	struct ffm_json *next;
	size_t n;
	double num;
	bool b;
	char *str;
};

struct parser {
	const char *s;
	size_t len, pos;
	const char *err;
};

static void skip_ws(struct parser *p)
{
	while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' ||
				   p->s[p->pos] == '\n' || p->s[p->pos] == '\r'))
		p->pos++;
}

static int fail(struct parser *p, const char *why)
{
	p->err = why;
	return -EINVAL;
}

static int hex4(struct parser *p, uint32_t *out)
{
	uint32_t v = 0;

	if (p->len - p->pos < 4)
		return fail(p, "truncated \\u escape");
	for (int i = 0; i < 4; i++) {
		char c = p->s[p->pos++];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (uint32_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (uint32_t)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (uint32_t)(c - 'A' + 10);
		else
			return fail(p, "bad hex digit in \\u escape");
	}
	*out = v;
	return 0;
}

static size_t put_utf8(char *o, uint32_t cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | cp >> 6);
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | cp >> 12);
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | cp >> 18);
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* At the opening quote. The decoded string is never longer than its source. */
static int parse_string(struct parser *p, char **out)
{
	size_t start = ++p->pos, o = 0;
	char *buf;

	while (p->pos < p->len && p->s[p->pos] != '"')
		p->pos += p->s[p->pos] == '\\' && p->pos + 1 < p->len ? 2 : 1;
	if (p->pos >= p->len)
		return fail(p, "unterminated string");
	buf = malloc(p->pos - start + 1);
	if (!buf)
		return -ENOMEM;
	p->pos = start;
	while (p->s[p->pos] != '"') {
		unsigned char c = (unsigned char)p->s[p->pos++];
		uint32_t cp, lo;

		if (c < 0x20) {
			free(buf);
			return fail(p, "control character in string");
		}
		if (c != '\\') {
			buf[o++] = (char)c;
			continue;
		}
		c = (unsigned char)p->s[p->pos++];
		switch (c) {
		case '"': case '\\': case '/':
			buf[o++] = (char)c;
			break;
		case 'b': buf[o++] = '\b'; break;
		case 'f': buf[o++] = '\f'; break;
		case 'n': buf[o++] = '\n'; break;
		case 'r': buf[o++] = '\r'; break;
		case 't': buf[o++] = '\t'; break;
		case 'u':
			if (hex4(p, &cp) < 0)
				goto bad;
			/* A surrogate pair is one code point; a lone surrogate becomes U+FFFD. */
			if (cp >= 0xd800 && cp < 0xdc00 && p->len - p->pos >= 6 &&
			    p->s[p->pos] == '\\' && p->s[p->pos + 1] == 'u') {
				size_t save = p->pos;

				p->pos += 2;
				if (hex4(p, &lo) < 0)
					goto bad;
				if (lo >= 0xdc00 && lo < 0xe000)
					cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				else
					p->pos = save;
			}
			if (cp >= 0xd800 && cp < 0xe000)
				cp = 0xfffd;
			/* \uXXXX is 6 source bytes and yields at most 3; a pair 12 -> 4. */
			o += put_utf8(buf + o, cp);
			break;
		default:
			fail(p, "bad escape in string");
			goto bad;
		}
	}
	p->pos++;
	buf[o] = 0;
	*out = buf;
	return 0;
bad:
	free(buf);
	return -EINVAL;
}

static int parse_number(struct parser *p, double *out)
{
	size_t start = p->pos;
	char tmp[64];

	/* RFC 8259 grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
	if (p->pos < p->len && p->s[p->pos] == '-')
		p->pos++;
	if (p->pos < p->len && p->s[p->pos] == '0') {
		p->pos++;
	} else if (p->pos < p->len && p->s[p->pos] >= '1' && p->s[p->pos] <= '9') {
		while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
			p->pos++;
	} else {
		return fail(p, "bad number");
	}
	if (p->pos < p->len && p->s[p->pos] == '.') {
		p->pos++;
		if (p->pos >= p->len || p->s[p->pos] < '0' || p->s[p->pos] > '9')
			return fail(p, "bad number: no digit after '.'");
		while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
			p->pos++;
	}
	if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
		p->pos++;
		if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-'))
			p->pos++;
		if (p->pos >= p->len || p->s[p->pos] < '0' || p->s[p->pos] > '9')
			return fail(p, "bad number: no exponent digits");
		while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
			p->pos++;
	}
	if (p->pos - start >= sizeof(tmp))
		return fail(p, "number too long");
	memcpy(tmp, p->s + start, p->pos - start);
	tmp[p->pos - start] = 0;
	*out = strtod(tmp, NULL);
	return 0;
}

static int lit(struct parser *p, const char *word)
{
	size_t n = strlen(word);

	if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n))
		return fail(p, "unexpected character");
	p->pos += n;
	return 0;
}

static void add_child(struct ffm_json *parent, struct ffm_json *c)
{
	if (parent->last)
		parent->last->next = c;
	else
		parent->first = c;
	parent->last = c;
	parent->n++;
}

static int parse_value(struct parser *p, int depth, struct ffm_json **ret);

static int parse_container(struct parser *p, int depth, struct ffm_json *v)
{
	bool obj = v->type == FFM_JSON_OBJECT;
	char close = obj ? '}' : ']';
	int err;

	p->pos++;
	skip_ws(p);
	if (p->pos < p->len && p->s[p->pos] == close) {
		p->pos++;
		return 0;
	}
	for (;;) {
		struct ffm_json *c = NULL;
		char *key = NULL;

		skip_ws(p);
		if (obj) {
			if (p->pos >= p->len || p->s[p->pos] != '"')
				return fail(p, "expected a member name");
			if ((err = parse_string(p, &key)) < 0)
				return err;
			skip_ws(p);
			if (p->pos >= p->len || p->s[p->pos] != ':') {
				free(key);
				return fail(p, "expected ':'");
			}
			p->pos++;
		}
		err = parse_value(p, depth + 1, &c);
		if (err < 0) {
			free(key);
			return err;
		}
		c->key = key;
		add_child(v, c);
		skip_ws(p);
		if (p->pos < p->len && p->s[p->pos] == ',') {
			p->pos++;
			continue;
		}
		if (p->pos < p->len && p->s[p->pos] == close) {
			p->pos++;
			return 0;
		}
		return fail(p, obj ? "expected ',' or '}'" : "expected ',' or ']'");
	}
}

static int parse_value(struct parser *p, int depth, struct ffm_json **ret)
{
	struct ffm_json *v;
	int err = 0;

	if (depth > FFM_JSON_MAX_DEPTH)
		return fail(p, "nested too deeply");
	skip_ws(p);
	if (p->pos >= p->len)
		return fail(p, "unexpected end of input");
	v = calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	switch (p->s[p->pos]) {
	case '{':
		v->type = FFM_JSON_OBJECT;
		err = parse_container(p, depth, v);
		break;
	case '[':
		v->type = FFM_JSON_ARRAY;
		err = parse_container(p, depth, v);
		break;
	case '"':
		v->type = FFM_JSON_STRING;
		err = parse_string(p, &v->str);
		break;
	case 't':
		v->type = FFM_JSON_BOOL;
		v->b = true;
		err = lit(p, "true");
		break;
	case 'f':
		v->type = FFM_JSON_BOOL;
		err = lit(p, "false");
		break;
	case 'n':
		v->type = FFM_JSON_NULL;
		err = lit(p, "null");
		break;
	default:
		v->type = FFM_JSON_NUMBER;
		err = parse_number(p, &v->num);
	}
	if (err < 0) {
		ffm_json__free(v);
		return err;
	}
	*ret = v;
	return 0;
}

int ffm_json__parse(const char *text, size_t len, struct ffm_json **ret, const char **err,
		    size_t *err_off)
{
	struct parser p = { .s = text, .len = len };
	struct ffm_json *v = NULL;
	int r;

	*ret = NULL;
	r = parse_value(&p, 0, &v);
	if (!r) {
		skip_ws(&p);
		if (p.pos != p.len) {
			ffm_json__free(v);
			r = fail(&p, "trailing data after the value");
		}
	}
	if (r < 0) {
		if (err)
			*err = r == -ENOMEM ? "out of memory" : p.err;
		if (err_off)
			*err_off = p.pos;
		return r;
	}
	*ret = v;
	return 0;
}

struct ffm_json *ffm_json__free(struct ffm_json *v)
{
	/* Iterative over siblings, recursive only in depth (bounded by the parser). */
	while (v) {
		struct ffm_json *next = v->next;

		ffm_json__free(v->first);
		free(v->key);
		free(v->str);
		free(v);
		v = next;
	}
	return NULL;
}

enum ffm_json_type ffm_json_type(const struct ffm_json *v)
{
	return v ? v->type : FFM_JSON_NULL;
}

const struct ffm_json *ffm_json_get(const struct ffm_json *obj, const char *name)
{
	if (!obj || obj->type != FFM_JSON_OBJECT)
		return NULL;
	for (const struct ffm_json *c = obj->first; c; c = c->next)
		if (!strcmp(c->key, name))
			return c;
	return NULL;
}

size_t ffm_json_len(const struct ffm_json *v)
{
	return v && (v->type == FFM_JSON_ARRAY || v->type == FFM_JSON_OBJECT) ? v->n : 0;
}

const struct ffm_json *ffm_json_at(const struct ffm_json *arr, size_t i)
{
	const struct ffm_json *c;

	if (!arr || (arr->type != FFM_JSON_ARRAY && arr->type != FFM_JSON_OBJECT))
		return NULL;
	for (c = arr->first; c && i; c = c->next)
		i--;
	return c;
}

const char *ffm_json_key(const struct ffm_json *v)
{
	return v && v->key ? v->key : "";
}

const char *ffm_json_str(const struct ffm_json *v, const char *dflt)
{
	return v && v->type == FFM_JSON_STRING ? v->str : dflt;
}

double ffm_json_num(const struct ffm_json *v, double dflt)
{
	return v && v->type == FFM_JSON_NUMBER && isfinite(v->num) ? v->num : dflt;
}

bool ffm_json_bool(const struct ffm_json *v, bool dflt)
{
	return v && v->type == FFM_JSON_BOOL ? v->b : dflt;
}

/*
 * Length of the well-formed UTF-8 sequence at @s (RFC 3629: no overlong form, no surrogate,
 * nothing above U+10FFFF), 0 if none starts there. Reads past s[0] only while the bytes so
 * far fit, so never past the string's NUL.
 */
static size_t utf8_len(const unsigned char *s)
{
	unsigned char lo = 0x80, hi = 0xbf;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		return (s[1] & 0xc0) == 0x80 ? 2 : 0;
	if (s[0] >= 0xe0 && s[0] <= 0xef) {
		if (s[0] == 0xe0)
			lo = 0xa0; /* overlong below */
		else if (s[0] == 0xed)
			hi = 0x9f; /* U+D800..U+DFFF: surrogates */
		return s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80 ? 3 : 0;
	}
	if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		if (s[0] == 0xf0)
			lo = 0x90; /* overlong below */
		else if (s[0] == 0xf4)
			hi = 0x8f; /* above U+10FFFF */
		return s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80 &&
		       (s[3] & 0xc0) == 0x80 ? 4 : 0;
	}
	return 0;
}

/*
 * Valid JSON for any byte string. The strings written are job ids, keys, paths and symbol
 * names: any byte but NUL may be in them (root can start a job with id "\xff\xfe"), while
 * JSON text is Unicode, exchanged as UTF-8 (RFC 8259, 8.1), and strict readers (Python's json,
 * jq) refuse the whole document over one bad byte. So well-formed UTF-8 is written as it is,
 * and each byte that does not begin a well-formed sequence becomes U+FFFD, written "\ufffd"
 * (one per byte, decoding resumes at the next byte). Not "\u00XX": that would read back as a
 * Latin-1 character the name never had, where U+FFFD says plainly that a byte was not text.
 * The text output prints such names as they are. Streamed to @f: no length limit.
 */
void ffm_json_write_str(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");

	fputc('"', f);
	while (*p) {
		size_t n = utf8_len(p);
		unsigned char c = *p;

		if (!n) {
			fputs("\\ufffd", f);
			p++;
		} else if (n > 1) {
			fwrite(p, 1, n, f);
			p += n;
		} else {
			if (c == '"' || c == '\\')
				fprintf(f, "\\%c", c);
			else if (c < 0x20 || c == 0x7f)
				fprintf(f, "\\u%04x", c);
			else
				fputc(c, f);
			p++;
		}
	}
	fputc('"', f);
}
