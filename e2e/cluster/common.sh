# shellcheck shell=bash
# Helpers shared by e2e/cluster/{up,down,fake-pod}. Sourced, never executed.
#
# The state dir layout (see README.md):
#   $STATE/run/<name>.pid, <name>.starttime   processes started by `up`
#   $STATE/run/etcd-data                      path of etcd's data dir
#   $STATE/run/api-port, etcd-port            chosen ports
#   $STATE/pki/  $STATE/logs/  $STATE/kubeconfig*  $STATE/env

# Default state dir; every script honours LOGPOLICY_E2E_DIR.
state_dir() {
  local d="${LOGPOLICY_E2E_DIR:-${TMPDIR:-/tmp}/logpolicy-e2e}"
  printf '%s\n' "${d%/}"
}

# Prefix for etcd data dirs in /dev/shm; `down` only removes dirs with this prefix.
# shellcheck disable=SC2034  # used by the scripts that source this file
readonly ETCD_SHM_PREFIX=/dev/shm/logpolicy-e2e-etcd.

# Processes `up` starts, in start order; `down` stops them in reverse.
# shellcheck disable=SC2034
readonly CLUSTER_PROCS=(etcd kube-apiserver)

# proc_start_time PID: the process's start time (field 22 of /proc/PID/stat, in
# clock ticks since boot), printed only while it is alive and not a zombie.
# A pid together with its start time names one process for good: a recycled pid
# has a different start time.
proc_start_time() {
  local stat rest
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  rest=${stat##*) }                   # the command name may contain spaces and ')'
  # shellcheck disable=SC2086
  set -- $rest                        # $1 = state (field 3), ..., $20 = starttime (field 22)
  case "$1" in Z|X) return 1 ;; esac
  printf '%s\n' "${20}"
}

# recorded_alive STATE NAME: is the process recorded in STATE/run/NAME.pid still the
# very process `up` started?
recorded_alive() {
  local pid want have
  pid=$(cat "$1/run/$2.pid" 2>/dev/null) || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  want=$(cat "$1/run/$2.starttime" 2>/dev/null) || return 1
  have=$(proc_start_time "$pid") || return 1
  [ -n "$want" ] && [ "$want" = "$have" ]
}

# lock_state STATE: serialize up/down on one state dir (fd 9, released on exit).
lock_state() {
  mkdir -p "$(dirname "$1")"
  exec 9>"$1.lock"
  flock -w 300 9 || die "another up/down holds $1.lock"
}
