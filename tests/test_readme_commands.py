"""Every command block of README.md that can run without a GPU runs, as written, on a fresh clone.

Data-driven from README.md (other changes edit it): fenced shell blocks and 4-space indented blocks are read, each
command (backslash continuations joined) is either run or skipped by one of SKIP_RULES with its reason. The runnable
commands of a block run in order in one `bash -euo pipefail`, in a `git clone` of this checkout's committed HEAD, with
this checkout's `.venv` (linked as the clone's `.venv`; PYTHONPATH makes the clone's own package and resources the
ones used), no Docker engine (`DOCKER_HOST` points nowhere: runs are local) and a fresh `MADENGINE_ROCPROF_HOME`.
Blocks of `bash scripts/...` commands run in a fresh shell (no venv activated); the others as the README says after
the quick start, in the activated venv.
Afterwards the clone's tree must be as clean as it was: outputs go to ignored folders only.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHELL_LANGS = {"", "bash", "sh", "shell", "console"}

# (pattern over one command, why it is not run here); the first match wins
SKIP_RULES: list[tuple[str, str]] = [
    (r"scripts/test\.sh", "runs the whole test suite (this test is part of it)"),
    (r"setup\.sh --docker|setup_docker\.sh|setup_slurm\.sh|--runner (docker|slurm)", "needs Docker"),
    (r"^madengine\s|install --madengine", "needs an installed upstream madengine"),
    (r"\bpip install\b", "installs into the environment"),
    (r"compute_bound|memory_bound|pc_sampling|comprehensive|multi_node",
     "counters or PC sampling: needs rocprofv3 or ncu (a GPU)"),
    (r"benchmarks/[^ ]+\.sh|--device cuda", "needs a GPU"),
    (r"run --tags tiny_llama_v[234]\b", "minutes on a CPU (v2-v4 through the runner; run.sh --validate covers v4)"),
    (r"report my_torch_traces/", "needs the traces the README's Python block records; "
     "tests/reports/test_reports_kineto.py runs the two together"),
]


@dataclass
class Command:
    line: int  # README line of its first line
    text: str


@dataclass
class Block:
    line: int
    commands: list[Command]


def readme_blocks(text: str) -> list[Block]:
    """Shell blocks: fenced (```bash, ```sh, ``` ...) and indented by 4 spaces after a blank line."""
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        fence = re.match(r"^```(\w*)\s*$", lines[i])
        if fence:
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            if fence.group(1) in SHELL_LANGS:
                blocks.append(Block(i + 2, _commands(lines[i + 1 : j], i + 2)))
            i = j + 1
            continue
        if lines[i].startswith("    ") and (i == 0 or not lines[i - 1].strip()):
            j = i
            while j < len(lines) and (lines[j].startswith("    ") or (not lines[j].strip() and j + 1 < len(lines)
                                                                       and lines[j + 1].startswith("    "))):
                j += 1
            blocks.append(Block(i + 1, _commands([x[4:] for x in lines[i:j]], i + 1)))
            i = j
            continue
        i += 1
    return [b for b in blocks if b.commands]


def _commands(body: list[str], first_line: int) -> list[Command]:
    out: list[Command] = []
    pending: list[str] = []
    start = first_line
    for n, raw in enumerate(body):
        if not pending:
            start = first_line + n
        pending.append(raw)
        if raw.rstrip().endswith("\\"):
            continue
        text = "\n".join(pending).strip()
        pending = []
        if text and not text.startswith("#"):
            out.append(Command(start, text))
    return out


def skip_reason(command: str) -> str | None:
    for pattern, reason in SKIP_RULES:
        if re.search(pattern, command, re.M):
            return reason
    return None


def test_readme_blocks_are_found_and_some_run_without_a_gpu():
    blocks = readme_blocks((REPO / "README.md").read_text())
    commands = [c for b in blocks for c in b.commands]
    assert commands, "no shell command found in README.md"
    runnable = [c.text for c in commands if skip_reason(c.text) is None]
    # the front door: the quickstart, the workload script and the report of the quickstart's runs
    assert any("quickstart.sh" in c for c in runnable), runnable
    assert any(c.startswith("madengine-rocprof report") for c in runnable), runnable


def _venv_problem(venv: Path, clone: Path) -> str | None:
    if not (venv / "bin" / "python").exists():
        return f"no {venv}: run bash scripts/setup.sh"
    want = hashlib.sha256(b"".join((clone / f).read_bytes() for f in
                                   ("requirements.txt", "requirements-dev.txt", "setup.cfg"))).hexdigest()
    stamp = venv / ".requirements.sha"
    if not stamp.is_file() or stamp.read_text().strip() != want:
        # setup.sh in the clone would reinstall into the shared venv (and point its editable install at the clone)
        return f"{venv} is not up to date with the committed requirements: run bash scripts/setup.sh"
    return None


@pytest.mark.slow
def test_readme_commands_run_on_a_fresh_clone(tmp_path):
    if not shutil.which("git"):
        pytest.skip("git is not installed")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True, timeout=300)
    venv = REPO / ".venv"
    problem = _venv_problem(venv, clone)
    if problem:
        pytest.skip(problem)
    (clone / ".venv").symlink_to(venv)
    base_env = {k: v for k, v in os.environ.items()
                if not k.startswith(("MADENGINE_ROCPROF", "VIRTUAL_ENV", "PYTHON", "DOCKER_"))}
    base_env.update(
        PATH="/usr/local/bin:/usr/bin:/bin",
        PYTHONPATH=str(clone),
        DOCKER_HOST="unix:///nonexistent/docker.sock",  # no engine: `run` picks the local runner
        MADENGINE_ROCPROF_HOME=str(tmp_path / "home"),
    )
    activated = dict(base_env, VIRTUAL_ENV=str(clone / ".venv"), PATH=f"{clone / '.venv' / 'bin'}:{base_env['PATH']}")
    ran: list[str] = []
    skipped: list[tuple[Command, str | None]] = []
    for block in readme_blocks((clone / "README.md").read_text()):
        runnable: list[tuple[Command, str | None]] = []
        for command in block.commands:
            reason = skip_reason(command.text)
            (skipped if reason else runnable).append((command, reason))
        if not runnable:
            continue
        script = "\n".join(c.text for c, _ in runnable)
        # the repository's scripts need no activated venv (that is part of what is tested); the CLI and Python do
        env = base_env if all(c.text.startswith("bash scripts/") for c, _ in runnable) else activated
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=clone, env=env, capture_output=True,
                              text=True, timeout=900)
        assert done.returncode == 0, (
            f"README.md line {block.line}: exit {done.returncode}\n{script}\n--- stdout\n{done.stdout[-3000:]}"
            f"\n--- stderr\n{done.stderr[-3000:]}"
        )
        ran += [c.text for c, _ in runnable]
    assert ran
    # nothing left in the tree: every output went to an ignored folder
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=clone,
                            capture_output=True, text=True, check=True).stdout
    status = "".join(line + "\n" for line in status.splitlines() if line != "?? .venv")  # our link (`.venv/` ignores
    # the folder a real setup makes, not a link)
    assert status == "", f"the README commands left files in the checkout:\n{status}"
    print("ran:", *ran, "skipped:", *(f"{c.text.splitlines()[0]} ({r})" for c, r in skipped), sep="\n  ")
