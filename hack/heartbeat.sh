#!/usr/bin/env bash
# heartbeat: runs a command and, while it runs, prints a line to stderr
# every minute (HEARTBEAT seconds) saying how long it has run and what it
# is doing: the processes under it, e.g. "compile ×2, link" while Go builds
# or "e2e.test, parity.test" while those test binaries run. make test and
# hack/test-deps.sh use it so a cold run (kube-apiserver, etcd and istiod
# builds, a long test package) is never silent for more than a minute
# (issue #32 item 4). The command's output and exit status are its own.
#
#   hack/heartbeat.sh LABEL CMD [ARG...]
set -uo pipefail
label=$1
shift
every=${HEARTBEAT:-60}

# descendants PID SKIP: the command names of PID's descendant processes,
# leaving out SKIP and its own.
descendants() {
  ps -e -o pid=,ppid=,comm= | awk -v root="$1" -v skip="$2" '
    { parent[$1] = $2; name[$1] = $3 }
    END {
      for (p in parent) {
        if (p == skip) continue
        for (q = parent[p]; q != "" && q != 0 && q != 1; q = parent[q]) {
          if (q == skip) break
          if (q == root) { print name[p]; break }
        }
      }
    }'
}

# doing PID SKIP: "name x count, ..." for the command's descendants (shells
# and go's own driver left out), most frequent first.
doing() {
  descendants "$1" "$2" | grep -vxE 'bash|sh|go|make' |
    sort | uniq -c | sort -rn | head -8 |
    awk '{ printf "%s%s%s", (NR > 1 ? ", " : ""), $2, ($1 > 1 ? " x" $1 : "") }'
}

# The ticker runs in the background and the command in the foreground (a
# background command would ignore Ctrl-C); the ticker stops with us.
me=$$
start=$SECONDS
(
  while sleep "$every"; do
    kill -0 "$me" 2>/dev/null || exit 0
    now=$(doing "$me" "$BASHPID")
    echo "$label: still running after $(((SECONDS - start) / 60)) min${now:+ ($now)}" >&2
  done
) &
beat=$!
rc=0
"$@" || rc=$?
kill "$beat" 2>/dev/null
wait "$beat" 2>/dev/null
exit "$rc"
