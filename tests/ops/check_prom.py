#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A strict parser of Prometheus's text exposition format (0.0.4), for ffmd's ffm.prom.

  check_prom.py FILE [--json]   exits 1 with the reasons when FILE is not valid; with --json,
                                prints the samples as [name, {labels}, value] on success

Checked: UTF-8, a final newline; "# HELP name text" and "# TYPE name type" at most once per
metric family and before its samples; a family's samples contiguous; metric and label names
([a-zA-Z_:][a-zA-Z0-9_:]*, labels without ':' and not starting "__"); label values quoted with
only \\\\, \\" and \\n escapes; no label twice; values Go-parsable floats; no sample twice.
"""
import json
import re
import sys

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}
VALUE = re.compile(r"[+-]?(\d+(\.\d*)?([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?|Inf|NaN)")


def parse_labels(s, i, errs, ln):
    """s[i] == '{'; returns (labels, index after '}')."""
    labels = {}
    i += 1
    while i < len(s) and s[i] != "}":
        m = LABEL.match(s, i)
        if not m or m.group().startswith("__"):
            errs.append("line %d: bad label name at %r" % (ln, s[i:]))
            return labels, len(s)
        name, i = m.group(), m.end()
        if s[i:i + 2] != '="':
            errs.append("line %d: label %s: want =\"" % (ln, name))
            return labels, len(s)
        i += 2
        val = []
        while i < len(s) and s[i] != '"':
            if s[i] == "\\":
                esc = s[i + 1:i + 2]
                if esc not in ("\\", '"', "n"):
                    errs.append("line %d: label %s: bad escape \\%s" % (ln, name, esc))
                val.append("\n" if esc == "n" else esc)
                i += 2
            else:
                val.append(s[i])
                i += 1
        if i >= len(s):
            errs.append("line %d: label %s: unterminated value" % (ln, name))
            return labels, len(s)
        if name in labels:
            errs.append("line %d: label %s twice" % (ln, name))
        labels[name] = "".join(val)
        i += 1
        if s[i:i + 1] == ",":
            i += 1
    if i >= len(s):
        errs.append("line %d: no closing }" % ln)
    return labels, i + 1


def parse(data):
    errs, samples = [], []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return ["not UTF-8: %s" % e], []
    if text and not text.endswith("\n"):
        errs.append("no final newline")
    helps, types, done, seen = set(), set(), set(), set()
    current = None
    for ln, line in enumerate(text.split("\n")[:-1], 1):
        if not line.strip():
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                name = parts[2]
                if not NAME.fullmatch(name):
                    errs.append("line %d: bad metric name %r" % (ln, name))
                table = helps if parts[1] == "HELP" else types
                if name in table:
                    errs.append("line %d: second %s for %s" % (ln, parts[1], name))
                if name in done or name in seen:
                    errs.append("line %d: %s for %s after its samples" % (ln, parts[1], name))
                table.add(name)
                if parts[1] == "TYPE" and (len(parts) < 4 or parts[3] not in TYPES):
                    errs.append("line %d: bad type %r" % (ln, parts[3:]))
                if current != name and current:
                    done.add(current)
                current = name
            continue
        m = NAME.match(line)
        if not m:
            errs.append("line %d: no metric name: %r" % (ln, line))
            continue
        name, i = m.group(), m.end()
        labels = {}
        if line[i:i + 1] == "{":
            labels, i = parse_labels(line, i, errs, ln)
        rest = line[i:].split(" ")
        if rest[0] != "" or len(rest) not in (2, 3) or not VALUE.fullmatch(rest[1]):
            errs.append("line %d: bad value part %r" % (ln, line[i:]))
            continue
        if name in done:
            errs.append("line %d: samples of %s not contiguous" % (ln, name))
        if current and current != name:
            done.add(current)
        current = name
        seen.add(name)
        key = (name, tuple(sorted(labels.items())))
        if key in set((s[0], tuple(sorted(s[1].items()))) for s in samples):
            errs.append("line %d: sample %s twice" % (ln, key))
        samples.append([name, labels, float(rest[1])])
    for name in seen:
        if name not in types:
            errs.append("%s has samples but no TYPE" % name)
    return errs, samples


def main():
    errs, samples = parse(open(sys.argv[1], "rb").read())
    for e in errs:
        print("FAIL:", e)
    if errs:
        sys.exit(1)
    if "--json" in sys.argv:
        json.dump(samples, sys.stdout)
    else:
        print("%s: ok, %d samples" % (sys.argv[1], len(samples)))


main()
