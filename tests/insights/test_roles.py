"""`report A B` across vendors: kernel time compared role by role (an AMD GEMM against an NVIDIA GEMM of the same
tile class), unknown kernels in their own row; the roles table recomputed from the crafted runs."""

from __future__ import annotations

import json

from madengine_rocprof.cli import main

from .insights_builders import write_run

# (name, role chosen by hand for this test, durations in ns)
AMD = [
    ("Cijk_Alik_Bljk_SB_MT128x128x16_MI32x32x2x1_SN_1LDSB0_GRVW4_K1", "GEMM large tile (>=128x128)", [50_000] * 20),
    ("Cijk_Ailk_Bljk_SB_MT64x64x16_MI32x32x2x1_SN", "GEMM small tile (<=64x64)", [9_000] * 10),
    ("ck_tile::FmhaFwdKernel<ck_tile::BlockFmhaPipelineQRKSVS<...>>", "attention fwd", [30_000] * 8),
    ("ck_tile::FmhaBwdDQDKDVKernel<...>", "attention bwd", [70_000] * 8),
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "allreduce", [40_000] * 4),
    ("my_secret_kernel", "unknown", [1_000] * 2),
]
NVIDIA = [
    ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", "GEMM large tile (>=128x128)", [30_000] * 20),
    (
        "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
        "GEMM large tile (>=128x128)",
        [10_000] * 5,
    ),
    (
        "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128>>(Flash_fwd_params)",
        "attention fwd",
        [20_000] * 8,
    ),
    (
        "void flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128>>(Flash_bwd_params)",
        "attention bwd",
        [45_000] * 8,
    ),
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "allreduce", [35_000] * 4),
]


def _role_times(kernels) -> dict[str, int]:
    out: dict[str, int] = {}
    for _, role, durations in kernels:
        out[role] = out.get(role, 0) + sum(durations)
    return out


def test_report_across_vendors_compares_by_role(tmp_path, capsys):
    amd = write_run(tmp_path / "mi300x", kernels={n: d for n, _, d in AMD})
    nv = write_run(tmp_path / "h100", kernels={n: d for n, _, d in NVIDIA})
    out = tmp_path / "r.json"
    assert main(["report", str(amd), str(nv), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    report = json.loads(out.read_text())
    want = {"mi300x": _role_times(AMD), "h100": _role_times(NVIDIA)}
    for run in report["runs"]:
        got = {e["role"]: e["total_ns"] for e in run["roles"]}
        assert got == want[run["label"]]
        assert sum(got.values()) == run["summary"]["gpu_time_ns"]
        for k in run["kernels"]:
            assert "role" in k and "library" in k
    lines = text.splitlines()
    header = lines.index(next(x for x in lines if x.startswith("| role | category | mi300x (ms)")))
    table = {}
    for line in lines[header + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        table[cells[0]] = cells[1:]
    base, new = want["mi300x"], want["h100"]
    for role in set(base) | set(new):
        category, b_ms, b_ratio, n_ms, n_ratio = table[role]
        assert b_ms == (f"{base[role] / 1e6:,.3f}" if role in base else "–")
        assert n_ms == (f"{new[role] / 1e6:,.3f}" if role in new else "–")
        # a speedup like every ratio of the report: baseline / run, above 1x is faster
        assert n_ratio == (f"{base[role] / new[role]:.2f}x" if role in base and role in new else "–")
    # the unknown kernel keeps its own row, and the GEMM small tile exists on one side only
    assert table["unknown"][:2] == ["unknown", "0.002"]
    assert table["GEMM small tile (<=64x64)"][3] == "–"
    # rows in category order: GEMM roles first, communication before unknown
    order = list(table)
    assert (
        order.index("GEMM large tile (>=128x128)")
        < order.index("attention fwd")
        < order.index("allreduce")
        < order.index("unknown")
    )


def test_user_rules_regroup_kernels_in_the_report(tmp_path, capsys):
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"rules": [{"match": "my_secret", "category": "GEMM", "role": "in-house GEMM"}]}))
    amd = write_run(tmp_path / "mi300x", kernels={n: d for n, _, d in AMD})
    out = tmp_path / "r.json"
    assert main(["report", str(amd), "--json", str(out), "-q", "--kernel-rules", str(rules)]) == 0
    run = json.loads(out.read_text())["runs"][0]
    roles = {e["role"]: e for e in run["roles"]}
    assert "unknown" not in roles and roles["in-house GEMM"]["total_ns"] == 2_000
    assert {c["category"]: c["total_ns"] for c in run["categories"]}["unknown"] == 0
    rules.write_text(json.dumps({"rules": [{"match": "(", "category": "GEMM"}]}))
    assert main(["report", str(amd), "--json", str(out), "-q", "--kernel-rules", str(rules)]) == 2
    assert "rules[0].match: invalid regular expression" in capsys.readouterr().err


def test_html_page_shows_the_role_table(tmp_path, capsys):
    amd = write_run(tmp_path / "mi300x", kernels={n: d for n, _, d in AMD})
    nv = write_run(tmp_path / "h100", kernels={n: d for n, _, d in NVIDIA})
    page = tmp_path / "r.html"
    assert main(["report", str(amd), str(nv), "--html", str(page), "-q"]) == 0
    html = page.read_text()
    assert "Kernel time by role (ms)" in html and "GEMM large tile (&gt;=128x128)" in html


def test_kernels_classify_a_run_lists_every_kernel_and_counts_unknown(tmp_path, capsys):
    amd = write_run(tmp_path / "mi300x", kernels={n: d for n, _, d in AMD})
    assert main(["kernels", "classify", "--run", str(amd)]) == 0
    out = capsys.readouterr().out
    assert f"{len(AMD)} kernels, 1 unknown" in out
    row = next(x for x in out.splitlines() if x.startswith("| Cijk_Alik"))
    assert [c.strip() for c in row.strip("|").split("|")][1:] == [
        "GEMM",
        "GEMM large tile (>=128x128)",
        "Tensile/hipBLASLt",
        "built-in gemm",
    ]
