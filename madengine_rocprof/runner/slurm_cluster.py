"""Talking to SLURM through its client commands, as on a login node: `sinfo` (partitions, GPUs), `sbatch`,
`squeue` (live state), `scontrol show job` / `sacct` (final state and exit code), `scancel`.
All commands run with argument lists, never through a shell."""
from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

from madengine_rocprof.errors import UserError

CLIENT_COMMANDS = ("sbatch", "squeue", "scontrol", "scancel", "sinfo")
ACTIVE_STATES = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING", "STOPPED",
                 "SIGNALING", "STAGE_OUT", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "SPECIAL_EXIT"}
FIX_PATH = ("run on the cluster's login node, or put the SLURM client commands on PATH "
            "(local test cluster: bash scripts/setup_slurm.sh, then PATH=$SLURM_BIN:$PATH)")


class SlurmError(Exception):
    """A SLURM command failed (the cluster, not the user's input)."""


def _run(argv: list[str], timeout: float = 30) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise SlurmError(f"`{' '.join(argv)}` did not answer within {timeout:g}s") from None
    except OSError as err:
        raise SlurmError(f"cannot run {argv[0]}: {err.strerror}") from None


def require_client() -> None:
    missing = [c for c in CLIENT_COMMANDS if shutil.which(c) is None]
    if missing:
        raise UserError(f"no {', '.join(missing)} on PATH: the SLURM runner submits jobs with SLURM's own commands",
                        where="--runner slurm", fix=FIX_PATH)


@dataclass
class Partition:
    name: str
    default: bool
    nodes: int
    gpus: bool          # some node of the partition offers a gpu GRES


def partitions() -> dict[str, Partition]:
    out = _run(["sinfo", "-h", "-o", "%P|%D|%G"])
    if out.returncode != 0:
        raise UserError(f"sinfo failed: {(out.stderr or out.stdout).strip()}", where="--runner slurm",
                        fix="check that the cluster answers (sinfo) from this machine")
    found: dict[str, Partition] = {}
    for line in out.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 3 or not parts[1].isdigit():
            continue
        name, default = parts[0].rstrip("*"), parts[0].endswith("*")
        entry = found.setdefault(name, Partition(name, default, 0, False))
        entry.nodes += int(parts[1])  # sinfo prints one line per node state
        entry.gpus |= any(g.strip().startswith("gpu") for g in parts[2].split(","))
    return found


def pick_partition(requested: str | None, nodes: int) -> Partition:
    """The requested partition (or the default one), checked to exist and to have enough nodes."""
    known = partitions()
    if not known:
        raise UserError("sinfo lists no partition", where="--runner slurm", fix="check the cluster's configuration")
    if requested is None:
        chosen = next((p for p in known.values() if p.default), None)
        if chosen is None:
            raise UserError("the cluster has no default partition", where="slurm.partition",
                            fix="name one of: " + ", ".join(sorted(known)))
    elif requested not in known:
        raise UserError(f"partition '{requested}' does not exist on this cluster", where="slurm.partition",
                        fix="use one of: " + ", ".join(sorted(known)))
    else:
        chosen = known[requested]
    if nodes > chosen.nodes:
        raise UserError(f"{nodes} nodes requested, partition '{chosen.name}' has {chosen.nodes}", where="slurm.nodes",
                        fix=f"ask for at most {chosen.nodes} nodes, or another partition")
    return chosen


def submit(script: str) -> str:
    out = _run(["sbatch", "--parsable", script], timeout=60)
    if out.returncode != 0:
        raise SlurmError(f"sbatch refused the job: {(out.stderr or out.stdout).strip()}")
    job_id = out.stdout.strip().split(";")[0]
    if not job_id.isdigit():
        raise SlurmError(f"sbatch printed no job id: {out.stdout.strip()!r}")
    return job_id


@dataclass
class JobState:
    state: str                # PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, ... or UNKNOWN
    exit_code: str = ""       # "code:signal", as SLURM writes it
    nodes: str = ""
    reason: str = ""
    source: str = ""          # which command said so

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES


def _fields(text: str) -> dict[str, str]:
    return dict(tok.split("=", 1) for tok in text.split() if "=" in tok)


def job_state(job_id: str) -> JobState:
    """Live state from squeue, else the final record: `scontrol show job` (kept MinJobAge seconds), then sacct
    (slurmdbd accounting), then sacct --completion (jobcomp plugins such as jobcomp/filetxt)."""
    out = _run(["squeue", "-h", "-j", job_id, "-o", "%T|%N|%r"])
    if out.returncode == 0 and out.stdout.strip():
        state, nodes, reason = (out.stdout.strip().splitlines()[0].split("|") + ["", ""])[:3]
        if state in ACTIVE_STATES:
            return JobState(state, nodes=nodes, reason=reason if reason != "None" else "", source="squeue")
    out = _run(["scontrol", "-o", "show", "job", job_id])
    if out.returncode == 0 and "JobState=" in out.stdout:
        f = _fields(out.stdout)
        return JobState(f.get("JobState", "UNKNOWN"), f.get("ExitCode", ""), f.get("NodeList", ""),
                        f.get("Reason", "") if f.get("Reason") != "None" else "", "scontrol")
    for extra in ([], ["--completion"]):
        try:
            out = _run(["sacct", *extra, "-n", "-X", "-P", "-j", job_id, "-o", "State,ExitCode,NodeList"])
        except SlurmError:  # no sacct on this login node
            break
        line = out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else ""
        if line:
            state, code, nodes = (line.split("|") + ["", ""])[:3]
            return JobState(state.split()[0], code, nodes, source="sacct" + (" --completion" if extra else ""))
    return JobState("UNKNOWN", source="no record (squeue, scontrol, sacct)")


def cancel(job_id: str) -> str:
    """scancel: SIGTERM to every task, SIGKILL KillWait seconds later. Returns an error text, or ''."""
    try:
        out = _run(["scancel", job_id])
    except SlurmError as err:
        return str(err)
    return "" if out.returncode == 0 else (out.stderr or out.stdout).strip()
