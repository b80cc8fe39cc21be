#!/usr/bin/env bash
# Starts a second Docker engine with user namespace remapping (dockerd --userns-remap=default),
# beside the main one and without touching it, idempotently (run as root). Root in its
# containers is an unprivileged host uid (the first of the `dockremap` user's subordinate range).
# The userns-remap tests (tests/sandbox/test_docker_remap.py) run the docker backend on it; to
# point palaestra at it yourself: DOCKER_HOST=unix:///run/palaestra/docker-remap.sock.
#
#   1. the `dockremap` user and its 65536 subordinate uids and gids (/etc/subuid, /etc/subgid),
#      after every range already given out there;
#   2. its data root (/var/lib/palaestra/docker-remap): a btrfs loop file with simple quotas
#      where the kernel has them (storage_mb holds), else a plain directory (overlay2, not held);
#   3. its bridge (pal-remap0, 172.31.250.1/24) with one NAT and two forwarding rules of
#      its own (chain PALAESTRA-REMAP): the engine runs with --iptables=false, since a second
#      engine managing iptables would flush the main engine's DOCKER chains;
#   4. dockerd on its own socket, exec root, pid file and containerd namespace (log:
#      /var/log/palaestra/dockerd-remap.log), left running as the main engine is;
#   5. the main engine's base images (palaestra/base:bookworm, debian:bookworm-slim,
#      debian:bookworm) loaded into it (docker save | docker load: no registry needed).
#      Run scripts/provision-docker.sh first.
# If this kernel cannot remap (no user namespaces), the reason is written to
# /var/log/palaestra/docker-remap.unavailable, which the tests name when they skip.
#
# `provision-docker-remap.sh stop` stops that engine (its containers with it) and removes its
# bridge and rules; the data root stays for the next start.
# Environment: PALAESTRA_DOCKER_REMAP_DISK_GB (default 16, at most the free space).
set -euo pipefail

NAME=docker-remap
SOCK=/run/palaestra/$NAME.sock
EXEC_ROOT=/run/palaestra/$NAME
PIDFILE=/run/palaestra/$NAME.pid
DATA_ROOT=/var/lib/palaestra/$NAME
LOG_DIR=/var/log/palaestra
UNAVAILABLE=$LOG_DIR/$NAME.unavailable
BRIDGE=pal-remap0
SUBNET=172.31.250.0/24
GATEWAY=172.31.250.1/24
CHAIN=PALAESTRA-REMAP
IMAGES=(palaestra/base:bookworm debian:bookworm-slim debian:bookworm)

say() { echo "provision-docker-remap: $*" >&2; }
remapped() { docker -H "unix://$SOCK" "$@"; }
engine_up() { remapped info >/dev/null 2>&1; }

if [ "$(id -u)" -ne 0 ]; then
  say "must run as root (sudo $0)"
  exit 1
fi

stop_engine() {
  local pid
  pid=$(cat "$PIDFILE" 2>/dev/null) || pid=
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 1 120); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.25
    done
    kill -0 "$pid" 2>/dev/null && { say "dockerd $pid did not stop; see $LOG_DIR/$NAME.log"; return 1; }
  fi
  rm -f "$PIDFILE"
  iptables -D FORWARD -j "$CHAIN" 2>/dev/null || true
  iptables -F "$CHAIN" 2>/dev/null && iptables -X "$CHAIN" 2>/dev/null || true
  iptables -t nat -D POSTROUTING -s "$SUBNET" ! -o "$BRIDGE" -j MASQUERADE 2>/dev/null || true
  ip link del "$BRIDGE" 2>/dev/null || true
  say "stopped"
}

if [ "${1:-}" = stop ]; then
  stop_engine
  exit
fi

for tool in docker dockerd useradd ip iptables; do
  command -v "$tool" >/dev/null 2>&1 || {
    say "$tool is missing; install it with: sudo scripts/install-system-deps.sh"
    exit 1
  }
done
mkdir -p "$LOG_DIR" /run/palaestra
docker info >/dev/null 2>&1 || {
  say "the main engine does not answer: run scripts/provision-docker.sh first"
  exit 1
}

# The kernel must let root make user namespaces; say so for the tests' skip when it cannot.
if [ "$(cat /proc/sys/user/max_user_namespaces 2>/dev/null || echo 0)" = 0 ]; then
  echo "this kernel has no user namespaces (user.max_user_namespaces is 0 or missing)" >"$UNAVAILABLE"
  say "$(cat "$UNAVAILABLE")"
  exit 1
fi
rm -f "$UNAVAILABLE"

# 1. dockremap and its ranges, after every range given out already (a local sandbox's included).
subordinate_ranges() {
  local file=$1 start
  grep -q '^dockremap:' "$file" 2>/dev/null && return 0
  start=$(cat /etc/subuid /etc/subgid 2>/dev/null |
    awk -F: 'BEGIN {m = 100000} NF == 3 && $2 + $3 > m {m = $2 + $3} END {print m}')
  echo "dockremap:$start:65536" >>"$file"
}
getent passwd dockremap >/dev/null || useradd --system --no-create-home --shell /bin/false dockremap
touch /etc/subuid /etc/subgid
subordinate_ranges /etc/subuid
subordinate_ranges /etc/subgid

