#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# ffmctl's and ffmd's conventions (TAP), none of which needs a job:
#   - a refused BPF load or uprobe names the capabilities the operation needs and those the
#     process lacks, read from its effective set (run under setpriv with a reduced bounding set);
#   - every verb `ffmctl help` lists: `ffmctl help VERB` prints its usage; an unknown option, a
#     missing argument and an argument to a flag are one line "ffmctl VERB: ..." with the hint
#     "ffmctl help VERB", exit 2; a verb with --json takes -j (as bpftool);
#   - the manual pages (built by `make man`, which `make test` runs first) render with `man -l`
#     without a warning, and name every verb and every option the programs' usages name, every
#     setting of the default ffmd.conf;
#   - the bash completion, sourced into bash, completes verbs, options, option values and job ids
#     from the usages and `ffmctl jobs`;
#   - `make install DESTDIR=...` puts the programs, manual pages, completion and the documents the
#     README links to in place, and `make uninstall DESTDIR=...` leaves nothing behind;
#   - tables: a long job id, key or owner widens its column in `jobs` and `status` instead of
#     running into the next one;
#   - report's progress: on a terminal (script(1)), a line on stderr once FFM_PROGRESS_AFTER
#     seconds have passed (default 1), naming the phase, cleared at the end; stdout is the same
#     report as without; nothing on a quick report, nothing where stderr is not a terminal;
#   - an admin_group that names no group: ffmd does not start, saying where it is set and what
#     to do; on a reload, it keeps the group it had;
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/ops/lib.sh

# --- verbs, options, errors ------------------------------------------------------------------
# one_line_err NAME PREFIX ARGS...: exit 2 and exactly one line on stderr, starting with PREFIX.
one_line_err() {
	local name=$1 want=$2 out rc
	shift 2
	out=$("$B/ffmctl" "$@" 2>&1 >/dev/null); rc=$?
	if [ $rc = 2 ] && [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] && [[ $out == "$want"* ]]; then
		ok "$name"
	else
		notok "$name (rc $rc)"; echo "$out" | diag
	fi
}
verbs=$("$B/ffmctl" help | sed -n '/^Verbs:/,/^$/{s/^  \([a-z]*\) .*/\1/p}' | grep -vx help)
if [ "$(echo $verbs | wc -w)" -ge 8 ]; then
	ok "ffmctl help lists the verbs: $(echo $verbs)"
else
	notok "ffmctl help lists the verbs: '$verbs'"
fi
for v in $verbs; do
	usage=$("$B/ffmctl" help "$v" 2>&1); rc=$?
	if [ $rc = 0 ] && [[ $usage == "Usage: ffmctl $v"* ]]; then
		ok "help $v: its usage"
	else
		notok "help $v (rc $rc)"; echo "$usage" | diag
	fi
	sub=()
	[ "$v" = job ] && sub=(start)
	one_line_err "$v --no-such-option" "ffmctl $v${sub:+ $sub}: unknown option '--no-such-option' (ffmctl help $v lists them)" \
		"$v" "${sub[@]}" --no-such-option
	one_line_err "$v -Z" "ffmctl $v${sub:+ $sub}: unknown option '-Z' (ffmctl help $v lists them)" "$v" "${sub[@]}" -Z
	one_line_err "$v --help=x" "ffmctl $v${sub:+ $sub}: option '--help' takes no argument (ffmctl help $v)" \
		"$v" "${sub[@]}" --help=x
	if [[ $usage == *--json* ]]; then
		out=$("$B/ffmctl" "$v" "${sub[@]}" -j --help 2>&1); rc=$?
		if [ $rc = 0 ] && [[ $out == "Usage: ffmctl $v"* ]]; then
			ok "$v takes -j for --json"
		else
			notok "$v -j (rc $rc)"; echo "$out" | diag
		fi
	fi
done
one_line_err "report --top without its argument" "ffmctl report: option '--top' needs an argument (ffmctl help report)" report --top
one_line_err "a global option unknown" "ffmctl: unknown option '--no-such' (ffmctl help lists them)" --no-such
one_line_err "job without an action" "ffmctl job: no action given: start or end (ffmctl help job)" job
one_line_err "an unknown verb" "ffmctl: unknown verb 'nosuch'" nosuch
for a in "--no-such|ffmd: unknown option '--no-such' (ffmd --help)" \
	"-Z|ffmd: unknown option '-Z' (ffmd --help)" \
	"--config|ffmd: option '--config' needs an argument (ffmd --help)" \
	"--verbose=1|ffmd: option '--verbose' takes no argument (ffmd --help)"; do
	out=$("$B/ffmd" "${a%%|*}" 2>&1); rc=$?
	if [ $rc = 2 ] && [ "$out" = "${a#*|}" ]; then
		ok "ffmd ${a%%|*}: one line, exit 2"
	else
		notok "ffmd ${a%%|*} (rc $rc)"; echo "$out" | diag
	fi
