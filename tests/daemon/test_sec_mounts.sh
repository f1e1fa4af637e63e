#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# A root-owned driver on a file system its user built is never run as root (TAP; the rule:
# docs/SECURITY.md, rule 1; daemon/driver_setup.h). The review's attack: the user builds an
# ext4 image as herself (mkfs.ext4 -d, then debugfs -w to make her libcuda.so.1 uid 0's),
# root mounts it loop,ro,nosuid,nodev as a setuid container runtime does, and a job of hers
# loads the driver from it through LD_LIBRARY_PATH (skipped without a loop device). Checked:
#   - ffmd never runs the file (its constructor would leave a file behind as uid 0), and says
#     why (the image and what to do) in its log and in ffmctl status;
#   - ffmctl calibrate --driver as root refuses it the same way;
#   - a user's copy of a driver whose build-id root calibrated is still measured, never run;
#   - trusted_driver_dirs: a root-owned driver in a listed directory is trusted on a nosuid
#     mount (calibrated); a listed directory that is not root's stops ffmd, saying why.
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/ops/lib.sh
need_root
need_sim_workloads
make_users ffmmnt1
U1=$(id -u ffmmnt1)
as_user() { timeout 60 runuser -u ffmmnt1 -- "$@"; }
MNT=$T/mnt TRUST=$T/trusted
MOUNTS=()
trap 'for m in "${MOUNTS[@]}"; do umount -l "$m" 2>/dev/null; done; cleanup' EXIT
mkdir -p "$MNT" "$TRUST" "$T/marks" "$T/user" && chmod 1777 "$T/marks" && chown ffmmnt1 "$T/user"

# The user's driver: a constructor that leaves ran-as-<euid> behind.
cat >"$T/evil.c" <<EOF
#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void pwn(void)
{
	char p[256];
	FILE *f;

	snprintf(p, sizeof(p), "$T/marks/ran-as-%u", (unsigned)geteuid());
	if ((f = fopen(p, "w")))
		fclose(f);
}
int cuInit(unsigned flags) { return 0; }
EOF
mkdir -p "$T/user/img/lib" "$T/user/img/copy"
gcc -shared -fPIC -o "$T/user/img/lib/libcuda.so.1" "$T/evil.c" || { notok "build the user's driver"; finish; }
cp "$FAKE/libcuda.so.1" "$T/user/img/copy/"
chown -R ffmmnt1 "$T/user/img"

# The user builds the image as herself, root mounts it as a container runtime would.
how=
if command -v mkfs.ext4 >/dev/null && command -v debugfs >/dev/null &&
	as_user mkfs.ext4 -q -F -d "$T/user/img" "$T/user/img.ext4" 8M >"$T/mkfs.log" 2>&1 &&
	as_user debugfs -w -R "set_inode_field /lib/libcuda.so.1 uid 0" "$T/user/img.ext4" 2>>"$T/mkfs.log" >/dev/null &&
	as_user debugfs -w -R "set_inode_field /lib/libcuda.so.1 gid 0" "$T/user/img.ext4" 2>>"$T/mkfs.log" >/dev/null &&
	as_user debugfs -w -R "set_inode_field /copy/libcuda.so.1 uid 0" "$T/user/img.ext4" 2>>"$T/mkfs.log" >/dev/null &&
	mount -o loop,ro,nosuid,nodev "$T/user/img.ext4" "$MNT" 2>>"$T/mkfs.log"; then
	how="a user-built ext4 image, mounted loop,ro,nosuid,nodev"
	MOUNTS+=("$MNT")
else
	diag <"$T/mkfs.log"
	echo "1..0 # SKIP no loop device to mount a user-built image on"
	exit 77
fi
echo "# the driver's file system: $how"
if [ "$(stat -c %u "$MNT/lib/libcuda.so.1")" != 0 ]; then
	notok "the driver on the mount is uid 0's ($(stat -c %u "$MNT/lib/libcuda.so.1"))"; finish
fi

# trusted_driver_dirs: a root-owned directory on a nosuid tmpfs, a fresh driver (a build-id of
# its own: no calibration is cached) in it.
mount -t tmpfs -o nosuid,nodev,size=16m,mode=0755 tmpfs "$TRUST" && MOUNTS+=("$TRUST")
python3 - "$FAKE/libcuda.so.1" "$TRUST/libcuda.so.1" <<'PY'
import os, struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
i = b.find(b"\x04\x00\x00\x00")
while i >= 0:
    descsz, ntype = struct.unpack_from("<II", b, i + 4)
    if ntype == 3 and b[i + 12:i + 16] == b"GNU\0" and 8 <= descsz <= 64:
        b[i + 16:i + 16 + descsz] = os.urandom(descsz)
        break
    i = b.find(b"\x04\x00\x00\x00", i + 1)
