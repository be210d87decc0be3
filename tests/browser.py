"""Headless Chromium for the tests that look at pages as a person would (reports, docs).

Chromium is found on PATH (or $TEAMRL_CHROMIUM). Without it a test skips, unless
$TEAMRL_REQUIRE_BROWSER is set (CI sets it), where a missing browser is a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

BROWSERS = ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"]


def find_chromium() -> str:
    found = os.environ.get("TEAMRL_CHROMIUM") or next(filter(None, map(shutil.which, BROWSERS)), None)
    if found:
        return found
    message = "headless Chromium not found (apt-get install -y chromium, or set TEAMRL_CHROMIUM)"
    if os.environ.get("TEAMRL_REQUIRE_BROWSER"):
        pytest.fail(message)
    pytest.skip(message)


def run_chromium(browser: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
               f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"chromium exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done
