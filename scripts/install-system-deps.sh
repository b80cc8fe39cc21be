#!/usr/bin/env bash
# Installs the system packages palaestra needs when missing: bubblewrap and libseccomp2 for the
# local sandbox (required); gcc and libc6-dev to build the sandbox helper in C (recommended: installed with the
# required ones as root); tmux (terminus scaffold), chromium (report test), docker.io, debootstrap,
# xfsprogs and btrfs-progs (docker backend) and the toolchains of the generated C, Rust, Go,
# Node.js and PostgreSQL families are optional: their tests skip without them (CI installs them,
# as root). Runs apt-get only as root; otherwise says what to install. --required-only (what
# `make demo` passes) leaves the optional packages alone.
set -euo pipefail
required_only=false
[ "${1:-}" = "--required-only" ] && required_only=true
missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
# the local sandbox's seccomp filter is compiled by libseccomp (through PyPI's pyseccomp)
if command -v dpkg-query >/dev/null 2>&1 &&
  ! dpkg-query -W -f '${Status}' libseccomp2 2>/dev/null | grep -q 'ok installed'; then
  missing+=(libseccomp2)
fi
# the built-in tasks' Dockerfiles `apt-get install python3`: the local backend replays that
# without an image build when the host has the Debian package (a pyenv/conda Python is not it)
if command -v dpkg-query >/dev/null 2>&1 &&
  ! dpkg-query -W -f '${Status}' python3 2>/dev/null | grep -q 'ok installed'; then
  missing+=(python3)
fi
# the sandbox helper is compiled in C, statically (without them sandboxes start its Python
# twin, ~10 ms slower each): installed with the required packages when running as root
recommended=()
for package in gcc libc6-dev; do
  dpkg-query -W -f '${Status}' "$package" 2>/dev/null | grep -q 'ok installed' ||
    recommended+=("$package")
done
if [ ${#recommended[@]} -gt 0 ] && [ "$(id -u)" -eq 0 ]; then
  missing+=("${recommended[@]}")
elif [ ${#recommended[@]} -gt 0 ]; then
  echo "note: sandboxes start faster with ${recommended[*]} installed (sudo apt-get install -y" \
    "${recommended[*]}): the sandbox helper is then built in C" >&2
fi
optional=()
# the terminus scaffold runs tmux inside the sandbox (the local one binds the host's /usr)
command -v tmux >/dev/null 2>&1 || optional+=(tmux)
# headless Chromium for the HTML report's browser test (tests/run/test_report.py)
command -v chromium >/dev/null 2>&1 || optional+=(chromium)
# the docker backend: the engine, debootstrap for the base image, xfsprogs (or, on kernels
# without XFS quotas, btrfs-progs) for disk quotas
command -v dockerd >/dev/null 2>&1 || optional+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || optional+=(debootstrap)
command -v mkfs.xfs >/dev/null 2>&1 || optional+=(xfsprogs)
command -v mkfs.btrfs >/dev/null 2>&1 || optional+=(btrfs-progs)
# npm installs the real coding-agent CLIs of the harness scaffolds (`palaestra harness
# install`, run by `make setup`); they run as native executables, no Node.js in the sandbox
command -v npm >/dev/null 2>&1 || optional+=(npm)
# the generated families in other languages: their Dockerfiles `apt-get install` these, which
# the local backend then finds on the host (keep in step with generators/_toolchains.py)
for package in rustc golang-go nodejs postgresql; do
  dpkg-query -W -f '${Status}' "$package" 2>/dev/null | grep -q 'ok installed' ||
    optional+=("$package")
done
if $required_only; then
  :
elif [ "$(id -u)" -eq 0 ]; then
  missing+=("${optional[@]}")
elif [ ${#optional[@]} -gt 0 ]; then
  echo "note: optional parts need ${optional[*]} (sudo apt-get install -y ${optional[*]}" \
    "&& sudo scripts/provision-docker.sh); the tests that need them skip without them" >&2
fi
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "palaestra needs: ${missing[*]}. Install with: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "installing system packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
