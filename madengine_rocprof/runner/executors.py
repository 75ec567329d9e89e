"""Where the steps run: a Docker container (madengine's way: one long-lived container, one `exec` per step) or
this machine. Both give every step a time limit, a log that streams as it goes, and a clean way to stop it: every
step runs under reaper.py, which sends SIGTERM to the step's whole process tree (setsid children included), gives
profilers a grace period to write their files, then SIGKILL; what a step leaves running ends with it."""
from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol, cast

if TYPE_CHECKING:
    from docker.models.containers import Container

from madengine_rocprof.runner import stopping

GRACE_S = 15.0            # after SIGTERM, time for a profiler to flush before SIGKILL
TIMEOUT_EXIT_CODES = (124, 137)

REAPER = Path(__file__).with_name("reaper.py")  # standard library only: runs as a script, in containers too
LEFTOVER_S = 7.0          # the reaper's 5 s for what a stopped step left running, plus its own start and end
ROOM_FOR_RESULTS = 256 * 1024  # log bytes given back on a full disk, for run.json and perf.csv
HURRY_AFTER_S = 2.0       # a second Ctrl-C/SIGTERM: how long the tree gets before SIGKILL
# Inside the container: record the step's pid, then run the step under the reaper (the whole tree ends with it);
# an image without python3 falls back to coreutils `timeout` (a process group: setsid children escape it).
STEP_SCRIPT = ('echo $$ > "$1"; if command -v python3 >/dev/null 2>&1; then '
               'exec python3 "$5" --grace "$2" --timeout "$3" -- bash -c "$4"; fi; '
               'exec timeout -k "$2" "$3" bash -c "$4"')
BACKGROUND_SCRIPT = 'echo $$ > "$1"; exec "${@:3}" > "$2" 2>&1'


@dataclass
class StepResult:
    name: str
    exit_code: int | None
    duration_s: float
    timed_out: bool = False
    interrupted: bool = False
    log: str = ""
    log_error: str = ""  # the log could not be written in full (a full disk): what was kept, and why


    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and not self.interrupted

    def describe(self) -> str:
        if self.interrupted:
            return "interrupted"
        if self.timed_out:
            return "timed out"
        return "ok" if self.exit_code == 0 else f"exit code {self.exit_code}"


class Tee:
    """Copies a step's output to its log file (and, with `echo`, to the screen, indented)."""

    def __init__(self, log: BinaryIO, echo: bool) -> None:  # an unbuffered file
        self.log, self.echo, self._at_line_start = log, echo, True
        self.error: OSError | None = None  # the first write error (a full disk): the log stops, the pipe keeps draining
        self.done = threading.Event()      # the stream ended and every chunk was handled

    def drain(self, chunks: Iterable[bytes]) -> None:
        """Write every chunk until the stream ends (a reader thread's target). Never raises (write() keeps a full
        disk's error), so the workload never blocks on a pipe nobody reads."""
        try:
            for chunk in chunks:
                self.write(chunk)
        finally:
            self.done.set()

    def write(self, chunk: bytes) -> None:
        if self.error is None:
            try:
                view = memoryview(chunk)
                while view:  # an unbuffered write may be short: the rest, or the error, comes next
                    view = view[self.log.write(view) or 0:]
            except OSError as err:
                self.error = err
                self._make_room()
        if self.echo:
            text = chunk.decode("utf-8", errors="replace")
            out = []
            for piece in text.splitlines(keepends=True):
                out.append(("    | " if self._at_line_start else "") + piece)
                self._at_line_start = piece.endswith("\n")
            try:
                sys.stdout.write("".join(out))
                sys.stdout.flush()
            except (OSError, ValueError):  # a closed terminal (SIGHUP) must not stop the copy to the log
                self.echo = False

    def _make_room(self) -> None:
        """A full disk: give back the log's last piece so run.json and the perf.csv row still fit, and say so."""
        try:
            fd = self.log.fileno()
            keep = max(0, os.fstat(fd).st_size - ROOM_FOR_RESULTS)
            os.ftruncate(fd, keep)
            os.pwrite(fd, b"\n[madengine-rocprof] the disk is full: the rest of this log is lost\n", keep)
        except (OSError, ValueError):
            pass  # nothing more can be done for the log; the results are still attempted