else:
    sys.exit("no build-id note")
open(sys.argv[2], "wb").write(b)
os.chmod(sys.argv[2], 0o755)
PY
printf 'trusted_driver_dirs = %s\n' "$TRUST" >"$T/ffmd.conf"

log_has() { grep -q -- "$1" "$T/ffmd.log"; }
wait_log() { for _ in $(seq $(($2 * 10))); do log_has "$1" && return 0; sleep 0.1; done; return 1; }
start_ffmd --config "$T/ffmd.conf" || { notok "ffmd starts"; finish; }
ctl calibrate --driver "$FAKE/libcuda.so.1" >/dev/null 2>&1 || { notok "calibrate the simulated driver"; finish; }
ctl job start mnt-1 --key mnt --uid "$U1" >/dev/null || { notok "job start for uid $U1"; finish; }

# ---- the user's driver on the mount is never run --------------------------------------------
as_user env LD_LIBRARY_PATH="$MNT/lib" sleep 0.5
wait_log "cannot use driver $MNT/lib/libcuda.so.1" 10
if ! ls "$T/marks" | grep -q ran-as-0 &&
	log_has "cannot use driver $MNT/lib/libcuda.so.1: not calibrated: the file is on a file system image ($MNT).*copy it into a root-owned directory"; then
	ok "a root-owned driver on $how is not run by ffmd, and the log says why"
else
	notok "a root-owned driver on a nosuid mount is not run by ffmd"
	ls "$T/marks" | diag; grep "$MNT" "$T/ffmd.log" | diag
fi
err=$(ctl status --json | python3 -c '
import json, sys
print("".join(d.get("error", "") for d in json.load(sys.stdin)["drivers"] if d["path"].endswith("/mnt/lib/libcuda.so.1")))')
if [[ $err == *"file system image ($MNT)"* ]]; then
	ok "ffmctl status says why the driver is not used"
else
	notok "ffmctl status says why (error: '$err')"
fi
out=$(ctl calibrate --driver "$MNT/lib/libcuda.so.1" 2>&1); rc=$?
if [ $rc != 0 ] && [[ $out == *"refusing to run"*"file system image ($MNT)"* ]] && ! ls "$T/marks" | grep -q ran-as-0; then
	ok "ffmctl calibrate as root refuses it and says why"
else
	notok "ffmctl calibrate as root refuses the driver on the nosuid mount (rc $rc)"; echo "$out" | diag
fi
# The node's driver, copied into the image: its build-id's calibration is cached, so it is
# measured without being run.
setpriv --reuid="$U1" --regid="$U1" --clear-groups env LD_LIBRARY_PATH="$MNT/copy" \
	"$WL/unnecessary_sync" --iters 150 >/dev/null 2>&1
if wait_log "driver $MNT/copy/libcuda.so.1: build-id.*(not root's file: the calibration of its build-id)" 10 &&
	! grep "$MNT/copy" "$T/ffmd.log" | grep -q "calibrated now"; then
	ok "a calibrated driver's copy in the image is measured from the cache, never run"
else
	notok "a calibrated driver's copy in the image is measured from the cache"; grep "$MNT/copy" "$T/ffmd.log" | diag
fi

# ---- trusted_driver_dirs ------------------------------------------------------------------
setpriv --reuid="$U1" --regid="$U1" --clear-groups env LD_LIBRARY_PATH="$TRUST" \
	"$WL/unnecessary_sync" --iters 50 >/dev/null 2>&1
if wait_log "driver $TRUST/libcuda.so.1: build-id .* (calibrated now)" 20 && ! log_has "cannot use driver $TRUST/"; then
	ok "a root-owned driver in trusted_driver_dirs is trusted on a nosuid mount"
else
	notok "a driver in trusted_driver_dirs is trusted"; grep "$TRUST" "$T/ffmd.log" | diag
fi
stop_ffmd
ctl job end mnt-1 >/dev/null 2>&1
mkdir -m 0777 "$T/open"
printf 'trusted_driver_dirs = %s:%s\n' "$TRUST" "$T/open" >"$T/bad.conf"
out=$(timeout 20 "$B/ffmd" --config "$T/bad.conf" --state-dir "$T/state" --runtime-dir "$T/run" 2>&1); rc=$?
if [ $rc = 1 ] && [[ $out == *"trusted_driver_dirs: $T/open must be a directory of root's that no one else may write"*"mode 777"* ]]; then
	ok "a trusted_driver_dirs directory anyone may write stops ffmd, saying why"
else
	notok "trusted_driver_dirs naming a 0777 directory (rc $rc)"; echo "$out" | diag
fi
ls "$T/marks" | grep -q ran-as-0 && notok "nothing ran as root (marks: $(ls "$T/marks"))"
echo "1..$n"
finish
