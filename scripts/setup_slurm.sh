#!/usr/bin/env bash
# A real SLURM cluster of containers on this machine, for the multi-node runner and its tests (docs/runner.md).
#
#   bash scripts/setup_slurm.sh [up]   # build the image if needed, start the cluster, wait until `sinfo` shows 2 idle nodes
#   bash scripts/setup_slurm.sh env    # KEY=VALUE lines: PATH entry with sbatch & co., the shared workspace, names
#   bash scripts/setup_slurm.sh down   # remove the containers and the network (image and downloads stay cached)
#
# Idempotent and cached. Needs a Docker engine and the CPU base image (bash scripts/setup.sh --docker).
#   1. Debian bookworm's slurmctld, slurmd, slurm-client and munge (.debs) are downloaded ON THE HOST with a private
#      apt state whose dpkg status is the base image's, so exactly the missing packages come (the container reaches
#      no package mirror); kept in .cache/slurm/debs;
#   2. image madengine-rocprof/slurm:<hash> = CPU base + those .debs (docker/slurm/), built offline;
#   3. one private Docker network, one controller (slurmctld; also the login node) and two compute nodes (slurmd)
#      named node1 and node2; one munge key; slurm.conf without cgroups, accounting database or real GPUs;
#      job completions recorded by jobcomp/filetxt; a shared workspace folder mounted at the SAME path everywhere;
#   4. `sbatch`, `squeue`, `scontrol`, `scancel`, `sinfo`, `sacct`, `srun` wrappers in .cache/slurm/<cluster>/bin that
#      run the command on the login node (`docker exec` into the controller), so a program on this machine uses them
#      as it would on a cluster's login node.
# MADENGINE_ROCPROF_SLURM_NAME names the cluster (default: derived from this checkout's path, so two checkouts on
# one machine get two clusters).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
CACHE="$REPO/.cache"
SUITE=bookworm
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
PACKAGES=(slurmctld slurmd slurm-client munge)
BASE_IMAGE=${SLURM_BASE_IMAGE:-madengine-rocprof/cpu-base:latest}
IMAGE_REPO=madengine-rocprof/slurm
NAME=${MADENGINE_ROCPROF_SLURM_NAME:-mrp-slurm-$(printf %s "$REPO" | sha256sum | cut -c1-8)}
STATE="$CACHE/slurm/$NAME"
NODES=(node1 node2)
CTL="$NAME-ctl"
NET="$NAME-net"
TOOLS=(sbatch squeue scontrol scancel sinfo sacct srun)

say() { echo "[setup-slurm] $*"; }
die() { echo "[setup-slurm] error: $*" >&2; exit 1; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

action=${1:-up}
case "$action" in up|down|env) ;; *) die "unknown action '$action' (up, env, down)" ;; esac

print_env() {
  echo "SLURM_CLUSTER=$NAME"
  echo "SLURM_BIN=$STATE/bin"
  echo "SLURM_SHARED=$(mkdir -p "$STATE/shared" && cd "$STATE/shared" && pwd -P)"
  echo "SLURM_CONTROLLER=$CTL"
  echo "SLURM_NODES=$(IFS=,; echo "${NODES[*]}")"
  echo "SLURM_JOBCOMP=/var/log/slurm/jobcomp.log"
}
if [ "$action" = env ]; then print_env; exit 0; fi

command -v docker >/dev/null && docker info >/dev/null 2>&1 \
  || die "no Docker engine answers: run bash scripts/setup.sh --docker first"
mkdir -p "$CACHE/slurm"
exec 9>"$CACHE/slurm/setup.lock"
flock 9

remove_cluster() {
  local c
  for c in "$CTL" "${NODES[@]/#/$NAME-}"; do docker rm -f "$c" >/dev/null 2>&1 || true; done
  docker network rm "$NET" >/dev/null 2>&1 || true
}
if [ "$action" = down ]; then
  remove_cluster
  say "cluster $NAME removed (image and downloaded packages stay cached; outputs stay in $STATE/shared)"
  exit 0