def _wait_drained(tee: Tee, seconds: float) -> bool:
    """Wait in short slices (Ctrl-C reaches the main thread promptly) for the output to end; True when it did.
    An Event, not Thread.is_alive(): a join interrupted by a signal can leave is_alive() wrongly False (CPython
    3.11), and the log must not be closed while its thread still writes."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if tee.done.wait(min(0.2, max(0.0, deadline - time.monotonic()))):
            return True
    return tee.done.is_set()


def _wait_proc(proc: subprocess.Popen, seconds: float) -> bool:
    """Wait for a process being stopped; a second signal (`stopping.hurry`) cuts the wait short. True when it ended."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not stopping.hurry():
        try:
            proc.wait(timeout=0.1)
            return True
        except subprocess.TimeoutExpired:
            continue
    return proc.poll() is not None


def _wait_proc_plain(proc: subprocess.Popen, seconds: float) -> bool:
    try:
        proc.wait(timeout=seconds)
        return True
    except subprocess.TimeoutExpired:
        return False


def _log_error(tee: Tee, log_path: Path) -> str:
    if tee.error is None:
        return ""
    return f"{log_path.name} incomplete: {tee.error.strerror or tee.error} (the output after that point is lost)"


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


class Executor(Protocol):
    """Where a run's steps execute. The lifecycle (runner/lifecycle.py) needs only this: paths as the steps see
    them, steps with a time limit and a streamed log, background samplers, and a close() that always cleans up."""

    kind: str               # "local", "docker", ...
    workspace: str          # the run directory as the steps see it
    plugin_home: str        # this plugin (wrapper script, counters) as the steps see it
    python: str             # the interpreter that runs the samplers
    state: Path             # host folder for pid and stop files (<run dir>/.runner)
    image_id: str           # the image the steps run in ("" locally)

    def start(self) -> None: ...

    def run_step(self, name: str, command: str, cwd: str, timeout: float, log_path: Path, echo: bool = True,
                 env: dict[str, str] | None = None) -> StepResult: ...

    def start_background(self, name: str, argv: list[str], log_path: Path,
                         env: dict[str, str] | None = None) -> None: ...

    def stop_background(self, name: str, stop_file: Path, grace: float = 5.0) -> int | None: ...

    def close(self) -> None: ...


class LocalExecutor:
    """Runs steps on this machine with the same environment and layout a container would see."""

    kind = "local"

    def __init__(self, workspace: Path, plugin_home: Path, env: dict[str, str], python: str = sys.executable) -> None:
        self.workspace = str(workspace)
        self.plugin_home = str(plugin_home)
        self.python = python
        self.env = env
        self.state = workspace / ".runner"
        self.image_id = ""
        self._background: dict[str, subprocess.Popen] = {}

    def start(self) -> None:
        self.state.mkdir(parents=True, exist_ok=True)

    def run_step(self, name: str, command: str, cwd: str, timeout: float, log_path: Path, echo: bool = True,
                 env: dict[str, str] | None = None) -> StepResult:
        started = time.monotonic()
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "wb", buffering=0) as log:  # unbuffered: a full disk fails the write, not close()
            argv = [self.python, str(REAPER), "--grace", f"{GRACE_S:g}", "--", "bash", "-c", command]
            proc = subprocess.Popen(argv, cwd=cwd, env={**self.env, **(env or {})},
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)  # a terminal's Ctrl-C reaches us only, not the step
            tee = Tee(log, echo)
            out = cast(io.BufferedReader, proc.stdout)  # stdout=PIPE in binary mode: a buffered reader
            reader = threading.Thread(target=tee.drain, args=(iter(lambda: out.read1(65536), b""),), daemon=True)
            reader.start()
            timed_out = interrupted = False
            try:
                try:
                    proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    timed_out = True
                    self._stop_step(proc)
            except KeyboardInterrupt:
                interrupted = True
                self._stop_step(proc)
            # The reaper ended the step's tree; anything left holding the pipe goes too.
            _signal_group(proc.pid, signal.SIGTERM)
            if not _wait_drained(tee, 5):
                _signal_group(proc.pid, signal.SIGKILL)
                _wait_drained(tee, 5)
        code = proc.returncode
        return StepResult(name, code, time.monotonic() - started, timed_out, interrupted, str(log_path),
                          _log_error(tee, log_path))

    @staticmethod
    def _stop_step(proc: subprocess.Popen) -> None:
        """SIGTERM to the reaper: it stops the whole tree (grace, then SIGKILL). A second signal: no more grace."""
        _signal_group(proc.pid, signal.SIGTERM)
        if _wait_proc(proc, GRACE_S + LEFTOVER_S):
            return
        if stopping.hurry():
            _signal_group(proc.pid, signal.SIGTERM)  # the reaper's second signal: SIGKILL to the tree now
            if _wait_proc_plain(proc, HURRY_AFTER_S):
                return
        _signal_group(proc.pid, signal.SIGKILL)
        _wait_proc_plain(proc, 5.0)

    @staticmethod
    def _stop_group(proc: subprocess.Popen) -> None:
        for sig, wait in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                return
            if _wait_proc(proc, wait) or sig == signal.SIGKILL:
                return

    def start_background(self, name: str, argv: list[str], log_path: Path, env: dict[str, str] | None = None) -> None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "wb") as log:
            self._background[name] = subprocess.Popen(argv, cwd=self.workspace, env={**self.env, **(env or {})},
                                                      stdout=log, stderr=subprocess.STDOUT,
                                                      stdin=subprocess.DEVNULL, start_new_session=True)

    def stop_background(self, name: str, stop_file: Path, grace: float = 5.0) -> int | None:
        proc = self._background.pop(name, None)
        if proc is None:
            return None
        stop_file.touch()
        try:
            return proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self._stop_group(proc)
            return proc.returncode

    def close(self) -> None:
        for name in list(self._background):
            self.stop_background(name, self.state / f"stop_{name}", grace=1.0)


