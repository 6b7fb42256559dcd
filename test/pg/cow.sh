#!/usr/bin/env bash
#
# cow.sh: a small XFS filesystem with reflink, in a loop file, for the
# tests and benchmarks of thin clones (file_copy_method = clone, PostgreSQL
# 18), and for the test of a disk that fills during a clone.  Run as root.
#
#   test/pg/cow.sh start DIR [SIZE]   makes DIR/xfs.img (sparse, SIZE, 2G by
#                                     default), mounts it on DIR/mnt, owned
#                                     by postgres, and prints DIR/mnt
#   test/pg/cow.sh stop DIR           unmounts it and removes DIR
#
# start fails, saying why, where the machine cannot make or mount it (no
# mkfs.xfs, no loop device, not root); the callers then run without it, and
# the tests that need it are skipped with that reason.
#
set -euo pipefail

usage() { echo "usage: $0 start DIR [SIZE] | stop DIR" >&2; exit 2; }
[ $# -ge 2 ] || usage
cmd=$1 dir=$2

case $cmd in
start)
	size=${3:-2G}
	[ "$(id -u)" = 0 ] || { echo "$0: mounting needs root" >&2; exit 1; }
	command -v mkfs.xfs >/dev/null || { echo "$0: no mkfs.xfs (package xfsprogs)" >&2; exit 1; }
	mkdir -p "$dir/mnt"
	truncate -s "$size" "$dir/xfs.img"
	mkfs.xfs -q -f -m reflink=1 "$dir/xfs.img"
	if ! mount -o loop "$dir/xfs.img" "$dir/mnt" 2>"$dir/mount.err"; then
		echo "$0: cannot mount an XFS loop file here: $(head -n 1 "$dir/mount.err")" >&2
		rm -rf "$dir"
		exit 1
	fi
	chown postgres: "$dir/mnt"
	chmod 700 "$dir/mnt"
	echo "$dir/mnt"
	;;
stop)
	if mountpoint -q "$dir/mnt"; then
		umount "$dir/mnt" || umount -l "$dir/mnt"
	fi
	rm -rf "$dir"
	;;
*)
	usage
	;;
esac