# Simple quotas on the btrfs data root (Linux 6.7+): by btrfs-progs 6.7+, else by ioctl
# (BTRFS_IOC_QUOTA_CTL, BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA), as scripts/provision-docker.sh does.
simple_quotas() {
  local uuid
  uuid=$(findmnt -n -o UUID --target "$DATA_ROOT")
  [ "$(cat "/sys/fs/btrfs/$uuid/qgroups/mode" 2>/dev/null)" = squota ] && return 0
  btrfs quota enable --simple "$DATA_ROOT" >/dev/null 2>&1 && return 0
  python3 - "$DATA_ROOT" 2>/dev/null <<'PY'
import fcntl, os, struct, sys
fcntl.ioctl(os.open(sys.argv[1], os.O_RDONLY), 0xC0109428, bytearray(struct.pack("QQ", 4, 0)))
PY
}

# 2. The data root: btrfs with simple quotas in a sparse loop file, where that works.
data_root_args() {
  local img=$DATA_ROOT.btrfs free_gb size_gb
  mkdir -p "$DATA_ROOT"
  if ! mountpoint -q "$DATA_ROOT" && command -v mkfs.btrfs >/dev/null 2>&1 &&
    { grep -qw btrfs /proc/filesystems || modprobe btrfs 2>/dev/null; }; then
    if [ ! -s "$img" ]; then
      free_gb=$(df -P -BG /var/lib/palaestra | awk 'NR==2 {sub("G", "", $4); print $4}')
      size_gb=${PALAESTRA_DOCKER_REMAP_DISK_GB:-16}
      [ "$free_gb" -lt "$size_gb" ] && size_gb=$free_gb
      truncate -s "${size_gb}G" "$img.partial"
      mkfs.btrfs -q "$img.partial" >/dev/null 2>&1 && mv "$img.partial" "$img" || rm -f "$img.partial"
    fi
    [ -s "$img" ] && mount -o loop "$img" "$DATA_ROOT" 2>>"$LOG_DIR/$NAME.log" || true
  fi
  if mountpoint -q "$DATA_ROOT" && [ "$(stat -f -c %T "$DATA_ROOT")" = btrfs ]; then
    simple_quotas || say "no btrfs simple quotas here (Linux 6.7+): storage_mb not enforced"
    echo "--storage-driver=btrfs"
  else
    say "no btrfs data root: overlay2 on $(stat -f -c %T "$DATA_ROOT"), storage_mb not enforced"
  fi
}

# 3. Its own bridge and NAT; forwarding allowed for it alone (the main engine's FORWARD
#    policy is DROP).
network() {
  ip link show "$BRIDGE" >/dev/null 2>&1 || ip link add "$BRIDGE" type bridge
  ip addr show dev "$BRIDGE" | grep -q "inet ${GATEWAY%/*}/" || ip addr add "$GATEWAY" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  iptables -t nat -C POSTROUTING -s "$SUBNET" ! -o "$BRIDGE" -j MASQUERADE 2>/dev/null ||
    iptables -t nat -A POSTROUTING -s "$SUBNET" ! -o "$BRIDGE" -j MASQUERADE
  iptables -N "$CHAIN" 2>/dev/null || iptables -F "$CHAIN"
  iptables -A "$CHAIN" -i "$BRIDGE" ! -o "$BRIDGE" -j ACCEPT
  iptables -A "$CHAIN" -o "$BRIDGE" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
  iptables -C FORWARD -j "$CHAIN" 2>/dev/null || iptables -A FORWARD -j "$CHAIN"
  sysctl -qw net.ipv4.ip_forward=1
}

# 4. The engine.
start_engine() {
  local storage pid
  storage=$(data_root_args)
  network
  say "starting dockerd --userns-remap=default on $SOCK ${storage}"
  # shellcheck disable=SC2086
  setsid dockerd --userns-remap=default --host="unix://$SOCK" --data-root="$DATA_ROOT" \
    --exec-root="$EXEC_ROOT" --pidfile="$PIDFILE" --bridge="$BRIDGE" --iptables=false \
    --ip-masq=false --containerd-namespace=palaestra-remap \
    --containerd-plugins-namespace=palaestra-remap-plugins --cgroup-parent=/palaestra-remap \
    $storage >>"$LOG_DIR/$NAME.log" 2>&1 </dev/null &
  pid=$!
  for _ in $(seq 1 120); do
    engine_up && { say "dockerd is up (pid $pid, log $LOG_DIR/$NAME.log)"; return 0; }
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  kill "$pid" 2>/dev/null || true
  say "dockerd --userns-remap did not come up; see $LOG_DIR/$NAME.log"
  return 1
}

engine_up || start_engine
remapped info --format '{{.SecurityOptions}}' | grep -q 'name=userns' || {
  say "the engine on $SOCK runs without userns-remap; stop it ($0 stop) and run this again"
  exit 1
}

# 5. The base images, as the main engine has them.
missing=()
for image in "${IMAGES[@]}"; do
  want=$(docker image inspect -f '{{.Id}}' "$image")
  have=$(remapped image inspect -f '{{.Id}}' "$image" 2>/dev/null) || have=
  [ "$want" = "$have" ] || missing+=("$image")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "loading ${missing[*]} from the main engine"
  docker save "${missing[@]}" | remapped load >/dev/null
fi
say "ready: DOCKER_HOST=unix://$SOCK (root in its containers is host uid $(awk -F: '$1 == "dockremap" {print $2}' /etc/subuid))"
