#!/usr/bin/env bash
# Makes the docker backend usable on this machine, idempotently (run as root):
#   1. starts dockerd when no engine answers (log: /var/log/palaestra/dockerd.log). Its data
#      root (/var/lib/palaestra/docker) is a filesystem in a sparse loop file that lets Docker
#      limit a container's disk size (storage_mb; overlay2 on ext4 cannot):
#      * XFS mounted with project quotas (/var/lib/palaestra/docker.xfs) and the overlay2
#        driver: containers start in ~0.4 s and are removed in ~0.1 s;
#      * where the kernel has no XFS quota support, btrfs (/var/lib/palaestra/docker.btrfs)
#        and the btrfs driver, with simple quotas where the kernel has them (6.7+): a container
#        starts in ~0.35 s and is removed in ~0.3 s; with full qgroups (older kernels) each
#        removal costs the kernel ~1 s of CPU and starts slow down to seconds.
#      Configurations are tried in turn: that, the same without iptables/bridge, then the
#      default data root, then the vfs storage driver (for machines that are themselves
#      containers);
#   2. builds the base images locally when missing, since no registry may be reachable: a
#      minimal Debian bookworm (debootstrap --variant=minbase, cached in
#      /var/cache/palaestra/bookworm-minbase.tar) imported as debian:bookworm-slim and
#      debian:bookworm, the base the task Dockerfiles name, with the official image's contents
#      (no python3: tasks install what they need); and palaestra/base:bookworm, the default image
#      of sandboxes that name none: that plus python3. An alias an older version of this script
#      made with python3 in it is replaced.
# Environment: PALAESTRA_DEBIAN_MIRROR (default http://deb.debian.org/debian),
#              PALAESTRA_CACHE_DIR (default /var/cache/palaestra),
#              PALAESTRA_DOCKER_QUOTA=0 to keep dockerd's default data root,
#              PALAESTRA_DOCKER_DISK_GB (default 64, at most the free space): the loop file's size.
set -euo pipefail

