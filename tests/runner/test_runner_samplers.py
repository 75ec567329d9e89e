"""The power/VRAM samplers against faithful fakes of pynvml and amdsmi (same function names, units and shapes)."""
import csv
import io
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from madengine_rocprof.samplers import sampler

FAKE_AMDSMI = """
    # amdsmi: power in WATTS, VRAM in MiB
    def amdsmi_init(): pass
    def amdsmi_shut_down(): pass
    def amdsmi_get_processor_handles(): return ["h0", "h1"]
    def amdsmi_get_power_info(h):
        return {"current_socket_power": 300 + 10 * int(h[1]), "average_socket_power": "N/A", "power_limit": 750}
    def amdsmi_get_gpu_vram_usage(h):
        return {"vram_used": 1024 * (1 + int(h[1])), "vram_total": 4096}
"""
FAKE_PYNVML = """
    # NVML: power in MILLIWATTS, memory in bytes
    class _Mem:
        def __init__(self, used, total): self.used, self.total, self.free = used, total, total - used
    def nvmlInit(): pass
    def nvmlShutdown(): pass
    def nvmlDeviceGetCount(): return 2
    def nvmlDeviceGetHandleByIndex(i): return i
    def nvmlDeviceGetPowerUsage(h): return 150000 + 1000 * h
    def nvmlDeviceGetMemoryInfo(h): return _Mem((h + 1) * 2 * 1024**3, 8 * 1024**3)
"""


@pytest.fixture
def fakes(tmp_path, repo):
    def make(**modules):
        folder = tmp_path / "fakes"
        folder.mkdir(exist_ok=True)
        for name, body in modules.items():
            (folder / f"{name}.py").write_text(textwrap.dedent(body))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("POWER_", "VRAM_"))}
        env["PYTHONPATH"] = os.pathsep.join([str(folder), str(repo)])
        return env
    return make


def run_sampler(env, *args, timeout=20):
    return subprocess.run([sys.executable, "-m", "madengine_rocprof.samplers", *args], env=env,
                          capture_output=True, text=True, timeout=timeout)


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


def test_amdsmi_power_is_watts_not_divided(tmp_path, fakes):
    env = fakes(amdsmi=FAKE_AMDSMI)
    out = tmp_path / "p.csv"
    proc = run_sampler(env, "power", "--output", str(out), "--rate", "0.02", "--duration", "0.2")
    assert proc.returncode == 0, proc.stderr
    rows = read_rows(out)
    assert rows[0] == ["time", "Power(Watt) GPU0", "Power(Watt) GPU1", "elapsed_s"]
    assert len(rows) >= 4
    for row in rows[1:]:
        assert (float(row[1]), float(row[2])) == (300.0, 310.0)
        time.strptime(row[0].split(".")[0], "%Y-%m-%d %H:%M:%S")


def test_nvml_milliwatts_to_watts_and_vram_used_total(tmp_path, fakes):
    env = fakes(pynvml=FAKE_PYNVML)
    out = tmp_path / "v.csv"
    proc = run_sampler(env, "vram", "--output", str(out), "--rate", "0.02", "--duration", "0.1", "--backend", "nvml")
    assert proc.returncode == 0, proc.stderr
    rows = read_rows(out)
    assert rows[0] == [
        "time",
        "vram(%) GPU0",
        "vram(%) GPU1",
        "elapsed_s",
        "vram_used(MiB) GPU0",
        "vram_used(MiB) GPU1",
        "vram_total(MiB) GPU0",
        "vram_total(MiB) GPU1",
    ]
    used = [(i + 1) * 2 * 1024 for i in range(2)]  # MiB
    for row in rows[1:]:
        assert [float(x) for x in row[1:3]] == [100.0 * u / 8192 for u in used]
        assert [float(x) for x in row[4:]] == used + [8192.0, 8192.0]
    power = tmp_path / "p.csv"
    assert run_sampler(env, "power", "--output", str(power), "--rate", "0.05", "--duration", "0.06").returncode == 0
    assert [float(x) for x in read_rows(power)[1][1:3]] == [150.0, 151.0]


