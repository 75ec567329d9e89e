#!/usr/bin/env bash
# Starts munged with the cluster's shared key, then the SLURM daemon of this container's role in the foreground
# (its log goes to `docker logs`): `controller` runs slurmctld, `node` runs slurmd.
set -euo pipefail
role=${1:?usage: slurm-entrypoint controller|node}
install -o munge -g munge -m 0400 /run/cluster/munge.key /etc/munge/munge.key
chown munge:munge /run/munge /var/lib/munge /var/log/munge 2>/dev/null || true
runuser -u munge -- /usr/sbin/munged
case "$role" in
  controller) exec slurmctld -D ;;
  node) exec slurmd -D ;;
  *) echo "slurm-entrypoint: unknown role '$role' (controller|node)" >&2; exit 2 ;;
esac