done

# --- manual pages ---------------------------------------------------------------------------
for page in ffmctl.1 ffmd.8 ffmd.conf.5; do
	f=$B/man/$page
	if [ ! -s "$f" ]; then
		notok "man page $page built (make man)"
		continue
	fi
	out=$(MANWIDTH=100 man --warnings -l "$f" 2>&1 >"$T/$page.txt"); rc=$?
	if [ $rc = 0 ] && [ -z "$out" ] && grep -q "^NAME" "$T/$page.txt"; then
		ok "man -l $page renders without a warning"
	else
		notok "man -l $page (rc $rc)"; echo "$out" | diag
	fi
done
# Every verb a section of ffmctl(1), every option of its usage in that section.
missing=
for v in $verbs; do
	sect=$(awk -v v="$v" '/^   [a-z]/ { on = ($1 == v) } on' "$T/ffmctl.1.txt")
	[ -n "$sect" ] || { missing="$missing $v(no section)"; continue; }
	for o in $(_usage=$("$B/ffmctl" help "$v"); grep -oE -- '(^|[[ (|])--?[a-zA-Z][a-z-]*' <<<"$_usage" | sed 's/^[^-]*//' | sort -u); do
		grep -q -- "$o\b" <<<"$sect" || missing="$missing $v:$o"
	done
done
for o in $("$B/ffmctl" --help | head -n 1 | grep -oE -- '--[a-z-]+'); do
	grep -q -- "$o" "$T/ffmctl.1.txt" || missing="$missing global:$o"
done
check "ffmctl(1) has every verb and option the usages name${missing:+; missing:$missing}" test -z "$missing"
missing=
for o in $("$B/ffmd" --help | grep -oE -- '--[a-z-]+' | sort -u); do
	grep -q -- "$o" "$T/ffmd.8.txt" || missing="$missing $o"
done
check "ffmd(8) has every option of ffmd --help${missing:+; missing:$missing}" test -z "$missing"
missing=
for k in $(sed -n 's/^#\{0,1\}\([a-z_]*\) = .*/\1/p' systemd/ffmd.conf | sort -u); do
	grep -q "^ *$k = " "$T/ffmd.conf.5.txt" || missing="$missing $k"
done
check "ffmd.conf(5) has every setting of systemd/ffmd.conf${missing:+; missing:$missing}" test -z "$missing"

# --- bash completion ----------------------------------------------------------------------------
# complete WORDS...: what the completion offers for the last word (space-separated, sorted).
complete_words() {
	bash -c '. contrib/bash-completion/ffmctl
		COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _ffmctl
		printf "%s\n" "${COMPREPLY[@]}" | sort | tr "\n" " "' _ "$B/ffmctl" --state-dir "$T/cstate" "$@"
}
mkdir -p "$T/cstate"
"$B/tests/ffm-synth" --state "$T/cstate" --key ck --job comp-job-1 --stages 1 --iters 5 >/dev/null 2>&1
want_completion() { # want_completion EXPECTED WORDS...
	local want=$1 got
	shift
	got=$(complete_words "$@")
	if [ "$got" = "$want" ]; then
		ok "completion of '$*': $want"
	else
		notok "completion of '$*': '$got', want '$want'"
	fi
}
want_completion "diff " di
want_completion "--group --help --json --noise --subsequence --top " report --
want_completion "function point sequence " report --group ""
want_completion "chrome-trace hatchet " export --format ""
want_completion "end start " job ""
want_completion "--help --json --wait -j " job end -
want_completion "--json " jobs --j
want_completion "comp-job-1 " report ""
want_completion "report " help rep
out=$(complete_words profile -- /bin/tru)
[[ " $out " == *" /bin/true "* ]] && ok "completion after profile --: file names" ||
	notok "completion after profile --: '$out'"

