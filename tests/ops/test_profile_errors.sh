#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# ffmctl profile when the command cannot run (TAP): one line that says why, and no job left
# "running" for ever. A directory is refused before anything starts (no job); a script whose
# interpreter is missing runs, exits 127, and its job ends as failed; as a user without the
# capabilities, one line says what is missing, libbpf's own lines only with --verbose.
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/ops/lib.sh
need_root
[ -e "$B/fakecuda/libcuda.so.1" ] || { echo "# the simulated driver is not built"; exit 77; }
prof() { LD_LIBRARY_PATH=$B/fakecuda "$B/ffmctl" --state-dir "$T/state" profile "$@"; }
mkdir -p "$T/state" "$T/adir"

prof --stages 1 -- "$T/adir" >"$T/dir.out" 2>"$T/dir.err"
rc=$?
if [ $rc != 0 ] && [ "$(wc -l <"$T/dir.err")" = 1 ] && grep -q "it is a directory" "$T/dir.err"; then
	ok "profile of a directory: one line, exit $rc"
else
	notok "profile of a directory (exit $rc)"; diag <"$T/dir.err"
fi
check "no job made for it" sh -c "! '$B/ffmctl' --state-dir '$T/state' jobs | grep -q running"

printf '#!/nonexistent/interpreter\n' >"$T/badinterp" && chmod +x "$T/badinterp"
prof --stages 1-2 -- "$T/badinterp" >"$T/bad.out" 2>"$T/bad.err"
rc=$?
check "a program that cannot start: profile exits 127 (exit $rc)" test $rc = 127
check "no store error for a process that never ran" sh -c "! grep -q 'writing the store failed' '$T/bad.err'"
state=$("$B/ffmctl" --state-dir "$T/state" jobs | awk 'NR > 1 { print $6 }')
check "its job is ended, not running (state: $state)" test "$state" = failed

make_users ffmprof1
chmod 755 "$T"
runuser -u ffmprof1 -- "$B/ffmctl" --state-dir "$T/state" profile -- /bin/true >/dev/null 2>"$T/user.err"
rc=$?
if [ $rc != 0 ] && [ "$(wc -l <"$T/user.err")" = 1 ] && grep -q "CAP_BPF" "$T/user.err"; then
	ok "profile without capabilities: one line naming them"
else
	notok "profile without capabilities (exit $rc, $(wc -l <"$T/user.err") lines)"; diag <"$T/user.err"
fi
runuser -u ffmprof1 -- "$B/ffmctl" --verbose --state-dir "$T/state" profile -- /bin/true \
	>/dev/null 2>"$T/userv.err"
check "--verbose shows libbpf's own lines" grep -q "^libbpf: " "$T/userv.err"
echo "1..$n"
finish
