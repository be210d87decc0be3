"""The report's diagnostics sections: alerts on the timeline and in words, per-role diagnostics plots.

Reads what `teamrl.diagnostics` logged: `diag/role/<role>/<stat>` metrics and alerts.jsonl.
A run without them (diagnostics off, or an older run) gets a visible note instead of empty plots.
"""

from __future__ import annotations

from pathlib import Path

from teamrl.report.page import esc, fmt, plot, table
from teamrl.report.plots import Line, Panel, save_figure
from teamrl.report.runs import RunData

# Alert kinds: colour on the timeline and the plain-words name in the list.
ALERT_KINDS = {
    "dominant_role": ("#D55E00", "dominant role"),
    "echo_chamber": ("#CC79A7", "echo chamber"),
    "collapse": ("#000000", "collapse"),
}

# (anchor, heading, ncols, caption, [(stat, panel title, y label, fraction)])
DIAGNOSTIC_FIGURES = [
    (
        "diag-gradients",
        "Per-role gradients",
        2,
        "Computed per role even when roles share a policy (each role's part of a minibatch is "
        "backpropagated on its own). Gradient norm before clipping; each role's share of its policy's "
        "gradient norm and of the trained tokens (only when a policy serves several roles); temporal "
        "coherence cos(g, EMA of past g): persistently near 1 means the role keeps pushing one way; and "
        "the mean gradient cosine between duplicated agents of one role (diagnostics.level: full).",
        [
            ("grad_norm", "Gradient norm per role", "L2 norm", False),
            ("grad_share", "Share of the policy's gradient", "fraction", True),
            ("tokens_share", "Share of the policy's trained tokens", "fraction", True),
            ("coherence", "Temporal coherence cos(g, EMA(g))", "cosine", False),
            ("dup_grad_cos", "Gradient cosine between duplicated agents", "cosine", False),
            ("damping_scale", "Coherence damping scale", "scale", False),
        ],
    ),
    (
        "diag-behaviour",
        "Per-role behaviour",
        2,
        "What each role's sampled responses look like: length in tokens and its drift from the start "
        "of training, format adherence (well-formed answers), and, for roles played by several agents, "
        "how different their committed answers are (1 - token Jaccard similarity, averaged over pairs).",
        [
            ("response_len", "Response length", "tokens", False),
            ("response_len_drift", "Length drift from step 0", "tokens", False),
            ("format_ok", "Format adherence", "fraction well formed", True),
            ("diversity", "Output diversity of duplicated agents", "mean pairwise distance", True),
        ],
    ),
    (
        "diag-accuracy",
        "Per-role accuracy and optimisation",
        3,
        "Accuracies the workflow records per role (a generator's own answer, any generator right, the "
        "evaluator's verdict right), and per-role PPO statistics: clip fraction, entropy and KL to the "
        "reference model (when a KL anchor keeps one).",
        [
            ("correct", "Correct answers", "fraction", True),
            ("any_correct", "Any-correct oracle", "fraction", True),
            ("verdict_correct", "Verdict accuracy", "fraction", True),
            ("clip_frac", "Clip fraction", "fraction of tokens", False),
            ("entropy", "Entropy", "nats / token", False),
            ("kl_ref", "KL to reference", "KL", False),
        ],
    ),
]


def diagnostics_sections(run: RunData, out: Path) -> list[tuple[str, str, str]]:
    """(anchor, heading, html) for the alerts section and each diagnostics figure."""
    roles = list(
        dict.fromkeys(run.names_under("diag/role/", "/response_len") + run.names_under("diag/role/", "/grad_norm"))
    )
    sections = [("alerts", "Alerts", _alerts_html(run, out))]
    for anchor, heading, ncols, caption, stats in DIAGNOSTIC_FIGURES:
        one_step = run.one_step_updates() and any(stat == "clip_frac" for stat, *_ in stats)
        panels = [
            Panel(
                f"{title} (0 by construction: ratio 1)" if one_step and stat == "clip_frac" else title,
                ylabel,
                [Line(r, run.series(f"diag/role/{r}/{stat}")) for r in roles],
                fraction,
            )
            for stat, title, ylabel, fraction in stats
        ]
        name = f"{anchor}.png"
        written = save_figure(out / name, panels, ncols)
        note = (
            (
                " The clip fraction is 0 by construction here: every update was one optimizer step on the "
                "samples just drawn (PPO ratio 1; see Per-policy optimisation)."
            )
            if one_step
            else ""
        )
        sections.append((anchor, heading, plot(name if written else None, heading.lower(), caption + note)))
    return sections


def _alerts_html(run: RunData, out: Path) -> str:
    markers = [
        (
            a["step"],
            ALERT_KINDS.get(a["kind"], ("#E69F00", a["kind"]))[1],
            ALERT_KINDS.get(a["kind"], ("#E69F00", a["kind"]))[0],
        )
        for a in run.alerts
    ]
    timeline = save_figure(
        out / "alerts.png",
        [
            Panel(
                "Alerts on the timeline",
                "success rate",
                [
                    Line("held-out success", run.series("eval/success")),
                    Line("training success", run.series("train/success")),
                ],
                True,
                markers,
            )
        ],
        ncols=1,
    )
    figure = plot(
        "alerts.png" if timeline else None,
        "alerts on the timeline",
        "Held-out and training success, with a dashed line at each step where an alert fired.",
    )
    if not run.alerts:
        return figure + (
            '<p class="caption">No alerts: no role dominated a shared policy while another '
            "drifted toward it, no duplicated agents echoed each other, and held-out success "
            "never collapsed below its peak (thresholds under <code>diagnostics:</code> in the "
            "config).</p>\n"
        )
    rows = [
        [fmt(a["step"], "int"), esc(ALERT_KINDS.get(a["kind"], ("", a["kind"]))[1]), esc(a["message"])]
        for a in run.alerts
    ]
    return figure + table(["step", "alert", "what it means"], rows, numeric={0})
