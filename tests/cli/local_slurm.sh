#!/usr/bin/env bash
# A one-node Slurm cluster on localhost for the Slurm backend's test (tests/cli/sweep_slurm_test.cpp):
#   local_slurm.sh start    installs munge, slurmctld, slurmd and the client when missing (Debian packages, listed in
#                           tools/packages.txt), writes /etc/slurm/slurm.conf, starts munged, slurmctld and slurmd
#   local_slurm.sh stop     stops the three daemons by their pid files
# Needs root and no systemd. It refuses to touch a slurm.conf it did not write. SLURM_NODE_CPUS (default: nproc)
# declares that many task slots on the node. Exit status 0 only when the node is idle and takes jobs.
set -euo pipefail

CONF=/etc/slurm/slurm.conf
RUN=/run/slurm
HEADER="# Single-node Slurm written by podsim's tests/cli/local_slurm.sh."
log() { echo "[local_slurm] $*"; }
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
# Waits until the command succeeds; fails as soon as the daemon it waits for is no longer running. No deadline: a
# daemon that is alive but slow (a loaded machine) is waited for; one that never answers is the test's timeout's.
wait_ready() {  # daemon-name command...
  local name=$1
  shift
  until "$@"; do
    pgrep -x "$name" >/dev/null || return 1
    sleep 0.1
  done
}

stop_pidfile() {  # name pidfile...
  local pids=() pf
  for pf in "$@"; do
    if alive "$pf"; then pids+=("$(cat "$pf")"); kill -TERM "$(cat "$pf")"; fi
  done
  for _ in $(seq 100); do
    local any=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && any=1; done
    [ $any = 0 ] && break
    sleep 0.1
  done
  for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && kill -KILL "$p"; done
  rm -f "$@"
}

if [ "${1:-}" = stop ]; then
  # The compute daemon and the controller together, then munged (they talk to it while they exit).
  stop_pidfile "$RUN/slurmd.pid" "$RUN/slurmctld.pid"
  stop_pidfile /run/munge/munged.pid
  log "stopped"
  exit 0
fi
[ "${1:-}" = start ] || { echo "usage: $0 start|stop" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "local_slurm.sh: must run as root to install and start Slurm" >&2; exit 1; }

# ------------------------------------------------------------------ packages
missing=""
for p in slurmctld slurmd slurm-client munge; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  log "installing:$missing"
  added_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then  # keep the packages' scripts from starting daemons
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; added_policy=1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q -o DPkg::Lock::Timeout=600 --no-install-recommends $missing >/dev/null ||
    { apt-get update -q >/dev/null && apt-get install -y -q -o DPkg::Lock::Timeout=600 --no-install-recommends $missing >/dev/null; }
  [ $added_policy = 1 ] && rm -f /usr/sbin/policy-rc.d
fi

# ------------------------------------------------------------------ munge (must run as the munge user)
if [ ! -s /etc/munge/munge.key ]; then
  mungekey --create --keyfile=/etc/munge/munge.key
  chown munge:munge /etc/munge/munge.key; chmod 0400 /etc/munge/munge.key
fi
install -d -o munge -g munge -m 0755 /run/munge
if ! alive /run/munge/munged.pid; then
  runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid
fi
munge_answers() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }
wait_ready munged munge_answers || { echo "munged exited without answering" >&2; exit 1; }

# ------------------------------------------------------------------ slurm.conf
if [ -f "$CONF" ] && [ "$(head -1 "$CONF")" != "$HEADER" ]; then
  echo "local_slurm.sh: $CONF exists and was not written by this script; refusing to replace it" >&2
  exit 1
fi
CPUS=${SLURM_NODE_CPUS:-$(nproc)}
OVERRIDE=""
[ "$CPUS" -gt "$(nproc)" ] && OVERRIDE="SlurmdParameters=config_overrides"  # else the node drains
install -d -m 0755 /etc/slurm
install -d -o slurm -g slurm -m 0755 "$RUN" /var/log/slurm /var/lib/slurm/slurmctld
install -d -o root -g root -m 0755 /var/lib/slurm/slurmd
cat > "$CONF.new" <<EOF
$HEADER
ClusterName=podsim
MailProg=/bin/true
SlurmctldHost=localhost
SlurmUser=slurm
AuthType=auth/munge
CredType=cred/munge
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
ReturnToService=2
$OVERRIDE
MaxArraySize=10001
MaxJobCount=50000
MinJobAge=300
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
Waittime=0
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=1024 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
if [ -f "$CONF" ] && cmp -s "$CONF" "$CONF.new"; then
  rm -f "$CONF.new"
else
  stop_pidfile "$RUN/slurmd.pid" "$RUN/slurmctld.pid"  # running on another configuration
  mv "$CONF.new" "$CONF"
fi

# ------------------------------------------------------------------ daemons
alive "$RUN/slurmctld.pid" || /usr/sbin/slurmctld -c  # -c: no saved state; daemonizes
ctld_up() { scontrol ping 2>/dev/null | grep -q UP; }
wait_ready slurmctld ctld_up ||
  { echo "slurmctld exited before it came up" >&2; tail -20 /var/log/slurm/slurmctld.log >&2; exit 1; }
alive "$RUN/slurmd.pid" || /usr/sbin/slurmd -N localhost
state="" tries=0
node_ready() {
  state=$(sinfo -h -N -n localhost -o %T 2>/dev/null || true)
  case "$state" in idle*|mixed*|allocated*) return 0 ;; esac
  # A node left down by an earlier cluster registers only when resumed.
  tries=$((tries + 1))
  [ "$tries" = 50 ] && { scontrol update nodename=localhost state=resume 2>/dev/null || true; }
  return 1
}
if wait_ready slurmd node_ready; then
  log "cluster ready: node localhost $state, $CPUS task slots"
else
  echo "slurmd exited; node state is '$state'" >&2; tail -20 /var/log/slurm/slurmd.log >&2; exit 1
fi