fi

cluster_ready() {  # both nodes idle (or already running jobs) in the controller's view
  local states
  states=$(docker exec "$CTL" sinfo -h -N -o '%N %t' 2>/dev/null | sort -u) || return 1
  [ "$(grep -cE ' (idle|alloc|mix)$' <<<"$states")" -eq "${#NODES[@]}" ]
}
if docker inspect "$CTL" >/dev/null 2>&1 && cluster_ready; then
  say "cluster $NAME is up"
  print_env
  exit 0
fi

docker image inspect "$BASE_IMAGE" >/dev/null 2>&1 \
  || die "base image $BASE_IMAGE missing: run bash scripts/setup.sh --docker first"

# --- 1. packages, downloaded on the host -------------------------------------------------------------------
DEBS="$CACHE/slurm/debs"
APT="$CACHE/slurm/apt"
want="$SUITE ${PACKAGES[*]} $(docker image inspect -f '{{.Id}}' "$BASE_IMAGE")"
if [ "$(cat "$DEBS/.stamp" 2>/dev/null)" != "$want" ]; then
  say "downloading ${PACKAGES[*]} and their missing dependencies from $MIRROR ($SUITE)"
  rm -rf "$APT" "$DEBS.tmp"
  mkdir -p "$APT/lists/partial" "$APT/cache" "$APT/sources.list.d" "$DEBS.tmp/partial"
  keyring=/usr/share/keyrings/debian-archive-keyring.gpg
  if [ ! -f "$keyring" ]; then
    as_root apt-get install -y -qq debian-archive-keyring >/dev/null 2>&1 || die "cannot install debian-archive-keyring"
  fi
  echo "deb [signed-by=$keyring] $MIRROR $SUITE main" >"$APT/sources.list"
  # the base image's dpkg status: apt then fetches exactly what the image lacks
  docker run --rm --entrypoint cat "$BASE_IMAGE" /var/lib/dpkg/status >"$APT/status"
  apt_opts=(-o Dir::Etc::SourceList="$APT/sources.list" -o Dir::Etc::SourceParts="$APT/sources.list.d"
            -o Dir::State::Lists="$APT/lists" -o Dir::State::status="$APT/status" -o Dir::Cache="$APT/cache"
            -o Dir::Cache::archives="$DEBS.tmp" -o Debug::NoLocking=1 -o Acquire::Languages=none
            -o APT::Architecture="$(dpkg --print-architecture 2>/dev/null || echo amd64)")
  for attempt in 1 2; do  # a mirror hiccup should not fail CI: one retry
    if apt-get "${apt_opts[@]}" update -qq >"$CACHE/slurm/apt.log" 2>&1 \
       && apt-get "${apt_opts[@]}" install -y -qq --download-only --no-install-recommends "${PACKAGES[@]}" \
            >>"$CACHE/slurm/apt.log" 2>&1; then
      break
    fi
    tail -20 "$CACHE/slurm/apt.log" >&2
    [ "$attempt" = 2 ] && die "downloading the SLURM packages failed twice: see $CACHE/slurm/apt.log"
    say "download failed; retrying"
  done
  rm -rf "$DEBS.tmp/partial" "$DEBS.tmp/lock"
  echo "$want" >"$DEBS.tmp/.stamp"
  rm -rf "$DEBS" && mv "$DEBS.tmp" "$DEBS"
  say "$(ls "$DEBS"/*.deb | wc -l) packages, $(du -sh "$DEBS" | cut -f1)"
fi

