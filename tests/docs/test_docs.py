"""The docs: the site builds with warnings as errors, the config reference covers every field, every
command example in the README and the docs parses, and the pages render in a real browser."""

from __future__ import annotations

import dataclasses
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from browser import find_chromium, run_chromium
from teamrl.config import LoraConfig, RunConfig, load_config
from teamrl.config.reference import field_default, field_help
from teamrl.config.sections import _vllm_installed

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The built site (mkdocs build --strict: a broken link, a missing nav page or a warning fails)."""
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                           "-d", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return out


def _sections(cls: type, prefix: str = "") -> list[str]:
    """Every leaf key of a config dataclass, dotted (nested sections expanded, LoRA included)."""
    keys: list[str] = []
    for f in dataclasses.fields(cls):
        default = field_default(f)
        if dataclasses.is_dataclass(default):
            keys += _sections(type(default), f"{prefix}{f.name}.")
        else:
            keys.append(prefix + f.name)
    return keys


def test_config_reference_lists_every_key_with_help_text(site):
    page = (site / "reference" / "config" / "index.html").read_text()
    keys = _sections(RunConfig) + _sections(LoraConfig, "policy.lora.")
    assert len(keys) > 80
    missing = [k for k in keys if f"<code>{k}</code>" not in page]
    assert not missing, f"keys missing from the configuration reference: {missing}"
    def undocumented(cls: type) -> list[str]:
        helps = field_help(cls)
        return [f.name for f in dataclasses.fields(cls)
                if not helps.get(f.name) and not dataclasses.is_dataclass(field_default(f))]
    sections = [RunConfig, LoraConfig] + [type(getattr(RunConfig(), f.name)) for f in dataclasses.fields(RunConfig)
                                         if dataclasses.is_dataclass(getattr(RunConfig(), f.name))]
    assert {cls.__name__: undocumented(cls) for cls in sections if undocumented(cls)} == {}


def test_results_data_page_lists_every_result_file_with_commit_and_command(site):
    page = (site / "results-data" / "index.html").read_text()
    results = ROOT / "benchmarks" / "results"
    studies = [p for p in results.glob("*_study/*/*.json") if "summary_of" not in p.read_text()]
    files = sorted(str(p.relative_to(results)) for p in studies)
    assert len(files) >= 10
    for name in files:
        rows = [row for row in page.split("<tr>") if f"<code>{name}</code>" in row]
        assert rows, f"{name} is not on the results data page"
        assert all("<code>python " in row for row in rows), f"{name}: a row without its command"


def test_performance_page_shows_the_headline_table_rendered_from_result_files(site):
    from benchmarks import tables

    page = (site / "performance" / "index.html").read_text()
    assert "generated: headline table" not in page
    for row in tables.HEADLINE:
        assert f"<code>benchmarks/results/{row.result}</code>" in page, row.result


def _fenced_and_prose(text: str) -> tuple[list[str], str]:
    """The shell code blocks of a Markdown page (fences with no language or bash/sh/console) and its prose."""
    blocks, prose, current, language = [], [], None, None
    for line in text.splitlines():
        fence = re.match(r"^\s*```(\w*)", line)
        if fence and current is None:
            current, language = [], fence.group(1)
        elif fence:
            if language in ("", "bash", "sh", "console"):
                blocks.append("\n".join(current))
            current = None
        elif current is not None:
            current.append(line)
        else:
            prose.append(line)
    return blocks, "\n".join(prose)


def _command_examples() -> list[tuple[str, str]]:
    """(page, command) for every `teamrl train|eval|warmup|quickstart` example of a page: the lines of its
    shell code blocks (continuations joined) and its inline code spans."""
    found = []
    for page in PAGES:
        blocks, prose = _fenced_and_prose(page.read_text())
        lines = []
        for block in blocks:
            block_lines = re.sub(r"\\\n\s*", " ", block).splitlines()
            # A console transcript's command followed by "teamrl: error" shows bad input on purpose
            # (tests/training/test_bad_input.py checks those errors); lines starting "teamrl:" are its output.
            lines += [line for line, after in zip(block_lines, [*block_lines[1:], ""])
                      if not after.startswith("teamrl: error") and not line.startswith("teamrl:")]
        lines += re.findall(r"`([^`]*teamrl [^`]*)`", prose)
        for line in lines:
            line = line.split(" #")[0].strip().removeprefix("$ ")
            match = re.search(r"\bteamrl (train|eval|warmup|quickstart)\b.*", line)
            if match and "..." not in match.group(0):
                found.append((str(page.relative_to(ROOT)), match.group(0)))
    return found


def test_every_command_example_in_the_readme_and_docs_parses():
    examples = _command_examples()
    assert len(examples) >= 20, examples
    checked = 0
    for page, command in examples:
        words = shlex.split(command)[1:]
        verb, args = words[0], words[1:]
        if verb == "quickstart":
            config, overrides = None, args
        else:
            config, overrides = (args[0] if args else None), args[1:]
        if config is not None and not config.endswith(".yaml"):
            config, overrides = None, args
        if config is not None and not (ROOT / config).is_file():
            # a placeholder (CONFIG.yaml, /path/...) or a run directory's own config.yaml, written by training
            assert Path(config).stem.isupper() or config.startswith(("CONFIG", "/", "runs/", "RUN_DIR")), f"{page}: {command}: no config {config}"
            config = None  # a placeholder such as CONFIG.yaml: the overrides are still checked on the defaults
        overrides = [o for o, prev in zip(overrides, [None, *overrides]) if "=" in o and not o.startswith("-")
                     and not (prev or "").startswith("--")]
        if not _vllm_installed():  # the engine's value is checked where vLLM is installed (.ci/vllm)
            overrides = ["rollout.engine=builtin" if o == "rollout.engine=vllm" else o for o in overrides]
        try:
            load_config(ROOT / config if config else None, overrides)
        except Exception as err:  # noqa: BLE001 - reported with the page and the command
            pytest.fail(f"{page}: `{command}` does not parse: {err}")
        checked += 1
    assert checked == len(examples)


def _screenshot(browser: str, page: Path, shot: Path, profile: Path) -> tuple[Image.Image, str]:
    shot.parent.mkdir(parents=True, exist_ok=True)
    shot.unlink(missing_ok=True)
    done = run_chromium(browser, profile, "--virtual-time-budget=3000", "--window-size=1200,1600",
                        f"--screenshot={shot}", "--dump-dom", page.resolve().as_uri())
    return Image.open(shot).convert("L"), done.stdout


@pytest.mark.parametrize("page, shot, expected", [
    ("index.html", "docs-home.png", ["Where to go", "Getting started", "Configuration reference"]),
    ("reference/config/index.html", "docs-config.png", ["algorithm.k", "rollout.temperature",
                                                        "Candidates per agent per turn"]),
])
def test_docs_pages_render_in_chromium(site, tmp_path, page, shot, expected):
    browser = find_chromium()
    image, dom = _screenshot(browser, site / page, ARTIFACTS / shot, tmp_path / "profile")
    dark = sum(count for level, count in enumerate(image.histogram()) if level < 200)
    assert dark > 0.02 * image.size[0] * image.size[1], f"{shot} looks blank ({dark} dark pixels)"
    for text in expected:
        assert text in dom, f"{page}: {text!r} not in the rendered page"


def test_results_page_hook_lists_study_results_and_skips_other_json(tmp_path, monkeypatch):
    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    try:
        import results_page
    finally:
        sys.path.remove(str(ROOT / "docs" / "hooks"))
    (tmp_path / "provenance.yaml").write_text("{}\n")
    (tmp_path / "x_study" / "some-host").mkdir(parents=True)
    (tmp_path / "x_study" / "some-host" / "a_study.json").write_text(
        '{"runs": [{"run": "team", "initial": 0.1, "final": 0.5, "best": 0.6}], '
        '"provenance": {"commit": "abc1234", "command": "python x.py"}}')
    (tmp_path / "x_study" / "some-host" / "b_summary.json").write_text('{"ratio": 1.5, "rounds": 3}')  # no study
    monkeypatch.setattr(results_page, "RESULTS", tmp_path)
    domains, studies = results_page._rows()
    assert domains == [] and len(studies) == 1
    assert studies[0].startswith("| `x_study/some-host/a_study.json` | team | 0 | 10.0% | 50.0% | 60.0% | `abc1234`")
