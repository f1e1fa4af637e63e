/* SPDX-License-Identifier: MIT */
/*
 * The little JSON ffmctl needs: a strict RFC 8259 reader for ffmd's status answer (a tree of
 * values, depth at most FFM_JSON_MAX_DEPTH, any input either parses or is refused with a
 * reason, never read past its length) and a string writer for the verbs that print JSON.
 */
#ifndef FFM_JSON_H
#define FFM_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define FFM_JSON_MAX_DEPTH 64

enum ffm_json_type {
	FFM_JSON_NULL,
	FFM_JSON_BOOL,
	FFM_JSON_NUMBER,
	FFM_JSON_STRING,
	FFM_JSON_ARRAY,
	FFM_JSON_OBJECT,
};

struct ffm_json;

/* Parse @len bytes; *ret is the root (free with ffm_json__free). -EINVAL with @err (a static
 * string) and @err_off (byte offset) on malformed input, -ENOMEM. */
int ffm_json__parse(const char *text, size_t len, struct ffm_json **ret, const char **err,
		    size_t *err_off);
struct ffm_json *ffm_json__free(struct ffm_json *root);

/* Accessors: NULL-safe, and a value of another type gives the default. */
enum ffm_json_type ffm_json_type(const struct ffm_json *v);
const struct ffm_json *ffm_json_get(const struct ffm_json *obj, const char *name);
size_t ffm_json_len(const struct ffm_json *v); /* elements of an array or members of an object */
const struct ffm_json *ffm_json_at(const struct ffm_json *arr, size_t i);
/* The member name of a value inside an object, "" otherwise. */
const char *ffm_json_key(const struct ffm_json *v);
const char *ffm_json_str(const struct ffm_json *v, const char *dflt);
double ffm_json_num(const struct ffm_json *v, double dflt);
bool ffm_json_bool(const struct ffm_json *v, bool dflt);

/*
 * Write @s as a JSON string literal (quotes, escapes); NULL writes "". Any bytes give valid
 * JSON: those that are not well-formed UTF-8 are written as U+FFFD (cli/json.c says why).
 */
void ffm_json_write_str(FILE *f, const char *s);

#endif