BASE_IMAGE=palaestra/base:bookworm
ALIASES=(debian:bookworm-slim debian:bookworm)
MIRROR=${PALAESTRA_DEBIAN_MIRROR:-http://deb.debian.org/debian}
CACHE_DIR=${PALAESTRA_CACHE_DIR:-/var/cache/palaestra}
LOG_DIR=/var/log/palaestra
ROOTFS_TAR=$CACHE_DIR/bookworm-minbase.tar
QUOTA_ROOT=/var/lib/palaestra/docker

say() { echo "provision-docker: $*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
  say "must run as root (sudo $0)"
  exit 1
fi
for tool in docker dockerd debootstrap; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    say "$tool is missing; install it with: sudo apt-get install -y docker.io debootstrap"
    exit 1
  fi
done

engine_up() { docker info >/dev/null 2>&1; }

wait_for_engine() {
  local pid=$1
  for _ in $(seq 1 60); do
    engine_up && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.5
  done
  return 1
}

# Makes a sparse loop file $1 of PALAESTRA_DOCKER_DISK_GB (at most the free space) holding a
# fresh filesystem made by the command $2..., unless it is there already.
make_loop_file() {
  local img=$1 free_gb size_gb
  shift
  [ -s "$img" ] && return 0
  mkdir -p "$(dirname "$img")"
  free_gb=$(df -P -BG "$(dirname "$img")" | awk 'NR==2 {sub("G", "", $4); print $4}')
  size_gb=${PALAESTRA_DOCKER_DISK_GB:-64}
  [ "$free_gb" -lt "$size_gb" ] && size_gb=$free_gb
  truncate -s "${size_gb}G" "$img.partial"
  "$@" "$img.partial" >/dev/null 2>&1 && mv "$img.partial" "$img" || {
    rm -f "$img.partial"
    return 1
  }
}

# Mounts XFS with project quotas at $QUOTA_ROOT (overlay2 limits a container's size with them).
mount_xfs_root() {
  local img=/var/lib/palaestra/docker.xfs
  command -v mkfs.xfs >/dev/null 2>&1 || { say "no mkfs.xfs (apt-get install xfsprogs)"; return 1; }
  make_loop_file "$img" mkfs.xfs -q || return 1
  mount -o loop,prjquota "$img" "$QUOTA_ROOT" 2>>"$LOG_DIR/dockerd.log" && return 0
  say "cannot mount XFS with project quotas (kernel without XFS quota support, or no loop devices)"
  rm -f "$img" # it would fail the same way next time: the btrfs data root takes its place
  return 1
}

# Mounts btrfs at $QUOTA_ROOT, quotas on (the btrfs driver limits a container's size with them).
mount_btrfs_root() {
  local img=/var/lib/palaestra/docker.btrfs
  command -v mkfs.btrfs >/dev/null 2>&1 || { say "no mkfs.btrfs (apt-get install btrfs-progs)"; return 1; }
  grep -qw btrfs /proc/filesystems || modprobe btrfs 2>/dev/null || return 1
  make_loop_file "$img" mkfs.btrfs -q || return 1
  mount -o loop "$img" "$QUOTA_ROOT" 2>>"$LOG_DIR/dockerd.log" || {
    say "cannot mount $img (no loop devices?)"
    return 1
  }
}

# Enables btrfs simple quotas on $QUOTA_ROOT (Linux 6.7+; btrfs-progs before 6.7 cannot, the
# ioctl can). They count what a container writes, not the image's files it shares, and deleting
# a container is cheap; full qgroups make the kernel walk every shared extent of a deleted
# subvolume (a core busy for ~1 s per removed container, and the next starts wait).
enable_simple_quotas() {
  btrfs quota enable --simple "$QUOTA_ROOT" >/dev/null 2>&1 && return 0
  command -v python3 >/dev/null 2>&1 || return 1
  python3 - "$QUOTA_ROOT" 2>/dev/null <<'PY'
import fcntl, os, struct, sys
# BTRFS_IOC_QUOTA_CTL with BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA (4)
fcntl.ioctl(os.open(sys.argv[1], os.O_RDONLY), 0xC0109428, bytearray(struct.pack("QQ", 4, 0)))
PY
}

# Quotas on the btrfs data root: simple ones where the kernel has them, else full qgroups with
# the accounting rescanned (a qgroup limit is not enforced while the accounting of subvolumes
# made before quotas were enabled is inconsistent). A root an older version of this script left
# with full qgroups is switched (no engine runs on it now: its containers are gone).
btrfs_quotas() {
  local uuid mode
  uuid=$(findmnt -n -o UUID --target "$QUOTA_ROOT" 2>/dev/null)
  mode=$(cat "/sys/fs/btrfs/$uuid/qgroups/mode" 2>/dev/null)
  [ "$mode" = squota ] && return 0
  if [ "$mode" = qgroup ] && btrfs quota disable "$QUOTA_ROOT" >/dev/null 2>&1; then
    enable_simple_quotas && { say "btrfs data root switched to simple quotas"; return 0; }
  elif [ -z "$mode" ] && enable_simple_quotas; then
    return 0
  fi
  btrfs quota enable "$QUOTA_ROOT" >/dev/null 2>&1 || return 1
  btrfs quota rescan -w "$QUOTA_ROOT" >/dev/null 2>&1 || true
}

# Prints dockerd's arguments for a data root with disk quotas, or nothing when one cannot be
# made here. The data root stays what it is when mounted already (a re-run changes nothing).
quota_data_root() {
  [ "${PALAESTRA_DOCKER_QUOTA:-1}" = 1 ] || return 0
  if ! mountpoint -q "$QUOTA_ROOT"; then
    mkdir -p "$QUOTA_ROOT"
    mount_xfs_root || mount_btrfs_root || {
      say "no data root with disk quotas: storage_mb will not be enforced"
      return 0
    }
  fi
  case $(stat -f -c %T "$QUOTA_ROOT") in
    xfs) echo "--data-root=$QUOTA_ROOT --storage-driver=overlay2" ;;
    btrfs)
      btrfs_quotas || return 0
      echo "--data-root=$QUOTA_ROOT --storage-driver=btrfs"
      ;;
  esac
}

