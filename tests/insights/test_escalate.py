"""Escalation: top kernels of a first pass get a filtered counter pass of the same model, through the runner, under
the fake rocprofv3 (6.x and 7.x) and the fake ncu; argv of the second pass checked exactly, numbers recomputed."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
from pathlib import Path

import pytest

from madengine_rocprof.cli import main
from madengine_rocprof.errors import UserError
from madengine_rocprof.insights import escalate as esc
from madengine_rocprof.insights.kernel_match import filter_regex
from madengine_rocprof.reports.discover import load_run
from madengine_rocprof.wrapper import nvidia

from .insights_builders import write_run

REPO = Path(__file__).resolve().parents[2]
FAKES = REPO / "tests" / "wrapper" / "fakes"


def _fakelib():
    """The fake profilers' shared module: the kernel names their "GPU" dispatches, alternating, as CUPTI and
    rocprofv3 spell them (KERNELS) and as ncu does (NCU_NAMES)."""
    spec = importlib.util.spec_from_file_location("_fakelib", FAKES / "_fakelib.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ADD, SUB = _fakelib().KERNELS
NCU_NAMES = _fakelib().NCU_NAMES
GEMM = "Cijk_Alik_Bljk_SB_MT128x128x16_MI32x32x2x1_SN_1LDSB0_GRVW4_K1"
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
MYSTERY = "mystery_kernel_v9"
RUN_SH = """\
echo '{"schema_version": 1, "status": "ok", "device": {"type": "cuda", "name": "NVIDIA H100 80GB HBM3"}}' \
    > workload_result.json
