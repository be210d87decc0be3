"""Bad input fails before any work, with one line on stderr that names the key or file and the fix,
a non-zero exit code, no traceback, and no run directory left behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from teamrl.cli import main as cli_main
from teamrl.config import ConfigError, load_config
from teamrl.setup import team
from teamrl.training.checkpoint import MARKER

CONFIGS = Path(__file__).resolve().parents[2] / "src" / "teamrl" / "configs"
SMALL = ["task.size=4", "task.min_distance=2", "workflow.max_turns=2", "train.steps=1", "train.batch_size=2",
         "train.eval_instances=2", "algorithm.k=2"]


@pytest.mark.parametrize("override, message", [
    ("train.steps=-1", "train.steps = -1 is invalid: expected an integer >= 0"),
    ("train.batch_size=0", "train.batch_size = 0 is invalid"),
    ("train.eval_instances=0", "train.eval_instances = 0 is invalid: expected an integer >= 1"),
    ("rollout.max_new_tokens=0", "rollout.max_new_tokens = 0 is invalid: expected an integer >= 1"),
    ("train.eval_every=-5", "train.eval_every = -5 is invalid: expected >= 0"),
    ("train.grad_clip=-1", r"train.grad_clip = -1.0 is invalid: expected >= 0 \(0 turns clipping off\)"),
    ("train.time_budget_s=-3", "train.time_budget_s = -3.0 is invalid"),
    ("train.warmup_steps=-1", "train.warmup_steps = -1 is invalid"),
    ("train.keep_last=-1", "^train.keep_last = -1 is invalid"),  # once: the section was named twice
    ("rollout.top_p=0", r"rollout.top_p = 0.0 is invalid: expected 0 < top_p <= 1"),
    ("rollout.top_k=-1", "rollout.top_k = -1 is invalid"),
])
def test_bad_values_name_their_own_key(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, [override])


def _run_cli(capsys, *argv: str) -> tuple[int, str]:
    code = cli_main(list(argv))
    err = capsys.readouterr().err.strip()
    return code, err


def _assert_one_clear_line(err: str, *needles: str) -> None:
    assert len(err.splitlines()) == 1, err
    assert err.startswith("teamrl: error: ") and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, (needle, err)


@pytest.mark.parametrize("content, needle", [
    ("", "no records"),
    ('{"question": "What is 1 + 1?"}\n', "no answer field"),
    ("this is not json\n", ":1: not valid JSON"),
    ('["a list"]\n', "expected a JSON object"),
], ids=["empty", "no-answer", "not-json", "not-an-object"])
def test_a_bad_dataset_file_is_one_line_and_leaves_no_run(tmp_path, capsys, content, needle):
    data = tmp_path / "problems.jsonl"
    data.write_text(content)
    code, err = _run_cli(capsys, "train", f"{CONFIGS}/math_team.yaml", f"task.source={data}",
                         f"output_dir={tmp_path / 'runs'}", "run_name=math")
    assert code == 2
    _assert_one_clear_line(err, str(data), needle)
    assert not (tmp_path / "runs").exists()


@pytest.fixture
def no_warm_up(monkeypatch):
    """Any warm-up of the tiny default fails the test: the checks must come before it (minutes)."""
    def warm_up(*args, **kwargs):
        raise AssertionError("warmed up before checking the input")
    monkeypatch.setattr(team, "warm_up", warm_up)


@pytest.mark.parametrize("kind", ["empty-folder", "missing", "file"])
def test_a_model_path_that_is_no_model_says_so(tmp_path, capsys, no_warm_up, kind):
    target = {"empty-folder": tmp_path / "folder", "missing": tmp_path / "nowhere", "file": tmp_path / "w.bin"}[kind]
    if kind == "empty-folder":
        target.mkdir()
    elif kind == "file":
        target.write_bytes(b"\0")
    code, err = _run_cli(capsys, "train", f"{CONFIGS}/plan_path_team.yaml", *SMALL, f"policy.model={target}",
                         f"output_dir={tmp_path / 'runs'}")
    assert code == 2
    expected = {"empty-folder": "without config.json", "missing": "no such folder", "file": "is a file"}[kind]
    _assert_one_clear_line(err, f"policy.model = '{target}'", expected, "save_pretrained")
    assert "tokenizer" not in err
    assert not (tmp_path / "runs").exists()


def test_a_policy_of_policies_is_named_by_its_own_key(tmp_path, capsys, no_warm_up):
    code, err = _run_cli(capsys, "train", f"{CONFIGS}/plan_path_team.yaml", *SMALL, "regime=per_role",
                         f"policies={{tool: {{model: {tmp_path}}}, plan: {{}}}}", "roles={tool: tool, plan: plan}",
                         f"output_dir={tmp_path / 'runs'}")
    assert code == 2
    _assert_one_clear_line(err, f"policies.tool.model = '{tmp_path}'")


@pytest.mark.parametrize("device, needle", [("cuda:99", "policy.device = 'cuda:99'"),
                                            ("gpu", "is not a torch device; use cpu, cuda or cuda:N")])
def test_an_unusable_device_fails_before_the_warm_up(tmp_path, capsys, no_warm_up, device, needle):
    # On a CPU build of torch: "needs a CUDA build"; with GPUs: "this machine shows N GPU(s)".
    code, err = _run_cli(capsys, "train", f"{CONFIGS}/plan_path_team.yaml", *SMALL,
                         f"policy.device={device}", f"output_dir={tmp_path / 'runs'}")
    assert code == 2
    _assert_one_clear_line(err, needle)
    assert not (tmp_path / "runs").exists()


def _fake_run_dir(root: Path, tags: list[str]) -> Path:
    run = root / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "metrics.jsonl").write_text(json.dumps({"step": 0, "eval/success": 0.5}) + "\n")
    (run / "config.yaml").write_text("seed: 0\n")
    for tag in tags:
        (run / "checkpoints" / tag).mkdir()
        (run / "checkpoints" / tag / MARKER).write_text("{}")
    return run


@pytest.mark.parametrize("given", ["run", "checkpoints"])
def test_eval_of_a_run_directory_suggests_its_final_checkpoint(tmp_path, capsys, given):
    run = _fake_run_dir(tmp_path, ["final", "step00002"])
    folder = run if given == "run" else run / "checkpoints"
    code, err = _run_cli(capsys, "eval", f"{CONFIGS}/plan_path_team.yaml", *SMALL, "--checkpoint", str(folder))
    assert code == 2
    _assert_one_clear_line(err, "is a run directory, not a checkpoint", "final, step00002",
                           f"use --checkpoint {run / 'checkpoints' / 'final'}")


def test_eval_needs_at_least_one_instance(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli_main(["eval", f"{CONFIGS}/plan_path_team.yaml", "--instances", "0"])
    assert exit_.value.code == 2
    assert "--instances: '0' is not a whole number >= 1" in capsys.readouterr().err


def test_an_unexpected_error_is_one_line_with_the_traceback_kept(monkeypatch, capsys):
    from teamrl.training import loop

    def broken(config):
        raise RuntimeError("something inside\nbroke")
    monkeypatch.setattr(loop, "train", broken)
    monkeypatch.delenv("TEAMRL_DEBUG", raising=False)
    code, err = _run_cli(capsys, "train", f"{CONFIGS}/plan_path_team.yaml")
    assert code == 1
    _assert_one_clear_line(err, "RuntimeError: something inside broke", "--debug")
    saved = Path(err.split("traceback in ", 1)[1].split(";", 1)[0])
    assert "Traceback" in saved.read_text() and "broken" in saved.read_text()
    saved.unlink()
    with pytest.raises(RuntimeError, match="something inside"):  # --debug (or TEAMRL_DEBUG=1): the real thing
        cli_main(["--debug", "train", f"{CONFIGS}/plan_path_team.yaml"])
    with pytest.raises(RuntimeError, match="something inside"):
        cli_main(["train", f"{CONFIGS}/plan_path_team.yaml", "--debug"])
    monkeypatch.setenv("TEAMRL_DEBUG", "1")
    with pytest.raises(RuntimeError, match="something inside"):
        cli_main(["train", f"{CONFIGS}/plan_path_team.yaml"])


def test_version_and_help(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli_main(["--version"])
    assert exit_.value.code == 0
    from teamrl import __version__
    assert capsys.readouterr().out.strip() == f"teamrl {__version__}"
    with pytest.raises(SystemExit):
        cli_main(["--help"])
    text = capsys.readouterr().out
    assert "alerts" in text.split("positional arguments")[0]  # in the description, not only the list
    assert "--debug" in text


def test_a_new_run_over_an_existing_one_is_refused_before_the_warm_up(tmp_path, capsys, no_warm_up):
    run = _fake_run_dir(tmp_path / "runs", [])
    before = sorted(p.name for p in run.iterdir())
    code, err = _run_cli(capsys, "train", f"{CONFIGS}/plan_path_team.yaml", *SMALL, f"output_dir={tmp_path / 'runs'}",
                         f"run_name={run.name}")
    assert code == 2
    _assert_one_clear_line(err, f"run directory {run} already holds a run", "--resume")
    assert sorted(p.name for p in run.iterdir()) == sorted([*before, ".lock"])  # untouched but for the lock file


DEEP = "[" * 10_000 + "]" * 10_000  # deeper than the YAML parser can recurse


@pytest.mark.parametrize("override, needles", [
    ("policy.lr=.inf", ["policy.lr = inf is invalid", "finite number"]),
    ("policy.weight_decay=.nan", ["policy.weight_decay = nan", "finite number"]),
    ("policy.lr=1e999", ["policy.lr = inf", "finite number"]),  # YAML leaves "1e999" a string: float() overflows
    ("rollout.temperature=.inf", ["rollout.temperature = inf", "finite number"]),
    ("algorithm.clip_high=.inf", ["algorithm.clip_high = inf", "finite number"]),
    ("algorithm.kl_coef_by_role={tool: .inf}", ["algorithm.kl_coef_by_role.tool = inf", "finite number"]),
    (f"train.steps={10**30}", [f"train.steps = {10**30} is too large", "64-bit"]),
    (f"seed={2**64}", [f"seed = {2**64} is too large", "at most 9223372036854775807"]),
    (f"train.time_budget_s={10**400}", ["train.time_budget_s = an integer of about 401 digits is too large"]),
    ("policy.lr=" + "9" * 5000, ["override policy.lr", "digits"]),
    (f"train.steps={2 * 10**9}", ["train.steps = 2000000000 is invalid", "at most 1_000_000_000 steps"]),
    (f"rollout.max_new_tokens={10**9}", ["rollout.max_new_tokens = 1000000000 is invalid", "at most 1_000_000"]),
    (f"train.threads={10**6}", ["train.threads = 1000000 is invalid", "per core of this machine"]),
    ("policy.lora={r: 16", ["override policy.lora is not valid YAML", "line 1, column 7", "policy.lora='...'"]),
    (f"x={DEEP}", ["override x nests brackets too deeply", "check its brackets"]),
    ("task.size=" + "[" * 100 + "]" * 100, ["task.size[0][0]", "nests more than 32 levels"]),
], ids=["lr-inf", "nan", "lr-1e999", "temperature-inf", "clip-inf", "coef-by-role-inf", "steps-10**30", "seed-2**64",
        "401-digits", "5000-digits", "steps-2e9", "max-new-tokens-1e9", "threads-1e6", "yaml-error", "deep-brackets",
        "deep-value"])
def test_impossible_values_fail_before_any_work(tmp_path, capsys, no_warm_up, override, needles):
    code, err = _run_cli(capsys, "train", f"{CONFIGS}/plan_path_team.yaml", *SMALL, override,
                         f"output_dir={tmp_path / 'runs'}")
    assert code == 2
    _assert_one_clear_line(err, *needles)
    assert not (tmp_path / "runs").exists()


ALIAS_BOMB = "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n" for i in range(6))


@pytest.mark.parametrize("content, needles", [
    ("- seed: 1\n- train: {steps: 5}\n", ["holds a YAML list, not a mapping of settings", "`key: value`"]),
    ("[]\n", ["holds a YAML list"]),  # once read as the defaults
    (bytes(range(256)) * 4, ["is not a text file (byte 0x80 at offset 128 is not UTF-8)", "YAML config file"]),
    ("train: {steps: 5\n", ["is not valid YAML", "line 2, column 1", "fix the file"]),
    (f"seed: {2**64}\n", [f"seed = {2**64} is too large"]),
    ("policy: {lr: .inf}\n", ["policy.lr = inf", "finite number"]),
    (ALIAS_BOMB, ["more than 100000 values"]),
], ids=["list", "empty-list", "binary", "unclosed", "huge-int", "inf", "alias-bomb"])
def test_a_config_file_that_is_no_config_is_one_line(tmp_path, capsys, no_warm_up, content, needles):
    config = tmp_path / "run.yaml"
    config.write_bytes(content if isinstance(content, bytes) else content.encode())
    code, err = _run_cli(capsys, "train", str(config), *SMALL, f"output_dir={tmp_path / 'runs'}")
    assert code == 2
    _assert_one_clear_line(err, *needles)
    assert not (tmp_path / "runs").exists()


def test_responses_longer_than_the_model_context_fail_before_sampling(tmp_path, capsys, random_model_dir):
    # The random tiny model has 512 positions; a 600-token response cannot fit beside any prompt.
    code, err = _run_cli(capsys, "train", f"{CONFIGS}/plan_path_team.yaml", *SMALL, f"policy.model={random_model_dir}",
                         "rollout.by_role={tool: {max_new_tokens: 600}}", f"output_dir={tmp_path / 'runs'}")
    assert code == 2
    _assert_one_clear_line(err, "rollout.max_new_tokens = 600 (agent tool)", "512 positions",
                           "below 512")
    assert not (tmp_path / "runs").exists()