start_dockerd() {
  mkdir -p "$LOG_DIR"
  # Each configuration is tried in turn; the first whose daemon answers stays up.
  local quota configs=()
  quota=$(quota_data_root)
  [ -n "$quota" ] && configs+=("$quota" "$quota --iptables=false --bridge=none")
  configs+=("" "--iptables=false --bridge=none" "--storage-driver=vfs --iptables=false --bridge=none")
  for config in "${configs[@]}"; do
    say "starting dockerd ${config:-(default configuration)}"
    # shellcheck disable=SC2086
    setsid dockerd $config >>"$LOG_DIR/dockerd.log" 2>&1 </dev/null &
    local pid=$!
    if wait_for_engine "$pid"; then
      say "dockerd is up (pid $pid, log $LOG_DIR/dockerd.log)"
      echo "$config" >"$LOG_DIR/dockerd.config"
      return 0
    fi
    say "dockerd ${config:-(default)} did not come up; see $LOG_DIR/dockerd.log"
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    rm -f /var/run/docker.pid
  done
  say "could not start dockerd; see $LOG_DIR/dockerd.log"
  return 1
}

build_rootfs_tar() {
  mkdir -p "$CACHE_DIR"
  local dir
  dir=$(mktemp -d "$CACHE_DIR/bookworm.XXXXXX")
  trap 'rm -rf "$dir" "$ROOTFS_TAR.partial"' EXIT
  say "debootstrap bookworm (minbase) from $MIRROR"
  debootstrap --variant=minbase bookworm "$dir" "$MIRROR" \
    >"$LOG_DIR/debootstrap.log" 2>&1 || {
    say "debootstrap failed; see $LOG_DIR/debootstrap.log"
    exit 1
  }
  rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
  chmod 0755 "$dir" # mktemp made it 0700, and the tar records it as the image's /
  tar --numeric-owner -C "$dir" -cf "$ROOTFS_TAR.partial" .
  mv "$ROOTFS_TAR.partial" "$ROOTFS_TAR" # atomic: a half-written tar is never used
  rm -rf "$dir"
  trap - EXIT
}

engine_up || start_dockerd

# Whether $1 is there without python3 (as Debian's official images are).
official() {
  docker image inspect "$1" >/dev/null 2>&1 &&
    docker run --rm --network none --entrypoint /bin/sh "$1" -c '! test -e /usr/bin/python3'
}

for alias in "${ALIASES[@]}"; do
  official "$alias" && continue
  if ! official "${ALIASES[0]}"; then
    mkdir -p "$LOG_DIR"
    [ -s "$ROOTFS_TAR" ] || build_rootfs_tar
    say "importing $ROOTFS_TAR as ${ALIASES[0]}"
    docker import \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'CMD ["bash"]' \
      "$ROOTFS_TAR" "${ALIASES[0]}" >/dev/null
  fi
  [ "$alias" = "${ALIASES[0]}" ] || docker tag "${ALIASES[0]}" "$alias"
done
if ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1 || official "$BASE_IMAGE"; then
  say "building $BASE_IMAGE (${ALIASES[0]} + python3)"
  printf 'FROM %s\nENV LANG=C.UTF-8\nRUN apt-get update && apt-get install -y --no-install-recommends python3 && rm -rf /var/lib/apt/lists/*\n' \
    "${ALIASES[0]}" | docker build -q -t "$BASE_IMAGE" - >"$LOG_DIR/base-image.log" 2>&1 || {
    say "building $BASE_IMAGE failed; see $LOG_DIR/base-image.log"
    exit 1
  }
fi
say "ready: $(docker image inspect -f '{{.Id}}' "$BASE_IMAGE") as $BASE_IMAGE; ${ALIASES[*]} official"
