# SPDX-License-Identifier: MIT
# Sourced by bench scripts after bench/lib.sh: `group_start BIN [EXTRA...]` starts a group of 3
# on loopback (ports in http[], pids in gpid[], data under $work) and sets $leader to the member
# that answers a write itself, $follower to another one; `group_member_start ID` starts member
# ID again (after a kill), `group_leader` finds the leader again.
declare -A http raft gpid
group_spec=""
group_args=()
group_member_start() {
  "${group_args[@]}" --listen 127.0.0.1:${http[$1]} --data-dir "$work/m$1" --cluster "$group_spec" \
    --cluster-self "$1" 2>>"$work/group.log" &
  gpid[$1]=$!
  pids+=(${gpid[$1]})
}
group_start() {
  local bin=$1 id
  shift
  for id in 1 2 3; do
    http[$id]=$(free_port)
    raft[$id]=$(free_port)
    group_spec+="${group_spec:+,}$id=127.0.0.1:${raft[$id]}"
  done
  group_args=("$bin" --cold-url "file://$work/cold" --log-level warn "$@")
  for id in 1 2 3; do group_member_start $id; done
  for id in 1 2 3; do wait_port ${http[$id]}; done
  group_leader
}
group_leader() {
  local id code
  leader=
  for _ in $(seq 200); do
    for id in 1 2 3; do
      code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 -XPOST --json '{}' \
        "http://127.0.0.1:${http[$id]}/v1/counters/probe/incr" || true)
      if [ "$code" = 200 ]; then leader=$id; break 2; fi
    done
    sleep 0.05
  done
  [ -n "$leader" ] || die "no leader in the group"
  follower=$((leader % 3 + 1))
}
