"""One report model, two renderers: Markdown and HTML show the same sections and tables, built once."""
from __future__ import annotations

import re
from html import unescape

from madengine_rocprof.reports import build_report, html_page, load_runs, markdown, sections

from .reports_builders import make_tt_run, random_dispatches, write_csv, write_trace
from .test_reports_counter_dispatches import CC_HEADER, counter_rows

NAMES = ["Cijk_Alik_Bljk_SB_MT128x128x16", "_attn_fwd_kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL"]


def _report(tmp_path):
    dispatches = random_dispatches(NAMES, 20, seed=3)
    run = tmp_path / "run"
    write_trace(run / "h" / "1_kernel_trace.csv", dispatches)
    write_csv(run / "h" / "1_counter_collection.csv", CC_HEADER,
              counter_rows(dispatches, {"SQ_WAVES": 4, "SQ_INSTS_VALU": 40}))
    return build_report(load_runs([run, make_tt_run(tmp_path, "v2")]))


def test_markdown_and_html_show_the_same_sections(tmp_path):
    report = _report(tmp_path)
    built = sections.build(report, top=10)
    text = markdown.render(report, top=10)
    page = unescape(html_page.render(report, top=10))
    for section in built:
        assert f"<h{section.level}" in page and section.title in page
        if any(isinstance(b, (sections.Table, sections.Lines)) for b in section.blocks):
            assert f"{'#' * section.level} {section.title}\n" in text
        for block in section.blocks:
            if isinstance(block, sections.Table):
                header = "| " + " | ".join(c.title for c in block.columns) + " |"
                assert header in text
                assert all(f">{c.title}</th>" in page for c in block.columns)
    tables = [b for s in built for b in s.blocks if isinstance(b, sections.Table)]
    md_rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert len(md_rows) == sum(len(t.rows) + 1 for t in tables)  # + the header row
    assert page.count("<tr>") + page.count('<tr class="base">') == sum(len(t.rows) + 1 for t in tables)


def test_markdown_has_the_kernel_counters_html_has(tmp_path):
    report = _report(tmp_path)
    text = markdown.render(report, top=10)
    run = report["runs"][0]
    assert set(run["kernel_counters"]) == set(NAMES)
    lines = [line for line in text.splitlines() if line.startswith("| ") and "SQ_INSTS_VALU" in line]
    assert any(line.startswith("| kernel | SQ_INSTS_VALU | SQ_WAVES |") for line in lines)
    for name in NAMES:
        row = next(line for line in text.splitlines() if line.startswith(f"| {name} | "))
        assert re.search(r"\| 40 \| 4 \|$", row)


def test_category_tables_sort_the_same_way(tmp_path):
    report = _report(tmp_path)
    text = markdown.render(report, top=10)
    page = unescape(html_page.render(report, top=10))
    for run in report["runs"]:
        expected = [c["category"] for c in sorted((c for c in run["categories"] if c["kernels"]),
                                                  key=lambda c: (-c["total_ns"], c["category"]))]
        section = text.split(f"## Run: {run['label']}", 1)[1].split("### Kernel categories", 1)[1]
        md_order = [line.split(" | ")[0][2:] for line in section.split("\n\n", 2)[1].splitlines()[2:]]
        assert md_order == expected
        html_section = page.split(f"Run: {run['label']}", 1)[1].split("Kernel categories", 1)[1].split("</table>")[0]
        assert re.findall(r"<tr><td class=\"l\">([^<]+)</td>", html_section) == expected
