#!/usr/bin/env bash
# A running Docker engine plus the CPU workload image, with no container registry.
# Called by `bash scripts/setup.sh --docker`. Idempotent and cached: every step is skipped when its
# result (daemon answering, image with the same content hash) already exists.
#
#   1. docker.io + debootstrap from Debian's packages when missing (root);
#   2. dockerd started when `docker info` does not answer (overlay2, then vfs), logged to .cache/docker/dockerd.log;
#   3. a wheelhouse under .cache/wheelhouse: the torch CPU wheel (/opt/wheels) + triton + numpy + their dependencies,
#      downloaded by pip on the host (the container reaches no registry);
#   4. the local base image madengine-rocprof/cpu-base:<hash>: debootstrap a minimal Debian with python3 + pip,
#      install the wheelhouse into it, `docker import`;
#   5. the CPU workload image, built from docker/tinytransformer.debian.cpu.Dockerfile by the runner's own build code.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)

CACHE="$REPO/.cache"
WHEELHOUSE="$CACHE/wheelhouse"
LOG="$CACHE/docker/dockerd.log"
SUITE=bookworm                       # Debian 12: python3.11, the ABI of the torch CPU wheel
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
WHEELS=(torch==2.13.0 triton==3.9.0 numpy==2.4.6)   # same pins as requirements-dev.txt
BASE_REPO=madengine-rocprof/cpu-base
INCLUDE=python3,python3-pip,ca-certificates,procps   # procps: ps/kill for debugging inside the container
PY=${PYTHON:-$REPO/.venv/bin/python}

say() { echo "[setup-docker] $*"; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
mkdir -p "$CACHE/docker"

# Two test runs may call this at once: one builds, the other waits.
exec 9>"$CACHE/docker/setup.lock"
flock 9

# --- 1. packages -------------------------------------------------------------------------------------------
missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v debootstrap >/dev/null || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]} from Debian's packages"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >"$CACHE/docker/apt.log" 2>&1 \
    || { tail -20 "$CACHE/docker/apt.log" >&2; exit 1; }
fi

# --- 2. daemon ---------------------------------------------------------------------------------------------
wait_for_docker() {  # $1 = seconds
  local i
  for ((i = 0; i < $1 * 2; i++)); do
    docker info >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  return 1
}
if docker info >/dev/null 2>&1; then
  say "docker engine answers"
else
  started=0
  for driver in overlay2 vfs; do
    say "starting dockerd (storage driver $driver), log: $LOG"
    echo "=== $(date -u +%FT%TZ) dockerd --storage-driver=$driver" >>"$LOG"
    # 9>&-: the daemon outlives this script and must not inherit the setup lock (a second setup would wait forever)
    as_root setsid nohup dockerd --storage-driver="$driver" >>"$LOG" 2>&1 </dev/null 9>&- &
    pid=$!
    if wait_for_docker 60; then started=1; break; fi
    say "dockerd did not answer with $driver; last log lines:"
    tail -5 "$LOG" >&2 || true
    as_root kill "$pid" 2>/dev/null || true
    sleep 2
  done
  [ "$started" = 1 ] || { say "could not start dockerd: see $LOG" >&2; exit 1; }
  say "docker engine answers: $(docker info --format '{{.ServerVersion}} {{.Driver}}')"
fi

# --- 3. wheelhouse -----------------------------------------------------------------------------------------
wheel_stamp="$WHEELHOUSE/.requirements"
if [ "$(cat "$wheel_stamp" 2>/dev/null)" != "${WHEELS[*]}" ]; then
  say "downloading wheels for the container into $WHEELHOUSE: ${WHEELS[*]}"
  rm -rf "$WHEELHOUSE.tmp"
  # (pip's notes about this machine's unused local indexes are filtered out)
  "$PY" -m pip download -q --only-binary=:all: -d "$WHEELHOUSE.tmp" "${WHEELS[@]}" 2> >(grep -v "is ignored: it is" >&2)
  if ls "$WHEELHOUSE.tmp" | grep -q '^nvidia'; then
    say "pip picked a CUDA torch (no CPU wheel in /opt/wheels?): refusing several GB of CUDA wheels" >&2
    exit 1
  fi
  echo "${WHEELS[*]}" >"$WHEELHOUSE.tmp/.requirements"
  rm -rf "$WHEELHOUSE" && mv "$WHEELHOUSE.tmp" "$WHEELHOUSE"
else
  say "wheelhouse is up to date"
fi

# --- 4. base image -----------------------------------------------------------------------------------------
# Content hash: the recipe (suite, packages) + the exact wheel files.
base_hash=$( { echo "$SUITE minbase $INCLUDE"; ls "$WHEELHOUSE"; } | sha256sum | cut -c1-12)
BASE_IMAGE="$BASE_REPO:$base_hash"
if docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  say "base image $BASE_IMAGE exists"
else
  rootfs=$(mktemp -d "$CACHE/docker/rootfs.XXXXXX")
  trap 'as_root umount "$rootfs/proc" 2>/dev/null || true; as_root rm -rf "$rootfs"' EXIT
  say "debootstrap $SUITE (minbase + python3, pip) into $rootfs"
  for attempt in 1 2; do  # a mirror hiccup should not fail CI: one retry from scratch
    if as_root debootstrap --variant=minbase --include="$INCLUDE" \
         "$SUITE" "$rootfs" "$MIRROR" >"$CACHE/docker/debootstrap.log" 2>&1; then
      break
    fi
    tail -20 "$CACHE/docker/debootstrap.log" >&2
    [ "$attempt" = 2 ] && { say "debootstrap failed twice: see $CACHE/docker/debootstrap.log" >&2; exit 1; }
    say "debootstrap failed; retrying"
    as_root rm -rf "$rootfs" && mkdir -p "$rootfs"
  done
  say "installing the wheelhouse into the base (offline)"
  as_root mkdir -p "$rootfs/tmp/wheelhouse"
  as_root cp "$WHEELHOUSE"/*.whl "$rootfs/tmp/wheelhouse/"
  as_root mount -t proc proc "$rootfs/proc"
  # env -i: the host's PIP_* settings (find-links, extra indexes) mean nothing inside the chroot.
  as_root env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
    chroot "$rootfs" python3 -m pip install -q --no-index --no-cache-dir --break-system-packages --root-user-action=ignore \
    --find-links /tmp/wheelhouse "${WHEELS[@]}"
  as_root umount "$rootfs/proc"
  as_root rm -rf "$rootfs/tmp/wheelhouse" "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  say "docker import -> $BASE_IMAGE"
  as_root tar -C "$rootfs" -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV PYTHONUNBUFFERED=1' \
    --change 'CMD ["bash"]' - "$BASE_IMAGE" >/dev/null
  as_root rm -rf "$rootfs"
  trap - EXIT
fi
docker tag "$BASE_IMAGE" "$BASE_REPO:latest"
# Older bases are 2 GB each: drop their tags (an image still used by a container stays).
for old in $(docker images "$BASE_REPO" --format '{{.Repository}}:{{.Tag}}' | grep -v -e ":$base_hash\$" -e ':latest$'); do
  say "removing the previous base $old"
  docker rmi "$old" >/dev/null 2>&1 || true
done

# --- 5. CPU workload image ---------------------------------------------------------------------------------
say "CPU workload image (skipped when its content hash exists)"
"$PY" -m madengine_rocprof.runner.images --model tiny_llama_v1 --gpu-vendor CPU
say "done"