# --- tables ------------------------------------------------------------------------------------
# aligned OUTPUT HEADING VALUE...: in OUTPUT, the line with VALUE has each VALUE where the heading
# line (the first with HEADING) has the heading of the same place (JOB KEY OWNER).
aligned() {
	local out=$1 head row i=0 h
	shift
	head=$(grep -m1 -- "$1" <<<"$out")
	shift
	row=$(grep -m1 -- "^ *$1 " <<<"$out")
	for h in JOB KEY OWNER; do
		i=$((i + 1))
		[ "$(col_of "$head" "$h")" = "$(col_of "$row" "${!i}")" ] || return 1
	done
}
col_of() { awk -v s="$1" -v t="$2" 'BEGIN { print index(" " s " ", " " t " ") }'; }
LONG_JOB=slurm-1234567.batch-array-task-17-of-32
LONG_KEY=a-very-long-job-key-for-the-nightly-cfd-simulation
"$B/tests/ffm-synth" --state "$T/cstate" --key "$LONG_KEY" --job "$LONG_JOB" --stages 1 --iters 5 >/dev/null 2>&1
out=$("$B/ffmctl" --state-dir "$T/cstate" jobs)
own=$(awk -v j="$LONG_JOB" '$1 == j { print $3 }' <<<"$out")
if [ -n "$own" ] && aligned "$out" "^JOB " "$LONG_JOB" "$LONG_KEY" "$own" &&
	aligned "$out" "^JOB " comp-job-1 ck "$own"; then
	ok "jobs: a long job id and key widen their columns"
else
	notok "jobs: columns"; echo "$out" | diag
fi

# --- report's progress ---------------------------------------------------------------------------
if command -v script >/dev/null; then
	"$B/tests/ffm-synth" --state "$T/pstate" --key pk --job pj --stages 4 --iters 2000 --fast >/dev/null 2>&1
	R=("$B/ffmctl" --state-dir "$T/pstate" report pj)
	"${R[@]}" >"$T/plain.txt" 2>"$T/plain.err"
	script -qec "FFM_PROGRESS_AFTER=0 ${R[*]} >$T/tty.txt" /dev/null >"$T/tty.err" 2>&1
	if tr '\r' '\n' <"$T/tty.err" | grep -q $'^ffmctl report: job pj: [a-z0-9 ,:.%()]*, [0-9]* s\e\[K' &&
		[ "$(tail -c 4 "$T/tty.err" | od -An -c | tr -d ' ')" = '\r033[K' ] &&
		cmp -s "$T/plain.txt" "$T/tty.txt" && [ ! -s "$T/plain.err" ]; then
		ok "report on a terminal: progress on stderr (phase, seconds), cleared; the same report"
	else
		notok "report's progress"; cat -v "$T/tty.err" | tail -c 600 | diag
	fi
	script -qec "${R[*]} >/dev/null" /dev/null >"$T/tty.err" 2>&1
	check "a report quicker than a second shows no progress" test ! -s "$T/tty.err"
	FFM_PROGRESS_AFTER=0 "${R[@]}" >/dev/null 2>"$T/plain.err"
	check "no progress where stderr is not a terminal" test ! -s "$T/plain.err"
else
	skip "report's progress" "no script(1)"
fi

# --- install, uninstall -------------------------------------------------------------------------
# -o: install what `make test` built, never rebuild from inside a test.
if make -s -o all -o man O="$B" DESTDIR="$T/inst" install >"$T/install.log" 2>&1; then
	D=$T/inst/usr/local
	missing=
	for f in bin/ffmctl sbin/ffmd share/man/man1/ffmctl.1 share/man/man8/ffmd.8 \
		share/man/man5/ffmd.conf.5 share/bash-completion/completions/ffmctl; do
		[ -s "$D/$f" ] || missing="$missing $f"
	done
	# The documents the README links to, where its relative links point.
	for f in $(grep -oE '(docs|systemd|contrib|tests)/[A-Za-z/_-]+\.md' README.md | sort -u); do
		[ -s "$D/share/doc/ffm/$f" ] || missing="$missing doc:$f"
	done
	check "make install: programs, man pages, completion, documents${missing:+; missing:$missing}" \
		test -z "$missing"
	make -s O="$B" DESTDIR="$T/inst" uninstall >>"$T/install.log" 2>&1
	left=$(cd "$T/inst" && find . -mindepth 1 | head -n 5)
	if [ -z "$left" ]; then
		ok "make uninstall leaves nothing in DESTDIR"
	else
		notok "make uninstall left: $left"
	fi
else
	notok "make install DESTDIR"; diag <"$T/install.log"
fi

# --- capabilities named on a refusal ---------------------------------------------------------
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
	skip "refusals name the lacking capabilities" "needs root and setpriv"