# --- 2. image ------------------------------------------------------------------------------------------------
hash=$( { cat "$DEBS/.stamp"; ls "$DEBS"; cat docker/slurm/Dockerfile docker/slurm/entrypoint.sh; } | sha256sum | cut -c1-12)
IMAGE="$IMAGE_REPO:$hash"
if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  say "image $IMAGE exists"
else
  say "building $IMAGE (offline: $BASE_IMAGE + the downloaded packages)"
  ctx=$(mktemp -d "$CACHE/slurm/context.XXXXXX")
  trap 'rm -rf "$ctx"' EXIT
  cp docker/slurm/Dockerfile docker/slurm/entrypoint.sh "$ctx/"
  mkdir "$ctx/debs" && cp "$DEBS"/*.deb "$ctx/debs/"
  docker build -q --network none --build-arg BASE_DOCKER="$BASE_IMAGE" -t "$IMAGE" "$ctx" >"$CACHE/slurm/build.log" 2>&1 \
    || { tail -30 "$CACHE/slurm/build.log" >&2; die "image build failed: see $CACHE/slurm/build.log"; }
  rm -rf "$ctx"
  trap - EXIT
  for old in $(docker images "$IMAGE_REPO" --format '{{.Repository}}:{{.Tag}}' | grep -v ":$hash\$"); do
    docker rmi "$old" >/dev/null 2>&1 || true
  done
fi

# --- 3. cluster ----------------------------------------------------------------------------------------------
remove_cluster
mkdir -p "$STATE/cluster" "$STATE/shared" "$STATE/bin"
SHARED=$(cd "$STATE/shared" && pwd -P)
if [ ! -s "$STATE/cluster/munge.key" ]; then
  head -c 1024 /dev/urandom >"$STATE/cluster/munge.key"
fi
cat >"$STATE/cluster/slurm.conf" <<EOF
# Local test cluster $NAME (written by scripts/setup_slurm.sh). No cgroups, no accounting database, no GPUs.
ClusterName=${NAME//-/_}
SlurmctldHost=slurmctld
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
# finished jobs are recorded here (JobState, ExitCode, ...), read with sacct --completion or the file itself
JobCompType=jobcomp/filetxt
JobCompLoc=/var/log/slurm/jobcomp.log
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
# the nodes are containers sharing this machine: do not drain them over CPU or memory counts
SlurmdParameters=config_overrides
ReturnToService=2
# SIGTERM, then SIGKILL this much later: time for profilers to write their files on scancel
KillWait=15
MinJobAge=600
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
NodeName=$(IFS=,; echo "${NODES[*]}") CPUs=1 RealMemory=1000 State=UNKNOWN
# the shipped multi-node config asks for partition "gpu": the same two CPU nodes stand in for it
PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
docker network create "$NET" >/dev/null
common=(-d --network "$NET" --init --label "org.madengine-rocprof.slurm=$NAME"
        -v "$STATE/cluster:/run/cluster:ro" -v "$SHARED:$SHARED")
docker run "${common[@]}" --name "$CTL" --hostname slurmctld --network-alias slurmctld "$IMAGE" controller >/dev/null
for node in "${NODES[@]}"; do
  docker run "${common[@]}" --name "$NAME-$node" --hostname "$node" --network-alias "$node" "$IMAGE" node >/dev/null
done

# --- 4. login-node commands ---------------------------------------------------------------------------------
for tool in "${TOOLS[@]}"; do
  cat >"$STATE/bin/$tool" <<EOF
#!/usr/bin/env bash
# $tool on the login node of the local cluster $NAME (its controller container); paths under $SHARED are the same
# on both sides. Written by scripts/setup_slurm.sh.
wd=/
case "\$PWD/" in "$SHARED"/*) wd=\$PWD ;; esac
exec docker exec -i -w "\$wd" $CTL $tool "\$@"
EOF
  chmod +x "$STATE/bin/$tool"
done

say "waiting for ${#NODES[@]} idle nodes"
for ((i = 0; i < 120; i++)); do
  cluster_ready && break
  sleep 0.5
done
if ! cluster_ready; then
  docker exec "$CTL" sinfo -N >&2 || true
  for c in "$CTL" "${NODES[@]/#/$NAME-}"; do echo "--- $c" >&2; docker logs --tail 15 "$c" >&2 || true; done
  die "the cluster did not come up (see above); remove it with: bash scripts/setup_slurm.sh down"
fi
docker exec "$CTL" sinfo
print_env
