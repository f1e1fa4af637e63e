/* SPDX-License-Identifier: MIT */
/* C++ names: demangling through libstdc++'s __cxa_demangle and the folded-function key. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "symbols/ffm_stack.h"

/* From libstdc++ (linked in); declared here so the library stays C. */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *n, int *status);

char *ffm_demangle(const char *name)
{
	int status = 0;
	char *d;

	if (!name || strncmp(name, "_Z", 2))
		return NULL;
	d = __cxa_demangle(name, NULL, NULL, &status);
	if (status) {
		free(d);
		return NULL;
	}
	return d;
}

/* Placeholders for the operator characters that would confuse the bracket matching. */
enum { PH_LT = 1, PH_GT, PH_LP, PH_RP };

static bool ident_char(char c)
{
	return isalnum((unsigned char)c) || c == '_' || c == '$';
}

/* Length of the operator token after "operator" at @p (0 when none recognized). */
static size_t op_token(const char *p)
{
	static const char *const ops[] = {
		"<<=", ">>=", "->*", "<=>", "()", "[]", "<<", ">>", "<=", ">=", "->", "==", "!=",
		"&&", "||", "++", "--", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<", ">",
		"+", "-", "*", "/", "%", "^", "&", "|", "~", "!", "=", ",",
	};
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (!strncmp(p, ops[i], strlen(ops[i])))
			return strlen(ops[i]);
	return 0;
}

/* The characters PH_LT..PH_RP stand for, in that order. */
static const char ph_chars[] = "<>()";

static char ph(char c)
{
	const char *p = c ? strchr(ph_chars, c) : NULL;

	return p ? (char)(PH_LT + (p - ph_chars)) : c;
}

static char unph(char c)
{
	return c >= PH_LT && c <= PH_RP ? ph_chars[c - PH_LT] : c;
}

static bool ends_with(const char *s, size_t n, const char *suf)
{
	size_t l = strlen(suf);

	return n >= l && !memcmp(s + n - l, suf, l);
}

/* Is "operator" at s[i] a keyword (not part of a longer identifier)? */
static bool is_operator_kw(const char *s, size_t i)
{
	return !strncmp(s + i, "operator", 8) && (i == 0 || !ident_char(s[i - 1])) &&
	       !ident_char(s[i + 8]);
}

/* The steps of ffm_fold_function, in order: each reads a string of the length given and writes
 * what it keeps into a buffer at least as long (or edits it in place), NUL-terminated, and
 * returns the length it kept. */

/* 1. Template arguments dropped; the characters of operator tokens protected (ph). */
static size_t drop_template_args(const char *in, size_t n, char *t)
{
	size_t o = 0;

	for (size_t i = 0; i < n;) {
		if (is_operator_kw(in, i)) {
			size_t k = i + 8, tl;

			memcpy(t + o, in + i, 8);
			o += 8;
			tl = op_token(in + k);
			for (size_t j = 0; j < tl; j++)
				t[o++] = ph(in[k + j]);
			i = k + tl;
			continue;
		}
		if (in[i] == '<') {
			int d = 0;

			for (; i < n; i++) {
				if (in[i] == '<' || in[i] == '(')
					d++;
				else if (in[i] == '>' || in[i] == ')')
					d--;
				if (d == 0)
					break;
			}
			i++;
			/* "A<int> >" leaves a space before the next '>' or '(' only inside args. */
			continue;
		}
		t[o++] = in[i++];
	}
	t[o] = 0;
	return o;
}

/* 2. "[clone .x]" and "[abi:x]" tags dropped, with the blanks before them. */
static size_t drop_tags(const char *t, size_t o, char *u)
{
	size_t n = 0;

	for (size_t i = 0; i < o;) {
		if (t[i] == '[' && (!strncmp(t + i, "[clone ", 7) || !strncmp(t + i, "[abi:", 5))) {
			while (i < o && t[i] != ']')
				i++;
			i++;
			while (n && u[n - 1] == ' ')
				n--;
			continue;
		}
		u[n++] = t[i++];
	}
	u[n] = 0;
	return n;
}

/* 3. Parameter lists dropped (of the function, enclosing functions, lambdas). */
static size_t drop_param_lists(const char *u, size_t n, char *t)
{
	size_t o = 0;

	for (size_t i = 0; i < n;) {
		if (u[i] == '(' && strncmp(u + i, "(anonymous namespace)", 21)) {
			int d = 0;

			for (; i < n; i++) {
				if (u[i] == '(')
					d++;
				else if (u[i] == ')' && --d == 0)
					break;
			}
			i++;
			continue;
		}
		t[o++] = u[i++];
	}
	t[o] = 0;
	return o;
}

/* 4. Trailing qualifiers and blanks dropped, in place. */
static size_t drop_trailing_qualifiers(char *t, size_t o)
{
	for (bool again = true; again;) {
		again = false;
		while (o && t[o - 1] == ' ')
			o--, again = true;
		static const char *const quals[] = { " const", " volatile", " &&", " &", " noexcept",
						     " restrict" };
		/* "operator&" has no blank before the '&', so it is never taken for a qualifier. */
		for (size_t q = 0; q < sizeof(quals) / sizeof(quals[0]); q++)
			if (ends_with(t, o, quals[q])) {
				o -= strlen(quals[q]);
				again = true;
			}
		t[o] = 0;
	}
	return o;
}

/* 5. Where the name starts in @t's first @end characters: after the last top-level blank (the
 *    return type ends there), except blanks that belong to an operator name ("operator new",
 *    "operator int"). */
static size_t name_start(const char *t, size_t end)
{
	size_t start = 0, last_op = (size_t)-1;
	int depth = 0;

	for (size_t i = 0; i < end; i++)
		if (is_operator_kw(t, i))
			last_op = i;
	for (size_t i = 0; i < end; i++) {
		char c = t[i];

		if (c == '(' || c == '{' || c == '[')
			depth++;
		else if (c == ')' || c == '}' || c == ']')
			depth--;
		else if (c == ' ' && depth == 0 && (last_op == (size_t)-1 || i < last_op))
			start = i + 1;
	}
	return start;
}

int ffm_fold_function(const char *in, char *buf, size_t len)
{
	size_t n = strlen(in), o, start, end;
	char *t = malloc(n + 1), *u;

	if (!t)
		return -ENOMEM;
	o = drop_template_args(in, n, t);
	u = malloc(o + 1);
	if (!u) {
		free(t);
		return -ENOMEM;
	}
	n = drop_tags(t, o, u);
	o = drop_param_lists(u, n, t);
	end = drop_trailing_qualifiers(t, o);
	start = name_start(t, end);
	if (end - start + 1 > len) {
		free(t);
		free(u);
		return -ENOSPC;
	}
	for (size_t i = start; i < end; i++)
		buf[i - start] = unph(t[i]);
	buf[end - start] = 0;
	free(t);
	free(u);
	return (int)(end - start);
}