python3 -c "print('app ran')"
echo "performance: 42.0 samples_per_second"
"""


@pytest.fixture
def model_repo(tmp_path):
    (tmp_path / "repo" / "scripts" / "kern").mkdir(parents=True)
    (tmp_path / "repo" / "scripts" / "kern" / "run.sh").write_text(RUN_SH)
    models = tmp_path / "repo" / "models.json"
    models.write_text(
        json.dumps(
            [
                {
                    "name": "kern_model",
                    "dockerfile": "docker/none",
                    "scripts": "scripts/kern/run.sh",
                    "args": "--steps 3",
                    "tags": ["kern"],
                    "n_gpus": "1",
                }
            ]
        )
    )
    return models


@pytest.fixture
def fake_path(tmp_path, monkeypatch):
    """PATH with only the named fake profilers; their argv recorded to argv.log."""

    def use(*fakes: str, **extra: str) -> Path:
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir(exist_ok=True)
        for name in fakes:
            (bin_dir / name).symlink_to(FAKES / name)
        for key in [
            k for k in os.environ if k.startswith(("MADENGINE_ROCPROF_NCU", "FAKE_", "MADENGINE_ROCPROF_PROFILE"))
        ]:
            monkeypatch.delenv(key)
        monkeypatch.setenv("PATH", f"{bin_dir}:/usr/local/bin:/usr/bin:/bin")
        monkeypatch.setenv("FAKE_PROFILER_LOG", str(tmp_path / "argv.log"))
        monkeypatch.setenv("ROCM_PATH", str(tmp_path / "no_rocm"))
        monkeypatch.setenv("CUDA_HOME", str(tmp_path / "no_cuda"))
        for k, v in extra.items():
            monkeypatch.setenv(k, v)
        return tmp_path / "argv.log"

    return use


def recorded(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def first_pass(root: Path, kernels: dict[str, list[int]], args: str = "--steps 3") -> Path:
    """A run directory as `madengine-rocprof run` writes it, with a lightweight kernel trace."""
    run = write_run(root / "out" / "kern_model__rocprofv3_lightweight", kernels=kernels)
    (run / "workload_result.json").write_text(
        json.dumps({"schema_version": 1, "status": "ok", "device": {"type": "cuda", "name": "NVIDIA H100 80GB HBM3"}})
    )
    (run / "run.json").write_text(
        json.dumps(
            {
                "schema_version": 1,
                "tool": "madengine-rocprof run",
                "model": "kern_model",
                "status": "SUCCESS",
                "card": {"name": "kern_model", "args": "--steps 3"},
                "args": args,
                "runner": "local",
                "context": {"gpu_vendor": "AMD", "guest_os": "UBUNTU", "tools": [{"name": "rocprofv3_lightweight"}]},
                "chain": {"tools": ["rocprofv3_lightweight"]},
            }
        )
    )
    return run


KERNELS = {GEMM: [90_000] * 10, ADD: [20_000] * 10, SUB: [15_000] * 10, NCCL: [10_000] * 5, MYSTERY: [1_000] * 3}


def test_selection_by_time_and_share_with_a_profile_per_category(tmp_path):
    run = load_run(first_pass(tmp_path, KERNELS), "first")
    targets = esc.select_targets(run, top=5)
    total = sum(sum(v) for v in KERNELS.values())
    assert [t.name for t in targets] == [GEMM, ADD, SUB, NCCL, MYSTERY]
    assert [t.profile for t in targets] == ["compute_bound", "memory_bound", "memory_bound", None, None]
    assert targets[0].share == pytest.approx(900_000 / total) and targets[1].calls == 10
    assert "communication" in targets[3].reason and "unknown kernel" in targets[4].reason
    assert [t.name for t in esc.select_targets(run, top=2)] == [GEMM, ADD]
    # every kernel with >= 10% of the time: GEMM 900k, ADD 200k, SUB 150k of 1.303M
    assert [t.name for t in esc.select_targets(run, top=None, min_share=0.10)] == [GEMM, ADD, SUB]


@pytest.mark.parametrize("name", [ADD, SUB, GEMM, NCCL, "a.b*c+d?(e)[f]{g}|h^i$j\\k"])
def test_kernel_filter_matches_the_chosen_names_and_no_other(name):
    import re

    first_pass = [ADD, SUB, GEMM, NCCL, MYSTERY, name]
    pattern = filter_regex([name, GEMM], first_pass)
    assert re.search(pattern, name) and re.search(pattern, GEMM)
    others = [n for n in (ADD, SUB, GEMM, NCCL, MYSTERY) if n not in (name, GEMM)]
    assert not any(re.search(pattern, n) for n in others)


def test_model_arguments_of_the_first_pass_are_repeated(tmp_path):
    assert esc.model_tag({"model": "m", "card": {"args": "--steps 3"}, "args": "--steps 3"}) == "m"
    assert (
        esc.model_tag({"model": "m", "card": {"args": "--a 1"}, "args": "--a 1 --num-steps 5 --b x"})
        == "m:num-steps=5:b=x"
    )
    with pytest.raises(UserError):
        esc.model_tag({"model": "m", "card": {"args": "--a 1"}, "args": "--b 2"})


@pytest.mark.parametrize(
    "metrics, expected",
    [
        ({"bandwidth_pct_of_peak": 72.4}, "memory bandwidth (72% of peak)"),
        ({"fp32_pct_of_peak": 10.0, "ncu_sm_throughput_pct": 81.0}, "SM compute (81% of peak)"),
        ({"ncu_tensor_pipe_pct": 65.0, "ncu_sm_throughput_pct": 40.0}, "tensor cores (65% of peak)"),
        (
            {"ncu_sm_throughput_pct": 30.0, "bandwidth_pct_of_peak": 12.0},
            "latency/occupancy: nothing near peak, highest SM compute 30%",
        ),
        ({}, "not determined (no counter of this profile relates to a peak)"),
    ],
)
def test_what_bounds_a_kernel(metrics, expected):
    assert esc.bound(metrics) == expected


def test_amd_fp32_rate_from_valu_counters_and_peaks_by_name():
    from madengine_rocprof.insights.peaks import device_peak

    counters = {
        c: {"total": t, "mean": 0, "dispatches": 1, "time_ns": 1000.0}
        for c, t in (("SQ_INSTS_VALU_ADD_F32", 10.0), ("SQ_INSTS_VALU_MUL_F32", 20.0), ("SQ_INSTS_VALU_FMA_F32", 30.0))
    }
    peak = device_peak("AMD Instinct MI300X")
    d = esc.derived(counters, peak)
    flops_per_ns = 64 * (10 + 20 + 2 * 30) / 1000.0  # GFLOP/s
    assert d["fp32_tflops"] == pytest.approx(flops_per_ns / 1e3)
    assert d["fp32_pct_of_peak"] == pytest.approx(100 * flops_per_ns / 1e3 / 163.4)
    h100, h200, mi250x = device_peak("NVIDIA H100 PCIe"), device_peak("NVIDIA H200"), device_peak("AMD Instinct MI250X")
    assert h100 is not None and h200 is not None and mi250x is not None
    assert h100.bandwidth_gbs == 2000 and h200.bandwidth_gbs == 4800
    assert mi250x.device == "AMD Instinct MI250X" and device_peak("Fake GPU 9000") is None
    # parts whose peaks differ within the name family are not guessed: a bare gfx942 is MI300A, MI300X or MI325X
    assert device_peak("gfx942") is None and device_peak("NVIDIA H100 NVL") is None
    mi355x = device_peak("AMD Instinct MI355X")
    assert mi355x is not None and (mi355x.bandwidth_gbs, mi355x.fp32_tflops) == (8000, 157.3)
    given = device_peak("Fake GPU 9000", bandwidth_gbs=1000)
    assert given is not None
    assert (given.bandwidth_gbs, given.fp32_tflops, given.source) == (1000, None, "given")


def test_amd_bandwidth_needs_both_fetch_and_write():
    """memory_bound.txt reads FETCH_SIZE and WRITE_SIZE in different passes; when one pass is missing (it failed, or a
    user's counter file has one of them), reads or writes alone are not the kernel's traffic: no bandwidth, no bound."""
    from madengine_rocprof.insights.peaks import device_peak

    def entry(total: float) -> dict:
        return {"total": total, "mean": total, "dispatches": 1, "time_ns": 1000.0}

    both = esc.derived({"FETCH_SIZE": entry(10.0), "WRITE_SIZE": entry(30.0)}, None)
    assert both["bandwidth_gbs"] == pytest.approx((10.0 + 30.0) * 1024 / 1000.0)
    for alone in ("FETCH_SIZE", "WRITE_SIZE"):
        d = esc.derived({alone: entry(10_000.0)}, device_peak("AMD Instinct MI300X"))
        assert "bandwidth_gbs" not in d and "bandwidth_pct_of_peak" not in d
        assert d["bound"] == "not determined (no counter of this profile relates to a peak)"


# The filters, written out: each kernel's function name as a whole identifier (kernel_match.filter_regex)
GEMM_FILTER = r"(?:^|[ :])Cijk_Alik_Bljk_SB_MT128x128x16_MI32x32x2x1_SN_1LDSB0_GRVW4_K1(?=[<( ]|$)"
ADD_FILTER = r"(?:^|[ :])addition_kernel(?=[<( ]|$)"
SUB_FILTER = r"(?:^|[ :])subtract_kernel(?=[<( ]|$)"


def _memory_regex() -> str:
    return f"{ADD_FILTER}|{SUB_FILTER}"


@pytest.mark.parametrize("version", ["6.2.0", "6.4.0", "7.0.0"])
def test_rocprofv3_second_pass_argv_and_joined_report(tmp_path, model_repo, fake_path, capsys, version):
    log = fake_path("rocprofv3", FAKE_ROCPROF_VERSION=version, FAKE_DISPATCHES="6")
    run = first_pass(tmp_path, KERNELS)
    out_json = tmp_path / "esc.json"
    code = main(
        ["escalate", str(run), "--models", str(model_repo), "--runner", "local", "--quiet", "--json", str(out_json)]
    )
    assert code == 0, capsys.readouterr()
    calls = [c for c in recorded(log) if c["prog"] == "rocprofv3"]
    # the wrapper probes the version first (7.x: --version; 6.x: --help), then one profiled run per profile
    runs = [c["argv"] for c in calls if "--" in c["argv"]]
    assert len(runs) == 2
    esc_dir = tmp_path / "out" / "kern_model__rocprofv3_lightweight.escalate"
    compute_ws = esc_dir / "kern_model__escalate_compute_bound"
    memory_ws = esc_dir / "kern_model__escalate_memory_bound"
    # the wrapper writes every option in its long form, in its own order, the same for 6.x and 7.x
    for argv, ws, profile, regex in (
        (runs[0], compute_ws, "compute_bound", GEMM_FILTER),
        (runs[1], memory_ws, "memory_bound", _memory_regex()),
    ):
        assert argv == [
            "--output-directory",
            f"{ws}/profiler",
            "--output-file",
            "%hostname%/%pid%",
            "--output-format",
            "csv",
            "--kernel-trace",
            "--input",
            f"{REPO}/counters/{profile}.txt",
            "--kernel-include-regex",
            regex,
            "--",
            "bash",
            "model_scripts/run.sh",
            "--steps",
            "3",
        ]
    report = json.loads(out_json.read_text())
    assert report == json.loads((esc_dir / "escalation.json").read_text()) | {"generated_at": report["generated_at"]}
    rows = {k["name"]: k for k in report["kernels"]}
    # the fake's GPU never ran the GEMM: the filtered pass read nothing for it, and says so
    assert rows[GEMM]["counters"] == {} and "read no counters" in rows[GEMM]["reason"]
    assert rows[NCCL].get("counters") is None and rows[NCCL]["profile"] is None
    # independent: the fake dispatches k = 0..5, ADD on even k, duration 40 + k ns, every counter value 16.0, in
    # each pass of memory_bound.txt (pmc_1: FETCH_SIZE ..., pmc_2: WRITE_SIZE ...)
    add_time = sum(40 + k for k in range(0, 6, 2))
    add = rows[ADD]
    assert add["counters"]["FETCH_SIZE"] == {"total": 48.0, "mean": 16.0, "dispatches": 3, "time_ns": add_time}
    assert add["counters"]["WRITE_SIZE"]["time_ns"] == add_time
    bandwidth = (48.0 / add_time + 48.0 / add_time) * 1024  # KiB -> bytes; bytes/ns = GB/s
    assert add["derived"]["bandwidth_gbs"] == pytest.approx(bandwidth)
    assert add["derived"]["bandwidth_pct_of_peak"] == pytest.approx(100 * bandwidth / 3350)  # H100 SXM datasheet
    assert add["derived"]["bound"] == (
        f"latency/occupancy: nothing near peak, highest memory bandwidth "
        f"{100 * bandwidth / 3350:.0f}% (compute not measured)"
    )
    sub_time = sum(40 + k for k in range(1, 6, 2))
    assert rows[SUB]["derived"]["bandwidth_gbs"] == pytest.approx(2 * 48.0 / sub_time * 1024)
    assert (add["calls"], add["total_ns"], add["share"]) == (10, 200_000, pytest.approx(200_000 / 1_303_000))
    # the second pass is an ordinary run: its own run.json, and `report` of the first pass does not count it
    assert json.loads((memory_ws / "run.json").read_text())["status"] == "SUCCESS"
    assert sum(k.calls for k in esc.merge_kernels(load_run(run, "again")).values()) == 38


def test_ncu_second_pass_argv_and_joined_report(tmp_path, model_repo, fake_path, capsys):
    log = fake_path("ncu", FAKE_DISPATCHES="8")
    kernels = {ADD: [30_000] * 10, SUB: [20_000] * 10}
    run = first_pass(tmp_path, kernels)
    out_json = tmp_path / "esc.json"
    code = main(
        [
            "escalate",
            str(run),
            "--models",
            str(model_repo),
            "--runner",
            "local",
            "--quiet",
            "--json",
            str(out_json),
            "--launches-per-kernel",
            "2",
            "--launch-skip",
            "1",
        ]
    )
    assert code == 0, capsys.readouterr()
    runs = [
        c["argv"]
        for c in recorded(log)
        if c["prog"] == "ncu" and "--import" not in c["argv"] and "--version" not in c["argv"]
    ]
    assert len(runs) == 1
    ws = tmp_path / "out" / "kern_model__rocprofv3_lightweight.escalate" / "kern_model__escalate_memory_bound"
    out_dir = ws / "profiler"
    assert runs[0] == [
        "--clock-control",
        "none",
        "--target-processes",
        "all",
        "--kernel-name-base",
        "demangled",
        "--export",
        f"{out_dir}/{socket.gethostname()}/ncu_%p",
        "--force-overwrite",
        "--metrics",
        ",".join(nvidia.NCU_METRICS["memory_bound"] + nvidia.LAUNCH_METRICS),
        "--kernel-name",
        f"regex:^(?=.*(?:{_memory_regex()}))",
        "--launch-skip",
        "1",
        "--launch-count",
        "4",
        "bash",
        "model_scripts/run.sh",
        "--steps",
        "3",
    ]
    # independent: the fake's report holds the raw values of the 4 profiled launches (skip 1 of 8 matching)
    [rep_file] = list(out_dir.rglob("*.ncu-rep"))
    rep = json.loads(rep_file.read_text())
    assert len(rep["rows"]) == 4
    report = json.loads(out_json.read_text())
    rows = {k["name"]: k for k in report["kernels"]}
    # the fake ncu spells the kernels its own way (`void addition_kernel<float>(T1 *, const T1 *, ...)`); the join
    # finds each by its key, and the counters land on the right first-pass kernel
    for index, name in enumerate((ADD, SUB)):
        assert rows[name]["joined_from"] == [{"name": NCU_NAMES["demangled"][index], "how": "key", "dispatches": 2}]
        mine = [r["values"] for r in rep["rows"] if r["kernel"] == index]
        duration = sum(v["gpu__time_duration.sum"] for v in mine)
        traffic = sum(v["dram__bytes_read.sum"] + v["dram__bytes_write.sum"] for v in mine)
        d = rows[name]["derived"]
        assert d["bandwidth_gbs"] == pytest.approx(traffic / duration)
        assert d["ncu_dram_throughput_pct"] == pytest.approx(
            sum(v["dram__throughput.avg.pct_of_peak_sustained_elapsed"] for v in mine) / len(mine)
        )
        assert rows[name]["counters"]["gpu__time_duration.sum"]["dispatches"] == len(mine) == 2


def test_dry_run_prints_the_plan_and_runs_nothing(tmp_path, model_repo, fake_path, capsys):
    log = fake_path("rocprofv3")
    run = first_pass(tmp_path, KERNELS, args="--steps 3 --num-steps 7")
    assert main(["escalate", str(run), "--top", "3", "--dry-run", "--models", str(model_repo)]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["tag"] == "kern_model:num-steps=7"
    assert [(p["profile"], p["kernels"]) for p in plan["passes"]] == [
        ("compute_bound", [GEMM]),
        ("memory_bound", [ADD, SUB]),
    ]
    assert plan["passes"][1]["env"] == {esc.ENV_LAUNCH_SKIP: "0", esc.ENV_LAUNCH_COUNT: "20"}
    assert "tools" not in plan["context"] and plan["context"]["gpu_vendor"] == "AMD"
    assert recorded(log) == [] and not esc.escalation_dir(run).exists()


def test_markdown_names_every_top_kernel_with_its_numbers(tmp_path, model_repo, fake_path, capsys):
    fake_path("rocprofv3", FAKE_DISPATCHES="6")
    run = first_pass(tmp_path, KERNELS)
    assert main(["escalate", str(run), "--models", str(model_repo), "--runner", "local", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["escalate", str(run), "--join-only", "--models", str(model_repo)]) == 0
    text = capsys.readouterr().out
    report = json.loads((esc.escalation_dir(run) / "escalation.json").read_text())
    add = next(k for k in report["kernels"] if k["name"] == ADD)
    line = next(x for x in text.splitlines() if x.startswith("| 2 |"))
    assert "| elementwise | elementwise | 10 | 0.200 | 15.3% | memory_bound |" in line
    assert (
        f"{add['derived']['bandwidth_gbs']:,.1f} GB/s ({add['derived']['bandwidth_pct_of_peak']:.1f}% of peak)" in line
    )
    assert "| 4 |" in text and "communication: its time is waiting" in text
    assert "3,350 GB/s, 67 TFLOP/s FP32 (datasheet, NVIDIA H100 SXM)" in text


def test_run_with_escalate_does_both_passes(tmp_path, model_repo, fake_path, capsys):
    log = fake_path("rocprofv3", FAKE_DISPATCHES="4")
    out = tmp_path / "runs"
    code = main(
        [
            "run",
            "--tags",
            "kern_model",
            "--models",
            str(model_repo),
            "--runner",
            "local",
            "--quiet",
            "--output-dir",
            str(out),
            "--additional-context",
            json.dumps({"tools": [{"name": "rocprofv3_lightweight"}]}),
            "--escalate",
            "--escalate-top",
            "2",
        ]
    )
    assert code == 0, capsys.readouterr()
    runs = [c["argv"] for c in recorded(log) if c["prog"] == "rocprofv3" and "--" in c["argv"]]
    assert len(runs) == 2 and "--kernel-include-regex" not in runs[0]
    # the fake's durations are 40 + k ns for dispatch k: SUB (k = 1, 3) 84 ns beats ADD (k = 0, 2) 82 ns
    assert runs[1][runs[1].index("--kernel-include-regex") + 1] == f"{SUB_FILTER}|{ADD_FILTER}"
    report = json.loads((out / "kern_model__rocprofv3_lightweight.escalate" / "escalation.json").read_text())
    assert [(k["name"], k["total_ns"]) for k in report["kernels"]] == [(SUB, 84), (ADD, 82)]
    assert all(k["derived"]["bandwidth_gbs"] > 0 for k in report["kernels"])


def test_bad_input_is_refused_before_anything_runs(tmp_path, model_repo, fake_path, capsys):
    log = fake_path("rocprofv3")
    bare = write_run(tmp_path / "bare", kernels={ADD: [100] * 3})
    assert main(["escalate", str(bare), "--models", str(model_repo)]) == 2
    assert "has no run.json" in capsys.readouterr().err
    only_unknown = first_pass(tmp_path / "u", {MYSTERY: [100] * 3, NCCL: [50] * 2})
    assert main(["escalate", str(only_unknown), "--models", str(model_repo)]) == 2
    assert "none of the selected kernels can be escalated" in capsys.readouterr().err
    assert main(["escalate", str(only_unknown), "--top", "0"]) == 2
    assert main(["escalate", str(only_unknown), "--join-only"]) == 2
    assert recorded(log) == [] and not esc.escalation_dir(only_unknown).exists()


def test_a_failed_second_pass_is_reported_and_fails_the_command(tmp_path, model_repo, fake_path, capsys):
    fake_path("rocprofv3", FAKE_DISPATCHES="4", FAKE_PROFILER_CRASH="1")
    run = first_pass(tmp_path, {ADD: [30_000] * 10})
    assert main(["escalate", str(run), "--models", str(model_repo), "--runner", "local", "--quiet"]) == 1
    report = json.loads((esc.escalation_dir(run) / "escalation.json").read_text())
    [step] = report["passes"]
    assert step["profile"] == "memory_bound" and step["exit_code"] == 1
    assert json.loads((Path(step["run_dir"]) / "run.json").read_text())["status"] == "FAILURE"


def test_a_second_pass_without_a_counter_profiler_is_reported_and_fails_the_command(
    tmp_path, model_repo, fake_path, capsys
):
    fake_path()  # no profiler at all: the wrapper refuses the counter profile (no_profiler, exit 127), writes nothing
    run = first_pass(tmp_path, {ADD: [30_000] * 10})
    assert main(["escalate", str(run), "--models", str(model_repo), "--runner", "local", "--quiet"]) == 1
    report = json.loads((esc.escalation_dir(run) / "escalation.json").read_text())
    [step] = report["passes"]
    assert step["profile"] == "memory_bound" and step["exit_code"] == 1
    manifest = json.loads(next(Path(step["run_dir"]).rglob("manifest.json")).read_text())
    assert manifest["outcome"] == "no_profiler"
    [row] = report["kernels"]
    assert row["name"] == ADD and "counters" not in row
    assert row["reason"] == "no counters: the memory_bound pass failed (exit 1) and left no profiler output"


def test_launch_budget_reaches_the_rarest_kernel_in_launch_order():
    # A step launches the frequent GEMM 6 times, then the rare one once (as in eager training steps). ncu profiles
    # the first `count` matching launches: every chosen kernel must get `per_kernel` of them.
    steps, per_kernel = 10, 2
    launches = (["frequent"] * 6 + ["rare"]) * steps
    count = esc.launch_budget([launches.count("frequent"), launches.count("rare")], per_kernel)
    profiled = launches[:count]
    assert profiled.count("rare") >= per_kernel and profiled.count("frequent") >= per_kernel
    assert count < len(launches)  # still a bound, not every launch
    # equal frequencies keep the plain N x kernels
    assert esc.launch_budget([8, 8], per_kernel) == 2 * per_kernel


def test_ncu_name_fitting_two_first_pass_kernels_is_reported_not_guessed(tmp_path, model_repo, fake_path, capsys):
    # the first pass has two kernels that differ only by namespace; ncu's spelling (namespace dropped) fits both
    twin = ADD.replace("void addition_kernel", "void other_ns::addition_kernel")
    fake_path("ncu", FAKE_DISPATCHES="8")
    run = first_pass(tmp_path, {ADD: [30_000] * 10, twin: [25_000] * 10, SUB: [20_000] * 10})
    out_json = tmp_path / "esc.json"
    assert main(["escalate", str(run), "--models", str(model_repo), "--runner", "local", "--json", str(out_json)]) == 0
    text = capsys.readouterr().out
    report = json.loads(out_json.read_text())
    rows = {k["name"]: k for k in report["kernels"]}
    assert rows[ADD]["counters"] == {} == rows[twin]["counters"]
    assert "fit this one and others equally" in rows[ADD]["reason"]
    [entry] = report["not_joined"]
    assert entry["name"] == NCU_NAMES["demangled"][0] and entry["reason"].startswith("ambiguous")
    assert sorted(entry["candidates"]) == sorted([ADD, twin])
    # the unambiguous kernel still gets its counters, joined by key
    assert [j["how"] for j in rows[SUB]["joined_from"]] == ["key"] and rows[SUB]["counters"]
    assert "not joined: `addition_kernel<…>` (4 dispatches): ambiguous" in text


def test_escalate_outside_a_repository_names_the_option_it_has(tmp_path, model_repo, fake_path, capsys, monkeypatch):
    """The message says "pass --repo DIR": escalate has that option (before, it did not), like `run`."""
    fake_path("rocprofv3", FAKE_DISPATCHES="6")
    run = first_pass(tmp_path, KERNELS)
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(empty)
    assert main(["escalate", str(run), "--runner", "local", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "models file not found" in err and "--repo DIR" in err
    assert main(["escalate", str(run), "--repo", str(model_repo.parent), "--runner", "local", "--quiet"]) == 0


def test_tensor_core_flops_from_ncu_op_counters_and_amd_mfma_mops():
    from madengine_rocprof.insights.peaks import device_peak

    def entry(total: float, dispatches: int = 4) -> dict:
        return {"total": total, "mean": total / dispatches, "dispatches": dispatches, "time_ns": 8000.0}

    gemm = 2 * 4096 * 4096 * 4096  # per dispatch
    counters = {
        "gpu__time_duration.sum": entry(4 * 200_000.0),
        "sm__ops_path_tensor_src_bf16_dst_fp32.sum": entry(4 * gemm),
        # variants that split or repeat the same ops (as ncu reports them on an H100) are not added again
        "sm__ops_path_tensor_src_bf16_dst_fp32_sparsity_off.sum": entry(4 * gemm),
        "sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32.sum": entry(4 * gemm),
        "sm__ops_path_tensor_src_int8.sum": entry(4 * gemm),
        "sm__ops_path_tensor_src_fp16_dst_fp32.sum": entry(0.0),
    }
    d = esc.derived(counters, device_peak("NVIDIA H100 80GB HBM3"))
    assert d["tensor_flops"] == gemm
    assert d["tensor_tflops"] == pytest.approx(4 * gemm / (4 * 200_000.0) / 1e3)
    assert d["tensor_pct_of_peak"] == pytest.approx(100 * d["tensor_tflops"] / 989.4)
    assert d["tensor_peak"] == "bf16 matrix 989.4 TFLOP/s"
    assert d["bound"].startswith("tensor-core FLOPs")  # 687 TFLOP/s: 69% of the bf16 roof
    # AMD: 512 FLOPs per MFMA MOP, over the kernel time of the pass
    amd = esc.derived({"SQ_INSTS_VALU_MFMA_MOPS_BF16": entry(1000.0)}, device_peak("AMD Instinct MI300X"))
    assert amd["tensor_flops"] == 512 * 1000.0 / 4
    assert amd["tensor_tflops"] == pytest.approx(512 * 1000.0 / 8000.0 / 1e3)
    assert amd["tensor_peak"] == "bf16 matrix 1307.4 TFLOP/s"


def test_tensor_metrics_only_where_ncu_names_them_so():
    from madengine_rocprof.wrapper.nvidia import NCU_METRICS

    hopper = esc.tensor_metrics("NVIDIA H100 80GB HBM3")
    assert hopper is not None
    names = hopper.split(",")
    assert names[: len(NCU_METRICS["compute_bound"])] == NCU_METRICS["compute_bound"]
    assert "sm__ops_path_tensor_src_bf16_dst_fp32.sum" in names and all(esc.TENSOR_OPS.match(n) for n in names[
        len(NCU_METRICS["compute_bound"]):])
    assert esc.tensor_metrics("NVIDIA A100-SXM4-80GB") is None and esc.tensor_metrics(None) is None
    assert esc.tensor_metrics("AMD Instinct MI300X") is None
    tool = esc.escalation_tool("compute_bound", 2, "x", 10, 0, hopper)
    assert tool.env_vars[esc.ENV_METRICS] == hopper
    assert esc.ENV_METRICS not in esc.escalation_tool("compute_bound", 2, "x", 10, 0).env_vars
