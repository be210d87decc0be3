"""HTML building blocks shared by the single-run and comparison pages.

The pages carry no JavaScript and no external resources: inline CSS, `<details>` for the
collapsible parts, PNGs next to index.html. Every piece of run data (model output above all,
but also run names, config text and metric names) goes through `esc` before it reaches HTML.
"""

from __future__ import annotations

import html
import math
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any, Iterable

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto;
       max-width: 1150px; padding: 1.5rem 2rem 4rem; color: #1d2330; line-height: 1.45; }
h1 { margin-bottom: 0.2rem; } h2 { border-bottom: 2px solid #dde3ec; padding-bottom: 0.2rem;
       margin-top: 2.2rem; } h3 { margin-top: 1.4rem; }
.sub { color: #5b6678; margin-top: 0; }
figure { margin: 1rem 0; } figure img { max-width: 100%; border: 1px solid #e3e7ee; }
figcaption, .caption { color: #4a5466; font-size: 0.92rem; margin: 0.3rem 0 0.6rem; }
.missing { color: #8a5a00; background: #fff6e0; padding: 0.4rem 0.7rem; border-radius: 4px; }
table { border-collapse: collapse; margin: 0.6rem 0; font-size: 0.95rem; }
th, td { border: 1px solid #d6dce6; padding: 0.3rem 0.7rem; text-align: left; vertical-align: top; }
th { background: #f1f4f9; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
pre { background: #f6f8fb; border: 1px solid #e3e7ee; padding: 0.6rem 0.8rem; overflow-x: auto;
      white-space: pre-wrap; word-break: break-word; font-size: 0.86rem; margin: 0; }
details { margin: 0.5rem 0; } summary { cursor: pointer; font-weight: 600; }
.ok { color: #0a7a3e; font-weight: 600; } .fail { color: #b3261e; font-weight: 600; }
nav a { margin-right: 0.9rem; }
"""


def esc(value: Any) -> str:
    """HTML-escape anything (quotes too, so the result is safe inside attributes)."""
    return html.escape(str(value), quote=True)


def fmt(value: Any, kind: str = "num") -> str:
    """Format a number for a table: `pct`, `int`, `sec` or plain; missing values read as an en dash."""
    if value is None or isinstance(value, bool):
        return "–" if value is None else esc(value)
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return esc(value)
    if kind == "pct":
        return f"{value:.1%}"
    if kind == "int":
        return f"{int(value)}"
    if kind == "sec":
        return f"{value:.1f} s" if value < 600 else f"{value / 60:.1f} min"
    return f"{value:.4g}"


def document(title: str, body: str) -> str:
    """A complete standalone HTML page."""
    return (
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{esc(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n"
    )


def section(anchor: str, heading: str, body: str) -> str:
    return f'<section id="{esc(anchor)}">\n<h2>{esc(heading)}</h2>\n{body}\n</section>\n'


def nav(links: Iterable[tuple[str, str]]) -> str:
    """A row of in-page links: (anchor, label)."""
    return "<nav>" + "".join(f'<a href="#{esc(a)}">{esc(label)}</a>' for a, label in links) + "</nav>\n"


def plot(src: str | None, alt: str, caption: str) -> str:
    """An image with its caption, or a visible note when the run logged nothing to plot."""
    if src is None:
        return f'<p class="missing">Not plotted: this run logged no data for “{esc(alt)}”.</p>\n'
    return f'<figure>\n<img src="{esc(src)}" alt="{esc(alt)}">\n<figcaption>{esc(caption)}</figcaption>\n</figure>\n'


def table(headers: list[str], rows: list[list[str]], numeric: AbstractSet[int] = frozenset()) -> str:
    """A table from already-escaped cell HTML; columns in `numeric` are right-aligned."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(f'<td class="num">{c}</td>' if i in numeric else f"<td>{c}</td>" for i, c in enumerate(row))
        + "</tr>\n"
        for row in rows
    )
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}</tbody>\n</table>\n"


def details(summary: str, body: str, open_: bool = False) -> str:
    """A collapsible block; `summary` is plain text, `body` is HTML."""
    return f"<details{' open' if open_ else ''}>\n<summary>{esc(summary)}</summary>\n{body}\n</details>\n"


def pre(text: str) -> str:
    return f"<pre>{esc(text)}</pre>"


def write_page(out: Path, title: str, header: str, sections: list[tuple[str, str, str]]) -> Path:
    """Write out/index.html: the header, a link bar to every (anchor, heading, html) section, the sections."""
    body = header + nav((a, h) for a, h, _ in sections) + "".join(section(a, h, html) for a, h, html in sections)
    page = out / "index.html"
    page.write_text(document(title, body), encoding="utf-8")
    return page
