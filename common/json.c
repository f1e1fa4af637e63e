/* SPDX-License-Identifier: MIT */
/* JSON through jansson: see ffm_json.h. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/ffm_json.h"

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

bool ffm_utf8_valid(const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");

	while (*p) {
		size_t n = utf8_len(p);

		if (!n)
			return false;
		p += n;
	}
	return true;
}

/*
 * The strings written are job ids, keys, paths and symbol names: any byte but NUL may be in
 * them (root can start a job with id "\xff\xfe"), while strict readers (Python's json, jq,
 * jansson) refuse a whole document over one byte that is not UTF-8. So each byte that does not
 * begin a well-formed sequence becomes U+FFFD (one per byte, decoding resumes at the next byte).
 * Not U+00XX: that would read back as a Latin-1 character the name never had, where U+FFFD
 * says plainly that a byte was not text. The text outputs print such names as they are.
 */
char *ffm_utf8_sanitize(const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	char *out = malloc(3 * strlen((const char *)p) + 1), *o = out;

	if (!out)
		return NULL;
	while (*p) {
		size_t n = utf8_len(p);

		if (n) {
			memcpy(o, p, n);
			o += n;
			p += n;
		} else {
			memcpy(o, "\xef\xbf\xbd", 3);
			o += 3;
			p++;
		}
	}
	*o = 0;
	return out;
}

json_t *ffm_json_string(const char *s)
{
	char *clean;
	json_t *v;

	if (!s)
		s = "";
	if (ffm_utf8_valid(s))
		return json_stringn_nocheck(s, strlen(s));
	clean = ffm_utf8_sanitize(s);
	if (!clean)
		return NULL;
	v = json_stringn_nocheck(clean, strlen(clean));
	free(clean);
	return v;
}

json_t *ffm_json_u64(uint64_t v)
{
	return v <= (uint64_t)INT64_MAX ? json_integer((json_int_t)v) : json_real((double)v);
}

json_t *ffm_json_fixed(double v, int decimals)
{
	double scale = pow(10, decimals), r;

	if (!isfinite(v))
		return json_null();
	r = round(v * scale) / scale;
	/* Past 2^53 the scaled value has no fraction left to round (and may overflow). */
	return json_real(isfinite(r) ? r : v);
}

json_t *ffm_json_append(json_t *arr, json_t *v)
{
	if (json_array_append_new(arr, v) < 0) { /* it has released @v */
		json_decref(arr);
		return NULL;
	}
	return arr;
}

json_t *ffm_json_set(json_t *obj, const char *key, json_t *v)
{
	if (json_object_set_new(obj, key, v) < 0) { /* it has released @v */
		json_decref(obj);
		return NULL;
	}
	return obj;
}

json_t *ffm_json_object_of(const struct ffm_json_kv *kv, size_t n)
{
	json_t *o = json_object();
	bool ok = o != NULL;

	for (size_t i = 0; i < n; i++) {
		if (!ok)
			json_decref(kv[i].v);
		else if (!kv[i].v || json_object_set_new(o, kv[i].key, kv[i].v) < 0)
			ok = false; /* json_object_set_new released the value */
	}
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

int ffm_json_print(FILE *f, json_t *v)
{
	int err = 0;

	if (!v)
		return -ENOMEM;
	if (json_dumpf(v, f, FFM_JSON_FLAGS) < 0 || fputc('\n', f) == EOF)
		err = ferror(f) ? -EIO : -ENOMEM;
	json_decref(v);
	return err;
}

int ffm_json_write_str(FILE *f, const char *s)
{
	json_t *v = ffm_json_string(s);
	int err = 0;

	if (!v)
		return -ENOMEM;
	if (json_dumpf(v, f, FFM_JSON_FLAGS | JSON_ENCODE_ANY) < 0)
		err = ferror(f) ? -EIO : -ENOMEM;
	json_decref(v);
	return err;
}

json_t *ffm_json_parse(const char *text, size_t len, json_error_t *err)
{
	json_error_t dummy;

	return json_loadb(text, len, JSON_DECODE_ANY, err ? err : &dummy);
}