else
	# CAP_BPF + CAP_PERFMON: the calibration's uprobe counter (perf's uprobe PMU) is refused.
	out=$(setpriv --bounding-set=-all,+bpf,+perfmon "$B/ffmctl" --state-dir "$T/state" \
		calibrate --driver "$B/fakecuda/libcuda.so.1" 2>&1)
	if [[ $out == *"counting uprobe hits needs CAP_SYS_ADMIN; this process lacks CAP_SYS_ADMIN"* ]]; then
		ok "calibrate with CAP_BPF + CAP_PERFMON: says CAP_SYS_ADMIN is lacking"
	else
		notok "calibrate's refusal"; echo "$out" | diag
	fi
	# CAP_PERFMON alone: the collector does not load; CAP_BPF is what is missing.
	out=$(LD_LIBRARY_PATH=$B/fakecuda setpriv --bounding-set=-all,+perfmon "$B/ffmctl" \
		--state-dir "$T/state" profile -- /bin/true 2>&1); rc=$?
	if [ $rc = 1 ] && [[ $out == *"ffmctl profile: cannot load the BPF collector: "*"profile needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN); this process lacks CAP_BPF"* ]] &&
		[[ $out != *"lacks CAP_BPF and CAP_PERFMON"* ]]; then
		ok "profile with CAP_PERFMON alone: exit 1, says CAP_BPF is lacking"
	else
		notok "profile's refusal (rc $rc)"; echo "$out" | diag
	fi
	mkdir -p "$T/state" "$T/run"
	out=$(timeout 20 setpriv --bounding-set=-all,+perfmon "$B/ffmd" --state-dir "$T/state" \
		--runtime-dir "$T/run" 2>&1); rc=$?
	if [ $rc != 0 ] && [[ $out == *"cannot load the BPF collector: "*": ffmd needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN); this process lacks CAP_BPF"* ]]; then
		ok "ffmd with CAP_PERFMON alone: stops, says CAP_BPF is lacking"
	else
		notok "ffmd's refusal (rc $rc)"; echo "$out" | diag
	fi
fi

# --- admin_group naming no group -------------------------------------------------------------
if [ "$(id -u)" != 0 ]; then
	skip "admin_group naming no group" "needs root (ffmd)"
else
	printf 'admin_group = ffm-no-such-group\n' >"$T/bad.conf"
	out=$(timeout 20 "$B/ffmd" --config "$T/bad.conf" --state-dir "$T/state" --runtime-dir "$T/run" 2>&1); rc=$?
	if [ $rc = 1 ] && [[ $out == *"$T/bad.conf: admin_group = ffm-no-such-group: no such group in "*"(groupadd ffm-no-such-group)"*"ffmd does not start without it"* ]]; then
		ok "ffmd with an admin_group that does not exist: exit 1, where and what to do"
	else
		notok "ffmd with a missing admin_group (rc $rc)"; echo "$out" | diag
	fi
	: >"$T/good.conf"
	if start_ffmd --config "$T/good.conf"; then
		# status: an active job with a long id, key and owner name.
		LONG_USER=ffm-long-user-name-$$
		useradd -M -N -s /usr/sbin/nologin "$LONG_USER" 2>/dev/null && created_user=1 || created_user=
		uid=$(id -u "$LONG_USER" 2>/dev/null || id -u nobody)
		ctl job start "$LONG_JOB" --key "$LONG_KEY" --uid "$uid" >/dev/null
		ctl job start short-1 --key k --uid "$uid" >/dev/null
		out=$(ctl status)
		name=$(id -un "$uid")
		if aligned "$out" "^  JOB " "$LONG_JOB" "$LONG_KEY" "$name" &&
			aligned "$out" "^  JOB " short-1 k "$name"; then
			ok "status: a long job id, key and owner widen their columns"
		else
			notok "status: columns"; echo "$out" | diag
		fi
		ctl job end "$LONG_JOB" >/dev/null; ctl job end short-1 >/dev/null
		[ -n "$created_user" ] && userdel "$LONG_USER" 2>/dev/null
		cp "$T/bad.conf" "$T/good.conf"
		kill -HUP "$FFMD_PID"
		for _ in $(seq 50); do grep -q "ffm-no-such-group" "$T/ffmd.log" && break; sleep 0.1; done
		if grep -q "admin_group = ffm-no-such-group: no such group in .*(reload: keeping no admin group)" "$T/ffmd.log" &&
			kill -0 "$FFMD_PID" 2>/dev/null; then
			ok "reload to a missing admin_group: said, ffmd runs on with none"
		else
			notok "reload to a missing admin_group"; diag <"$T/ffmd.log"
		fi
		stop_ffmd
	else
		notok "ffmd did not start with an empty config"
	fi
fi

finish
