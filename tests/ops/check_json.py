#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Validates one JSON output of ffmctl against its schema in docs/schema/.

  check_json.py [--strict] SCHEMA FILE

SCHEMA is a name (report, diff, status, jobs, job, calibrate, chrome-trace, hatchet: the file
docs/schema/NAME.schema.json) or a path; FILE - is standard input; gzip (export -o FILE.gz) is
read through.

Exit 0: valid; 1: not valid, the reasons on standard output (one line each, at most 10);
2: usage, or a schema that cannot be read; 3: no jsonschema module (Debian's python3-jsonschema,
which `make deps` installs for /usr/bin/python3: run this with /usr/bin/python3).

The schemas are JSON Schema draft 2020-12 and describe what docs/report-json.md and
docs/REPORT.md promise: objects open to fields added within a version. The test suite checks
more than a consumer may assume:
  - the text is one JSON value: no duplicate member, no NaN or Infinity, nothing after it;
  - "integer" means an integer literal (jsonschema counts 2.0 as one; ffm never writes that);
  - --strict closes every object schema ("type": "object" with "properties" and no
    "additionalProperties" of its own): a member the page does not document is an error, so a
    new field cannot reach a release without its line in the documentation and the schema.
"""
import gzip
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMA_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "docs", "schema"))


def usage(msg):
    print("check_json.py: %s" % msg, file=sys.stderr)
    sys.exit(2)


def no_dup(pairs):
    seen = {}
    for k, v in pairs:
        if k in seen:
            raise ValueError("duplicate member %r" % k)
        seen[k] = v
    return seen


def no_constant(name):
    raise ValueError("%s is not JSON" % name)


def close_objects(s):
    """--strict: additionalProperties false on every object schema that has no own rule."""
    if isinstance(s, dict):
        if s.get("type") == "object" and "properties" in s and "additionalProperties" not in s:
            s["additionalProperties"] = False
        for v in s.values():
            close_objects(v)
    elif isinstance(s, list):
        for v in s:
            close_objects(v)
    return s


def load_schemas(strict):
    store = {}
    for name in sorted(os.listdir(SCHEMA_DIR)):
        if name.endswith(".schema.json"):
            with open(os.path.join(SCHEMA_DIR, name)) as f:
                s = json.load(f)
            store[s["$id"]] = close_objects(s) if strict else s
    return store


def where(err):
    path = "".join("[%d]" % p if isinstance(p, int) else ".%s" % p for p in err.absolute_path)
    return path or "(top)"


def main(argv):
    strict = "--strict" in argv
    args = [a for a in argv if a != "--strict"]
    if len(args) != 2:
        usage("usage: check_json.py [--strict] SCHEMA FILE")
    try:
        import jsonschema
        from jsonschema import validators
    except ImportError:
        print("the jsonschema module is missing: apt-get install python3-jsonschema (make deps), "
              "and run this with /usr/bin/python3")
        return 3
    try:
        store = load_schemas(strict)
        if os.sep in args[0] or args[0].endswith(".json"):
            with open(args[0]) as f:
                schema = json.load(f)
            schema = close_objects(schema) if strict else schema
        else:
            schema = next(s for s in store.values()
                          if s["$id"].endswith("/%s.schema.json" % args[0]))
    except (OSError, ValueError, KeyError, StopIteration) as e:
        usage("cannot read the schema %s: %s" % (args[0], e or "no such schema"))
    try:
        raw = sys.stdin.buffer.read() if args[1] == "-" else open(args[1], "rb").read()
        if raw[:2] == b"\x1f\x8b":  # export -o FILE.gz
            raw = gzip.decompress(raw)
        doc = json.loads(raw.decode("utf-8"), object_pairs_hook=no_dup, parse_constant=no_constant)
    except (OSError, ValueError, EOFError) as e:
        print("not one JSON value: %s" % e)
        return 1
    base = validators.validator_for(schema)
    strict_int = base.TYPE_CHECKER.redefine(
        "integer", lambda _, v: isinstance(v, int) and not isinstance(v, bool))
    cls = validators.extend(base, type_checker=strict_int)
    resolver = jsonschema.RefResolver.from_schema(schema, store=store)
    errors = sorted(cls(schema, resolver=resolver).iter_errors(doc),
                    key=lambda e: list(map(str, e.absolute_path)))
    for e in errors[:10]:
        # the innermost reasons of an anyOf/oneOf say what is wrong, not just "not valid"
        leaf = min(e.context, key=lambda c: -len(c.absolute_path)) if e.context else e
        msg = leaf.message if len(leaf.message) < 300 else leaf.message[:300] + "..."
        print("%s: %s" % (where(leaf), msg))
    if len(errors) > 10:
        print("... and %d more" % (len(errors) - 10))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
