/* SPDX-License-Identifier: MIT */
/*
 * JSON through jansson, the one way every part of ffm reads and writes it: the values ffm builds
 * from names it did not choose (job ids, keys, paths, symbol names: any bytes but NUL), the one
 * set of dump flags, the reader of text from elsewhere (ffmd's answers, the calibration cache)
 * and NULL-safe accessors with defaults.
 *
 * JSON text is Unicode exchanged as UTF-8 (RFC 8259, 8.1) and jansson refuses a string that is
 * not well-formed UTF-8, so names go through ffm_json_string: well-formed UTF-8 is kept as it
 * is and each byte that does not begin a well-formed sequence becomes U+FFFD (common/json.c
 * says why). Where a document is too large to hold (the chrome-trace export), ffm_json_write_str
 * writes one string value with the same sanitising and jansson's escaping.
 */
#ifndef FFM_JSON_H
#define FFM_JSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/*
 * Every dump: no spaces, members in the order they were set, reals with 15 significant digits
 * (a value rounded by ffm_json_fixed prints as the decimal it was rounded to, 0.1 as 0.1).
 */
#define FFM_JSON_FLAGS (JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15))

/* Well-formed UTF-8 (RFC 3629: no overlong form, no surrogate, nothing above U+10FFFF)? */
bool ffm_utf8_valid(const char *s);
/* A malloc'd copy of @s (NULL: "") with each byte that begins no well-formed UTF-8 sequence
 * replaced by U+FFFD; NULL when out of memory. */
char *ffm_utf8_sanitize(const char *s);

/* A string value for any bytes (NULL: ""), sanitised as above; NULL when out of memory. */
json_t *ffm_json_string(const char *s);
/* An integer value; one above INT64_MAX (jansson's integers are signed) becomes a real. */
json_t *ffm_json_u64(uint64_t v);
/* A real rounded to @decimals places (what "%.<decimals>f" printed); null if not finite. */
json_t *ffm_json_fixed(double v, int decimals);

/* Append @v to the array @arr (either may be NULL) and return @arr; when that fails both are
 * released and NULL is returned, so a chain of appends ends in NULL if memory ran out once. */
json_t *ffm_json_append(json_t *arr, json_t *v);

/* Set member @key of the object @obj to @v (either may be NULL) and return @obj; the same way
 * as ffm_json_append when that fails. */
json_t *ffm_json_set(json_t *obj, const char *key, json_t *v);

/*
 * An object built from (key, value) pairs that the compiler checks: each value is a json_t *
 * (ffm_json_int, ffm_json_u64, json_string, ...), so a key cannot lose its value as in a long
 * json_pack format. Every value is taken (released if the object cannot be made); a NULL value
 * (out of memory) makes the whole object NULL. Keys keep their order.
 *     FFM_JSON_OBJ({ "a", ffm_json_int(1) }, { "b", json_true() })
 */
struct ffm_json_kv {
	const char *key;
	json_t *v;
};
json_t *ffm_json_object_of(const struct ffm_json_kv *kv, size_t n);
#define FFM_JSON_OBJ(...)                                                                   \
	ffm_json_object_of((const struct ffm_json_kv[]){ __VA_ARGS__ },                     \
			   sizeof((const struct ffm_json_kv[]){ __VA_ARGS__ }) /            \
				   sizeof(struct ffm_json_kv))
/* A signed integer value. */
static inline json_t *ffm_json_int(int64_t v)
{
	return json_integer((json_int_t)v);
}

/* Dump @v with FFM_JSON_FLAGS and a newline to @f, then release @v (NULL: -ENOMEM, nothing
 * written). 0, -ENOMEM or -EIO. */
int ffm_json_print(FILE *f, json_t *v);
/* Write @s (NULL: "") as one JSON string, quotes included: for writers that stream. */
int ffm_json_write_str(FILE *f, const char *s);

/*
 * Parse @len bytes (no NUL needed) holding one JSON value of any type: NULL with @err's text and
 * position (a byte offset) on malformed input. Strings with \u0000 are refused, nesting is
 * bounded (JSON_PARSER_MAX_DEPTH), numbers that do not fit a double or an int64 are refused.
 */
json_t *ffm_json_parse(const char *text, size_t len, json_error_t *err);

/* Accessors: a value of another type, or NULL, gives the default. */
static inline const char *ffm_json_str(const json_t *v, const char *dflt)
{
	const char *s = json_string_value(v);

	return s ? s : dflt;
}

static inline double ffm_json_num(const json_t *v, double dflt)
{
	return json_is_number(v) ? json_number_value(v) : dflt;
}

static inline bool ffm_json_bool(const json_t *v, bool dflt)
{
	return json_is_boolean(v) ? json_is_true(v) : dflt;
}

/* The same for member @key of the object @obj. */
static inline const char *ffm_json_get_str(const json_t *obj, const char *key, const char *dflt)
{
	return ffm_json_str(json_object_get(obj, key), dflt);
}

static inline double ffm_json_get_num(const json_t *obj, const char *key, double dflt)
{
	return ffm_json_num(json_object_get(obj, key), dflt);
}

static inline bool ffm_json_get_bool(const json_t *obj, const char *key, bool dflt)
{
	return ffm_json_bool(json_object_get(obj, key), dflt);
}

#endif
