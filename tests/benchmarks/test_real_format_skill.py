"""scripts/study/real_format_skill.py: well-formed and right shares per role, before and after, from hand-written
transcripts of a study folder."""

from __future__ import annotations

import json

from scripts.study import real_format_skill


def turn(agent, formed, right):
    return {"agent": agent, "terms": {"format": 0.0 if formed else -0.1, "team": 1.0 if right else 0.0}}


def write(run, step, turns):
    (run / "transcripts").mkdir(parents=True, exist_ok=True)
    episodes = [{"instance": i, "success": False, "turns": [t]} for i, t in enumerate(turns)]
    (run / "transcripts" / f"eval_step{step:05d}.json").write_text(json.dumps(episodes))


def test_format_gain_and_skill_gain_are_told_apart(tmp_path):
    for seed in (0, 1):
        run = tmp_path / "runs" / f"per_role-s{seed}"
        # before: 2 of 4 calculator answers parse, 1 is right; after: all 4 parse, still 1 of them right
        write(
            run,
            0,
            [
                turn("calculator", True, True),
                turn("calculator", True, False),
                turn("calculator", False, False),
                turn("calculator", False, False),
            ],
        )
        write(run, 6, [turn("calculator", True, False)] * 4)
        write(run, 12, [turn("calculator", True, True)] + [turn("calculator", True, False)] * 3)
    stopped = tmp_path / "runs" / "per_role-s1.stopped-1796220712"  # an interrupted run, rerun under the plain name
    write(stopped, 0, [turn("calculator", False, False)] * 4)
    write(stopped, 6, [turn("calculator", False, False)] * 4)
    table = real_format_skill.table(tmp_path, None)
    # pooled over both seeds; the last evaluation (step 12) is "after", step 6 is ignored
    assert "| per_role | calculator | 8/8 | 50% -> 100% | 25% -> 25% | 50% -> 25% |" in table


def test_the_right_answer_term_is_named_per_task(tmp_path):
    # Plan-Path's terms mark a right answer with `goal`, not `team`
    run = tmp_path / "runs" / "shared-s0"
    plan = {"agent": "plan", "terms": {"format": 0.1, "goal": 1.0}}
    wrong = {"agent": "plan", "terms": {"format": -0.1}}
    for step, turns in ((0, [plan, wrong, wrong, wrong]), (12, [plan, plan, plan, wrong])):
        episodes = [{"instance": i, "success": False, "turns": [t]} for i, t in enumerate(turns)]
        (run / "transcripts").mkdir(parents=True, exist_ok=True)
        (run / "transcripts" / f"eval_step{step:05d}.json").write_text(json.dumps(episodes))
    assert "| shared | plan | 4/4 | 25% -> 75% | 25% -> 75% | 100% -> 100% |" in real_format_skill.table(
        tmp_path, None, right_term="goal"
    )
    assert "| shared | plan | 4/4 | 25% -> 75% | 0% -> 0% | 0% -> 0% |" in real_format_skill.table(tmp_path, None)


def test_episodes_that_lose_a_right_answer_to_a_later_turn_are_counted(tmp_path):
    # The code team's coder writes three programs an episode; success is the last one's.
    run = tmp_path / "runs" / "shared-s0"
    right = {"agent": "coder", "terms": {"format": 0.1, "gt_pass": 1.0}}
    wrong = {"agent": "coder", "terms": {"format": 0.1, "gt_pass": 0.5}}
    before = [
        {"instance": 0, "success": False, "turns": [right, wrong, wrong]},  # right first, rewritten: lost
        {"instance": 1, "success": False, "turns": [wrong, wrong, wrong]},
    ]
    after = [
        {"instance": 0, "success": True, "turns": [wrong, right]},
        {"instance": 1, "success": True, "turns": [right]},
    ]
    (run / "transcripts").mkdir(parents=True)
    for step, episodes in ((0, before), (12, after)):
        (run / "transcripts" / f"eval_step{step:05d}.json").write_text(json.dumps(episodes))
    table = real_format_skill.episode_table(tmp_path, None, right_term="gt_pass")
    assert "| shared | coder | 2/2 | 50% -> 100% | 0% -> 100% | 50% -> 0% |" in table


def test_well_formed_follows_the_library_rule(tmp_path):
    # A flow's verdict is `format_ok` (its bonus may be 0, so `format` is 0 for a bad answer too); a turn
    # with no format verdict at all is left out of the well-formed share instead of counted as well formed.
    run = tmp_path / "runs" / "shared-s0"
    bad = {"agent": "generator", "terms": {"format_ok": 0.0, "format": 0.0, "team": 0.0}}
    good = {"agent": "generator", "terms": {"format_ok": 1.0, "format": 0.0, "team": 1.0}}
    unjudged = {"agent": "generator", "terms": {"team": 1.0}}
    write(run, 0, [bad, bad, good, unjudged])
    write(run, 12, [good, good, bad, unjudged])
    table = real_format_skill.table(tmp_path, None)
    assert "| shared | generator | 4/4 | 33% -> 67% | 50% -> 75% | 100% -> 100% |" in table
