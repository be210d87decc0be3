"""What the report says about its numbers: the rule behind "step of the best", and a clip fraction
that is 0 by construction when every update is one optimizer step."""

from __future__ import annotations

import yaml

from teamrl.report import load_run, report_command

NOTE = "the clip fraction is 0 by construction"


def _set_algorithm(run, **values) -> None:
    path = run / "config.yaml"
    config = yaml.safe_load(path.read_text())
    config["algorithm"].update(values)
    path.write_text(yaml.safe_dump(config))


def _html(run) -> str:
    return report_command([str(run)], None).read_text()


def test_one_step_updates_are_said_to_clip_nothing(make_run) -> None:
    run = make_run("one-step", [0.2, 0.4, 0.6, 0.5, 0.7])  # default ppo_epochs 1, 32 samples <= 256
    assert load_run(run).one_step_updates()
    html = _html(run)
    assert NOTE in html and "algorithm.ppo_epochs" in html
    assert "The clip fraction is 0 by construction here" in html  # the per-role diagnostics figure too


def test_several_optimizer_steps_get_no_such_note(make_run) -> None:
    epochs = make_run("epochs", [0.2, 0.4, 0.6, 0.5, 0.7])
    _set_algorithm(epochs, ppo_epochs=2)
    small = make_run("minibatches", [0.2, 0.4, 0.6, 0.5, 0.7])
    _set_algorithm(small, minibatch_size=16)  # 32 samples per step: two minibatches
    for run in (epochs, small):
        assert not load_run(run).one_step_updates()
        assert "0 by construction" not in _html(run)


def test_best_step_is_the_earliest_evaluation_reaching_the_best(make_run) -> None:
    # Evaluations at 0, 10, 20, 30 and the final 40; the best (60%) is first reached at step 20.
    finished = make_run("finished", [0.2, 0.4, 0.6, 0.6, 0.6])
    unfinished = make_run("unfinished", [0.2, 0.4, 0.6, 0.6, 0.6], summary=False)
    assert load_run(finished).headline().best_step == 20
    assert load_run(unfinished).headline().best_step == 20  # recovered from metrics.jsonl, same rule
    html = _html(finished)
    assert "the earliest evaluation reaching the best" in html