def test_env_vars_choose_device_rate_and_file(tmp_path, fakes):
    env = fakes(amdsmi=FAKE_AMDSMI)
    out = tmp_path / "sub" / "named.csv"
    env.update(POWER_DEVICE="1", POWER_SAMPLING_RATE="0.05", POWER_OUTPUT_FILE=str(out))
    proc = run_sampler(env, "power", "--duration", "0.12")
    assert proc.returncode == 0, proc.stderr
    rows = read_rows(out)
    assert rows[0] == ["time", "Power(Watt) GPU1", "elapsed_s"]
    assert {r[1] for r in rows[1:]} == {"310.000"}
    env["POWER_DEVICE"] = "5"
    assert run_sampler(env, "power", "--duration", "0.1").returncode == 2


@pytest.mark.parametrize("how", ["sigterm", "stop_file"])
def test_clean_stop_leaves_complete_file_with_monotonic_elapsed(tmp_path, fakes, how):
    env = fakes(amdsmi=FAKE_AMDSMI)
    out, stop = tmp_path / "p.csv", tmp_path / "stop"
    proc = subprocess.Popen([sys.executable, "-m", "madengine_rocprof.samplers", "power", "--output", str(out),
                             "--rate", "0.02", "--stop-file", str(stop)], env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (not out.exists() or len(out.read_text().splitlines()) < 4):
        time.sleep(0.05)  # rows appear while it runs: incremental flush
    assert len(out.read_text().splitlines()) >= 4
    if how == "sigterm":
        proc.send_signal(signal.SIGTERM)
    else:
        stop.touch()
    assert proc.wait(timeout=10) == 0, proc.stderr.read() if proc.stderr else ""
    text = out.read_text()
    assert text.endswith("\n")
    elapsed = [float(r[-1]) for r in read_rows(out)[1:]]
    assert elapsed == sorted(elapsed) and len(set(elapsed)) == len(elapsed)


def test_no_telemetry_exits_3_with_header_only(tmp_path, fakes):
    env = fakes()  # neither amdsmi nor pynvml importable
    out = tmp_path / "p.csv"
    proc = run_sampler(env, "power", "--output", str(out), "--duration", "1")
    assert proc.returncode == 3 and "no GPU telemetry" in proc.stderr
    assert out.read_text() == "time\n"


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now

    def sleep(self, s):
        self.now += s


class SlowBackend:
    """Each reading costs 30 ms of (fake) time: pacing must not drift by it."""
    name = "slow"

    def __init__(self, clock):
        self.clock = clock

    def device_count(self) -> int:
        return 1

    def power_watts(self, index: int) -> float:
        self.clock.now += 0.03
        return 42.0

    def vram_bytes(self, index: int) -> tuple[int, int]:
        return 0, 0

    def close(self) -> None:
        pass


def test_schedule_is_paced_on_the_monotonic_clock_without_drift():
    clock = FakeClock()
    out = io.StringIO()
    rows = sampler.run(SlowBackend(clock), "power", [0], 0.1, out, stop=lambda: False, duration_s=1.0,
                       clock=clock, sleep=clock.sleep)
    elapsed = [float(r[-1]) for r in list(csv.reader(io.StringIO(out.getvalue())))[1:]]
    assert rows == 10
    assert elapsed == pytest.approx([0.1 * k for k in range(10)], abs=1e-9)


@pytest.mark.parametrize("spec, count, expected", [("all", 3, [0, 1, 2]), ("0,2", 3, [0, 2]), ("1-2", 3, [1, 2])])
def test_parse_devices(spec, count, expected):
    assert sampler.parse_devices(spec, count) == expected


@pytest.mark.parametrize("spec", ["x", "3", "0-5"])
def test_parse_devices_rejects(spec):
    with pytest.raises(ValueError):
        sampler.parse_devices(spec, 2)