class DockerExecutor:
    """One container per run (`sleep infinity` under docker's init), a `docker exec` per step; always removed."""

    kind = "docker"
    workspace_in = "/myworkspace"
    plugin_in = "/opt/madengine-rocprof"

    def __init__(self, client: Any, image: str, workspace: Path, mounts: dict[str, dict[str, str]],
                 env: dict[str, str], run_options: dict[str, Any], labels: dict[str, str],
                 say: Callable[[str], None] = print) -> None:
        self.client = client
        self.image = image
        self.host_workspace = workspace
        self.workspace = self.workspace_in
        self.plugin_home = self.plugin_in
        self.python = "python3"
        self.mounts = mounts
        self.env = env
        self.run_options = run_options
        self.labels = labels
        self.say = say
        self.container: Container | None = None
        self.state = workspace / ".runner"
        self.image_id = ""
        self._background: dict[str, str] = {}

    def _inside(self, host_path: Path) -> str:
        return f"{self.workspace_in}/{host_path.relative_to(self.host_workspace).as_posix()}"

    def start(self) -> None:
        self.state.mkdir(parents=True, exist_ok=True)
        name = f"madengine-rocprof-{uuid.uuid4().hex[:10]}"
        self.say(f"[run] starting container {name} from {self.image}")
        import docker.errors

        def create() -> Any:
            return self.client.containers.create(
                self.image, ["sleep", "infinity"], name=name, init=True, working_dir=self.workspace_in,
                volumes=self.mounts, environment=self.env, labels=self.labels, network_mode="host",
                **self.run_options)

        # create, then start (not containers.run): a container the engine cannot start (bad mount or device) is
        # then already ours, and close() removes it
        try:
            container = create()
        except docker.errors.ImageNotFound:  # as `docker run` does: pull a prebuilt image once, then create
            self.say(f"[run] pulling {self.image}")
            self.client.images.pull(self.image)
            container = create()
        self.container = container
        self.image_id = container.image.id
        container.start()

    @property
    def running(self) -> Container:
        """The container start() created (steps only run after it)."""
        if self.container is None:
            raise RuntimeError("the container was not started (call start() first)")
        return self.container

    def run_step(self, name: str, command: str, cwd: str, timeout: float, log_path: Path, echo: bool = True,
                 env: dict[str, str] | None = None) -> StepResult:
        api = self.client.api
        pid_file = self.state / f"{name}.pid"
        pid_file.unlink(missing_ok=True)
        argv = ["bash", "-c", STEP_SCRIPT, "step", self._inside(pid_file), f"{GRACE_S:g}", f"{timeout:g}", command,
                f"{self.plugin_in}/madengine_rocprof/runner/{REAPER.name}"]
        started = time.monotonic()
        log_path.parent.mkdir(parents=True, exist_ok=True)
        exec_id = api.exec_create(self.running.id, argv, workdir=cwd, environment=env or None)["Id"]
        with open(log_path, "wb", buffering=0) as log:  # unbuffered: a full disk fails the write, not close()
            tee = Tee(log, echo)
            stream = api.exec_start(exec_id, stream=True)
            reader = threading.Thread(target=tee.drain, args=(stream,), daemon=True)
            reader.start()
            timed_out = interrupted = False
            try:
                # The reaper's --timeout ends the step; this host-side limit only catches a wedged exec.
                if not _wait_drained(tee, timeout + GRACE_S + LEFTOVER_S + 30):
                    timed_out = True
                    self.say(f"[run] {name}: no end {timeout:g}s + grace after start: killing the container")
                    self.running.kill()
                    _wait_drained(tee, 10)
            except KeyboardInterrupt:
                interrupted = True
                self.say(f"[run] {name}: interrupted: SIGTERM to the step, {GRACE_S:g}s for profilers to write")
                self._signal_step(pid_file)
                if not self._wait_stopping(tee, pid_file):
                    self.running.kill()
                    _wait_drained(tee, 10)
        info = api.exec_inspect(exec_id)
        code = info.get("ExitCode")
        duration = time.monotonic() - started
        if code in TIMEOUT_EXIT_CODES and duration >= timeout:
            timed_out = True
        return StepResult(name, code, duration, timed_out, interrupted, str(log_path), _log_error(tee, log_path))

    def _wait_stopping(self, tee: Tee, pid_file: Path) -> bool:
        """The step got SIGTERM: wait out its grace; a second signal makes the reaper SIGKILL the tree now."""
        deadline = time.monotonic() + GRACE_S + LEFTOVER_S
        while time.monotonic() < deadline and not stopping.hurry():
            if _wait_drained(tee, 0.2):
                return True
        if stopping.hurry():
            self._signal_step(pid_file)
            return _wait_drained(tee, HURRY_AFTER_S + 3)
        return False

    def _signal_step(self, pid_file: Path) -> None:
        try:
            pid = pid_file.read_text().strip()
            if pid.isdigit():
                self.running.exec_run(["kill", "-TERM", pid], detach=True)
        except Exception as err:  # the container may be gone already: close() removes it
            self.say(f"[run] could not signal the step in the container: {type(err).__name__}: {err}")

    def start_background(self, name: str, argv: list[str], log_path: Path, env: dict[str, str] | None = None) -> None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        pid_file = self.state / f"{name}.pid"
        wrapped = ["bash", "-c", BACKGROUND_SCRIPT, "bg", self._inside(pid_file), self._inside(log_path), *argv]
        exec_id = self.client.api.exec_create(self.running.id, wrapped, workdir=self.workspace_in,
                                              environment=env or None)["Id"]
        self.client.api.exec_start(exec_id, detach=True)
        self._background[name] = exec_id

    def stop_background(self, name: str, stop_file: Path, grace: float = 5.0) -> int | None:
        exec_id = self._background.pop(name, None)
        if exec_id is None:
            return None
        stop_file.touch()
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            info = self.client.api.exec_inspect(exec_id)
            if not info.get("Running"):
                return info.get("ExitCode")
            time.sleep(0.1)
        self._signal_step(self.state / f"{name}.pid")
        time.sleep(1)
        return self.client.api.exec_inspect(exec_id).get("ExitCode")

    def close(self) -> None:
        """Stop background samplers, hand files back to the calling user, stop and remove the container."""
        if self.container is None:
            return
        try:
            for name in list(self._background):
                self.stop_background(name, self.state / f"stop_{name}", grace=1.0)
            if hasattr(os, "getuid") and os.getuid() != 0:
                # the container writes as root into the bind-mounted workspace
                self.container.exec_run(["chown", "-R", f"{os.getuid()}:{os.getgid()}", self.workspace_in])
        except Exception as err:  # a dead container: its removal below still runs
            self.say(f"[run] container clean-up before removal failed: {type(err).__name__}: {err}")
        finally:
            try:
                self.container.remove(force=True)
                self.say(f"[run] container {self.container.name} removed")
            except Exception as err:  # docker API or connection errors: said, and the run's results still written
                self.say(f"[run] could not remove container {self.container.name}: {err}")
            self.container = None
