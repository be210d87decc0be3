"""The report of one run: summary, curves, resolved config and sample held-out transcripts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from teamrl.report.diagnostics import diagnostics_sections
from teamrl.report.page import details, esc, fmt, plot, pre, table, write_page
from teamrl.report.plots import Line, Panel, save_figure
from teamrl.report.runs import RunData

# The per-policy optimiser statistics worth a panel each, in reading order (kl_ref only when logged).
POLICY_STATS = [
    ("loss", "loss", "Policy loss"),
    ("entropy", "nats / token", "Entropy"),
    ("clip_frac", "fraction of tokens", "Clip fraction"),
    ("grad_norm", "L2 norm (pre-clip)", "Gradient norm"),
    ("kl_ref", "KL", "KL to reference"),
]
TIME_PHASES = [("rollout_s", "rollout"), ("update_s", "update"), ("eval_s", "held-out eval")]
# Said wherever a clip fraction is plotted for a run whose updates were one optimizer step each.
ONE_STEP_NOTE = (
    "In this run every update was one optimizer step on the samples just drawn (algorithm.ppo_epochs "
    "1 and each step's samples within one minibatch of algorithm.minibatch_size), so the PPO ratio "
    "is 1 and the clip fraction is 0 by construction, not a sign of stable training. It becomes "
    "informative with algorithm.ppo_epochs > 1 or a minibatch_size below the samples per step."
)
BEST_STEP_RULE = (
    "Step of the best (the earliest evaluation reaching the best; checkpoints/best holds its weights, "
    "step 0 means the initial model)"
)


def write_run_report(run: RunData, out: Path) -> Path:
    """Write out/index.html plus its PNGs (referenced by relative path); returns the page path."""
    out.mkdir(parents=True, exist_ok=True)
    plots = _plot_sections(run, out)
    sections = [("summary", "Summary", _summary_html(run))]
    sections += [(anchor, heading, html) for anchor, heading, html in plots]
    sections += diagnostics_sections(run, out)
    sections.append(("transcripts", "Sample held-out transcripts", _transcripts_html(run)))
    sections.append(("train-transcripts", "Sample training transcripts", _train_transcripts_html(run)))
    sections.append(("config", "Resolved config", _config_html(run)))
    sections.append(("metrics", "Every logged metric", _metrics_table(run)))
    header = (
        f"<h1>Run report: {esc(run.name)}</h1>\n"
        f'<p class="sub">{esc(_describe(run))}<br>Run directory: <code>{esc(run.path.resolve())}</code></p>\n'
    )
    return write_page(out, f"teamrl report: {run.name}", header, sections)


def _describe(run: RunData) -> str:
    """One line naming the task, team and algorithm, from the resolved config."""
    c = run.config or {}

    def get(section: str, key: str) -> Any:
        value = c.get(section)
        return value.get(key) if isinstance(value, dict) else None

    parts = [
        ("task", get("task", "name")),
        ("workflow", get("workflow", "name")),
        ("regime", c.get("regime")),
        ("model", get("policy", "model")),
        ("grouping", get("algorithm", "grouping")),
        ("k", get("algorithm", "k")),
        ("seed", c.get("seed")),
    ]
    text = " · ".join(f"{k} {v}" for k, v in parts if v is not None)
    return text or "no config.yaml in this run directory"


def _summary_html(run: RunData) -> str:
    h = run.headline()
    rows = [
        ["Held-out success before training", fmt(h.initial, "pct")],
        ["Held-out success at the end", fmt(h.final, "pct")],
        ["Best held-out success", fmt(h.peak, "pct")],
        [BEST_STEP_RULE, fmt(h.best_step, "int")],
        ["Training steps", fmt(h.steps, "int")],
        ["Training time (without the first and final evaluation)", fmt(h.train_seconds, "sec")],
    ]
    summary = run.summary or {}
    mapping = summary.get("agent_to_policy", summary.get("role_to_policy"))  # role_to_policy: older runs
    if isinstance(mapping, dict):
        rows.append(["Agent → policy", "<br>".join(f"{esc(a)} → {esc(p)}" for a, p in mapping.items())])
    note = (
        ""
        if h.from_summary
        else '<p class="missing">No summary.json: the run is unfinished or crashed. '
        "These numbers are recovered from metrics.jsonl.</p>\n"
    )
    return note + table(["", "value"], rows, numeric={1})


def _plot_sections(run: RunData, out: Path) -> list[tuple[str, str, str]]:
    """(anchor, heading, html) per plot; each PNG is written only when the run logged its data."""
    agents = list(dict.fromkeys(run.names_under("role/", "/reward") + run.names_under("eval/reward/", "")))
    policies = run.names_under("policy/", "/loss")
    specs = [
        (
            "heldout",
            "Held-out success",
            3,
            "Success rate on the held-out instances (step 0 = before training, last point = the final "
            "model), the team return on those episodes, and each agent's mean reward there.",
            [
                Panel("Held-out success", "success rate", [Line("", run.series("eval/success"))], True),
                Panel("Held-out team return", "team return", [Line("", run.series("eval/team_return"))]),
                Panel(
                    "Held-out reward per agent",
                    "mean reward",
                    [Line(a, run.series(f"eval/reward/{a}")) for a in agents],
                ),
            ],
        ),
        (
            "training",
            "Training rollouts",
            2,
            "Success and team return of the sampled training episodes (at rollout temperature, so noisier "
            "and usually below held-out). Long runs show a trailing mean over the faint raw curve.",
            [
                Panel("Training success", "success rate", [Line("", run.series("train/success"))], True),
                Panel("Training team return", "team return", [Line("", run.series("train/team_return"))]),
            ],
        ),
        (
            "roles",
            "Per-agent (role) curves",
            3,
            "For each agent: mean reward of its training turns, mean response length in tokens, and "
            "mean |advantage| (how much learning signal its turns carry; near 0 means nothing to learn from).",
            [
                Panel("Reward per agent", "mean reward", [Line(a, run.series(f"role/{a}/reward")) for a in agents]),
                Panel(
                    "Response length per agent",
                    "tokens",
                    [Line(a, run.series(f"role/{a}/response_len")) for a in agents],
                ),
                Panel(
                    "|Advantage| per agent",
                    "mean |advantage|",
                    [Line(a, run.series(f"role/{a}/adv_abs")) for a in agents],
                ),
            ],
        ),
        (
            "policies",
            "Per-policy optimisation",
            2,
            "Optimiser statistics of each trained policy per step: surrogate loss, token entropy, fraction "
            "of tokens whose ratio was clipped, and gradient norm before clipping (plus KL to the "
            "reference model when a KL penalty is on)." + (" " + ONE_STEP_NOTE if run.one_step_updates() else ""),
            [
                Panel(
                    _clip_title(run, title) if stat == "clip_frac" else title,
                    ylabel,
                    [Line(p, run.series(f"policy/{p}/{stat}")) for p in policies],
                )
                for stat, ylabel, title in POLICY_STATS
            ],
        ),
        (
            "advantages",
            "Advantage signal",
            2,
            "Fraction of samples whose group had no reward spread (zero advantage, so no gradient), and "
            "the spread of advantages. A zero-signal fraction near 1 means the batch taught nothing.",
            [
                Panel(
                    "Zero-signal fraction", "fraction of samples", [Line("", run.series("adv/zero_signal_frac"))], True
                ),
                Panel("Advantage std", "std", [Line("", run.series("adv/adv_std"))]),
            ],
        ),
        (
            "timing",
            "Time per phase",
            2,
            "Wall-clock seconds spent per step on sampling rollouts, on the policy update, and on held-out "
            "evaluation (only at eval steps); and generation throughput during rollouts.",
            [
                Panel(
                    "Seconds per phase",
                    "seconds",
                    [Line(label, run.series(f"time/{key}")) for key, label in TIME_PHASES],
                ),
                Panel("Rollout throughput", "generated tokens / s", [Line("", run.series("time/tokens_per_s"))]),
            ],
        ),
    ]
    sections = []
    for anchor, heading, ncols, caption, panels in specs:
        name = f"{anchor}.png"
        written = save_figure(out / name, panels, ncols)
        sections.append((anchor, heading, plot(name if written else None, heading, caption)))
    return sections


def _clip_title(run: RunData, title: str) -> str:
    return f"{title} (0 by construction: ratio 1)" if run.one_step_updates() else title


def chosen_eval_steps(run: RunData) -> list[tuple[int, str]]:
    """The eval steps whose transcripts are shown: first, best (or nearest saved) and last."""
    saved = list(run.transcripts)
    if not saved:
        return []
    best = (run.summary or {}).get("best_step")
    if best not in run.transcripts:
        success = dict(run.series("eval/success"))
        scored = [s for s in saved if s in success]
        best = max(scored, key=lambda s: success[s]) if scored else None
    picks = [
        (saved[0], "first evaluation" + (", before training" if saved[0] == 0 else "")),
        (best, "best held-out success"),
        (saved[-1], "last evaluation"),
    ]
    chosen: dict[int, list[str]] = {}
    for step, why in picks:
        if step is not None:
            chosen.setdefault(step, []).append(why)
    return [(step, ", ".join(whys)) for step, whys in sorted(chosen.items())]


def _transcripts_html(run: RunData) -> str:
    steps = chosen_eval_steps(run)
    if not steps:
        return '<p class="missing">No transcripts/eval_step*.json in this run directory.</p>'
    success = dict(run.series("eval/success"))
    parts = [
        '<p class="caption">Held-out episodes saved at the first, best and last evaluation: what '
        "each agent said, the reward it got and the reward terms behind it. Model output is shown "
        "verbatim as text.</p>"
    ]
    for step, why in steps:
        episodes = run.transcripts[step]
        rate = f" — held-out success {fmt(success[step], 'pct')}" if step in success else ""
        parts.append(f'<h3 id="transcripts-step{step}">Step {step} ({esc(why)}){rate}</h3>')
        parts.append(f'<p class="caption">{len(episodes)} saved episodes.</p>')
        for index, episode in enumerate(episodes):
            parts.append(_episode_html(episode, open_=index == 0))
    return "\n".join(parts)


def _train_transcripts_html(run: RunData) -> str:
    if not run.train_transcripts:
        return '<p class="missing">No transcripts/train_step*.json in this run directory.</p>'
    parts = [
        '<p class="caption">Training episodes sampled at each evaluation step: the committed response '
        "of every agent turn, its reward, and its advantage (how much that response was reinforced, "
        "+, or discouraged, -, relative to the other candidates of its group).</p>"
    ]
    for step, episodes in run.train_transcripts.items():
        parts.append(f'<h3 id="train-transcripts-step{step}">Step {step}</h3>')
        parts.extend(_episode_html(episode, open_=False) for episode in episodes)
    return "\n".join(parts)


def _episode_html(episode: dict[str, Any], open_: bool) -> str:
    ok = bool(episode.get("success"))
    advantages = any("advantage" in turn for turn in episode["turns"])
    rows = [
        [
            fmt(turn.get("turn"), "int"),
            esc(turn.get("agent", "?")),
            pre(str(turn.get("text", ""))),
            fmt(turn.get("reward")),
        ]
        + ([fmt(turn.get("advantage"))] if advantages else [])
        + [_terms_html(turn.get("terms"))]
        for turn in episode["turns"]
    ]
    verdict = '<span class="ok">success</span>' if ok else '<span class="fail">failure</span>'
    headers = ["turn", "agent", "what it said", "reward"] + (["advantage"] if advantages else []) + ["reward terms"]
    body = f"<p>Outcome: {verdict}</p>\n" + table(headers, rows, numeric={0, 3, 4} if advantages else {0, 3})
    label = f"Instance {episode.get('instance', '?')}: {'success' if ok else 'failure'}"
    return details(label, body, open_)


def _terms_html(terms: Any) -> str:
    if isinstance(terms, dict):
        return "<br>".join(f"{esc(k)} = {fmt(v)}" for k, v in terms.items()) or "–"
    return "–" if terms is None else esc(terms)


def _config_html(run: RunData) -> str:
    if run.config_text is None:
        return '<p class="missing">No config.yaml in this run directory.</p>'
    return details("config.yaml (click to expand)", pre(run.config_text))


def _metrics_table(run: RunData) -> str:
    rows = []
    for key in run.keys():
        values = [v for _, v in run.series(key)]
        cells = [fmt(len(values), "int")] + (
            [fmt(values[0]), fmt(values[-1]), fmt(min(values)), fmt(max(values))] if values else ["–"] * 4
        )
        rows.append([f"<code>{esc(key)}</code>"] + cells)
    return details(
        f"{len(rows)} metrics in metrics.jsonl: first / last / min / max (click to expand)",
        table(["metric", "points", "first", "last", "min", "max"], rows, numeric={1, 2, 3, 4, 5}),
    )
