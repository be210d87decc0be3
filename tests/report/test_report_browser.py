"""Load the reports in headless Chromium: every image loads, nothing runs, the page is not blank.

Chromium: see tests/browser.py (a missing browser fails where $TEAMRL_REQUIRE_BROWSER is set).
Screenshots go to test-artifacts/ (gitignored) for a human to look at.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from PIL import Image

from browser import find_chromium as _chromium, run_chromium as _run_chromium


ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"

# Appended to a same-folder copy of the page (never to the report itself, which has no JS):
# same origin, so it can see whether each relative <img> really decoded.
CHECKER = """<script>
window.addEventListener("load", () => {
  const images = [...document.images];
  const out = document.createElement("pre");
  out.id = "browser-check";
  out.hidden = true;  // kept out of the screenshot, still in the dumped DOM
  out.textContent = JSON.stringify({
    images: images.length,
    broken: images.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute("src")),
    shown: images.filter(i => i.complete && i.naturalWidth > 0).map(i => i.getAttribute("src")),
    scripts: document.scripts.length,
    pwned: document.body.hasAttribute("data-pwned"),
    headings: [...document.querySelectorAll("h2")].map(h => h.textContent),
  });
  document.body.appendChild(out);
});
</script>"""


def _load(browser: str, page: Path, screenshot: Path, profile: Path) -> dict:
    """Open a same-folder copy of `page` with CHECKER appended; screenshot it and return what it saw.

    One Chromium launch does both (--dump-dom with --screenshot), to keep the test cheap.
    """
    probe = page.with_name("browser-check.html")
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", CHECKER + "\n</body>"))
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    screenshot.unlink(missing_ok=True)
    try:
        done = _run_chromium(browser, profile, "--virtual-time-budget=5000", "--window-size=1200,2000",
                             f"--screenshot={screenshot}", "--dump-dom", probe.resolve().as_uri())
    finally:
        probe.unlink()
    # The report has no scripts and the checker logs nothing, so any console message means the
    # browser objected to something in the page.
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    assert not console, "console messages while loading the report:\n" + "\n".join(console)
    image = Image.open(screenshot).convert("L")
    assert image.size == (1200, 2000)
    dark = sum(count for level, count in enumerate(image.histogram()) if level < 200)
    # Text, tables and plots cover well over 2% of the first screen; a blank or error page does not.
    assert dark > 0.02 * image.size[0] * image.size[1], f"{screenshot} looks blank ({dark} dark pixels)"
    match = re.search(r'<pre id="browser-check" hidden="">(.*?)</pre>', done.stdout, re.S)
    assert match, "the checker did not run; dumped DOM starts:\n" + done.stdout[:2000]
    return json.loads(html.unescape(match.group(1)))


def test_single_report_renders_in_chromium(tmp_path, single_report) -> None:
    browser = _chromium()
    page, _ = single_report
    seen = _load(browser, page, ARTIFACTS / "report.png", tmp_path / "profile")
    assert seen["images"] == 10 and seen["broken"] == []
    # the diagnostics plots decoded in the browser, not just referenced
    assert {"alerts.png", "diag-gradients.png", "diag-behaviour.png", "diag-accuracy.png"} <= set(seen["shown"])
    assert seen["scripts"] == 1, "only the checker may run: transcript <script> must stay text"
    assert not seen["pwned"]
    assert seen["headings"][:2] == ["Summary", "Held-out success"]
    assert {"Alerts", "Per-role gradients", "Per-role behaviour", "Sample training transcripts"} <= set(seen["headings"])


def test_comparison_renders_in_chromium(tmp_path, comparison_report) -> None:
    browser = _chromium()
    page, _, _ = comparison_report
    seen = _load(browser, page, ARTIFACTS / "report-compare.png", tmp_path / "profile")
    assert seen["images"] == 3 and seen["broken"] == []
