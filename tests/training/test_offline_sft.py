"""Offline SFT on transcript files: the format, the producers, the loss mask, `teamrl sft` end to end."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from teamrl.cli import main
from teamrl.config import ConfigError, load_config
from teamrl.policies.loading import Policy
from teamrl.policies.tiny_model import build_char_tokenizer, build_tiny_model
from teamrl.setup.team import agent_mapping, build_workflow
from teamrl.training.offline_sft import demos_by_policy, shuffled_batches
from teamrl.setup.sft import demo_loss, encode_demos
from teamrl.training.transcript_file import (TranscriptFormatError, TurnRecord, read_transcripts,
                                             write_transcripts)
from teamrl.training.transcript_sources import run_transcripts, scripted_transcripts

CONFIG = str(Path(__file__).resolve().parents[2] / "src" / "teamrl" / "configs" / "split_calc_team.yaml")
RECORD = TurnRecord("scripted:strong", "split_calc", "train", 3, 0, 0, "analyst", "analyst", "",
                    "analyst\nop:double x\nf>", "2*x", 1.5, True)


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory) -> str:
    """A small untrained char-level Llama saved as a model folder (no warm-up needed)."""
    folder = tmp_path_factory.mktemp("tiny")
    tok = build_char_tokenizer()
    model = build_tiny_model(tok, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, seed=1)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)


def test_round_trip_keeps_every_field(tmp_path):
    other = dataclasses.replace(RECORD, agent="calculator", role="calculator", prompt="calc\nx=1\n=>",
                                response="2*1", reward=-0.5, success=False, turn=1)
    path = write_transcripts(tmp_path / "sub" / "t.jsonl", [RECORD, other])
    assert read_transcripts(path) == [RECORD, other]
    first = json.loads(path.read_text().splitlines()[0])
    assert first["format"] == "teamrl-transcripts" and first["version"] == 1


def test_chat_prompts_round_trip_and_malformed_messages_are_refused(tmp_path):
    """A workflow with chat prompts records its messages; they are read back as written."""
    chat = dataclasses.replace(RECORD, prompt=[{"role": "system", "content": "Be brief."},
                                               {"role": "user", "content": "2+2?"}])
    assert read_transcripts(write_transcripts(tmp_path / "chat.jsonl", [chat])) == [chat]
    bad = json.loads(chat.to_json())
    bad["prompt"] = [{"role": "user"}]
    (tmp_path / "bad.jsonl").write_text(json.dumps(bad) + "\n")
    with pytest.raises(TranscriptFormatError, match="neither text nor a list of"):
        read_transcripts(tmp_path / "bad.jsonl")


@pytest.mark.parametrize("line, message", [
    ('{"format": "teamrl-transcripts", "version": 2}', "version 2, this teamrl reads version 1"),
    ('{"format": "other"}', "not a teamrl-transcripts line"),
    ('not json', "not a JSON object"),
    ('{"format": "teamrl-transcripts", "version": 1, "task": "split_calc"}', "missing field(s) source"),
])
def test_bad_lines_name_the_line_and_the_fix(tmp_path, line, message):
    path = tmp_path / "t.jsonl"
    path.write_text(RECORD.to_json() + "\n" + line + "\n")
    with pytest.raises(TranscriptFormatError, match="t.jsonl:2") as err:
        read_transcripts(path)
    assert message in str(err.value)


def test_wrong_types_and_empty_responses_are_refused(tmp_path):
    path = tmp_path / "t.jsonl"
    for bad, word in ((dict(instance=True), "'instance'"), (dict(response=""), "empty response")):
        record = json.loads(RECORD.to_json()) | bad
        path.write_text(json.dumps(record) + "\n")
        with pytest.raises(TranscriptFormatError, match=word):
            read_transcripts(path)


def test_missing_and_empty_files_say_how_to_make_one(tmp_path):
    with pytest.raises(FileNotFoundError, match="teamrl transcripts CONFIG --from scripted"):
        read_transcripts(tmp_path / "none.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(TranscriptFormatError, match="holds no turn"):
        read_transcripts(tmp_path / "empty.jsonl")
    with pytest.raises(TranscriptFormatError, match="every episode was filtered out"):
        write_transcripts(tmp_path / "x.jsonl", [])


def test_loss_is_on_response_tokens_only_by_hand():
    tok = build_char_tokenizer()
    model = build_tiny_model(tok, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, seed=1).eval()
    policy = Policy("p", model, tok, use_chat_template=False)
    (prompt, response), = encode_demos(policy, [("ab>", "cd")])
    assert response[-1] == tok.eos_token_id and len(response) == 3  # c, d, EOS
    ids = prompt + response
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].float(), dim=-1)  # [T, V]
        loss = demo_loss(policy, [(prompt, response)], 0).item()
    # Position t predicts token t+1: positions 2, 3, 4 predict c, d, EOS; positions 0, 1 (prompt) are out.
    by_hand = -(logp[2, ids[3]] + logp[3, ids[4]] + logp[4, ids[5]]).item() / 3
    every_token = -sum(logp[t, ids[t + 1]].item() for t in range(len(ids) - 1)) / (len(ids) - 1)
    assert loss == pytest.approx(by_hand, rel=1e-5)
    assert abs(loss - every_token) > 1e-3  # a mask that took the prompt in would not pass


def test_turns_go_to_the_policy_their_role_maps_to():
    records = scripted_transcripts(load_config(CONFIG, []), 3)
    for regime, names in (("shared", {"shared"}), ("per_role", {"analyst", "calculator"})):
        config = load_config(CONFIG, [f"regime={regime}"])
        workflow = build_workflow(config)
        demos = demos_by_policy(config, workflow, agent_mapping(config, workflow), records)
        assert set(demos) == names and sum(map(len, demos.values())) == 6
    assert demos["analyst"][0] == (records[0].prompt, records[0].response)


def test_turns_of_another_task_or_unknown_roles_are_refused():
    config = load_config(CONFIG, [])
    workflow = build_workflow(config)
    mapping = agent_mapping(config, workflow)
    with pytest.raises(ConfigError, match="agent\\(s\\) voter \\(voter\\) that workflow 'team' lacks"):
        demos_by_policy(config, workflow, mapping, [dataclasses.replace(RECORD, agent="voter", role="voter")])
    with pytest.raises(ConfigError, match="task\\(s\\) sokoban"):
        demos_by_policy(config, workflow, mapping, [dataclasses.replace(RECORD, task="sokoban")])


def test_batches_cover_every_demo_once_per_epoch():
    demos = [(str(i), str(i)) for i in range(10)]
    batches = shuffled_batches(demos, 4, seed=0)
    seen = [d for _ in range(5) for d in next(batches)]  # 20 demos: two epochs
    assert sorted(seen[:10]) == sorted(demos) and sorted(seen[10:]) == sorted(demos)


def test_strong_scripted_team_solves_everything():
    config = load_config(CONFIG, [])
    records = scripted_transcripts(config, 30)
    assert len(records) == 60 and all(r.success for r in records)
    assert {r.instance for r in records} == set(range(30)) and {r.split for r in records} == {"train"}


def test_checkpoint_transcripts_replay_the_prompts_each_agent_saw(tiny_model_dir, tmp_path):
    config = load_config(CONFIG, [f"policy.model={tiny_model_dir}", "rollout.max_new_tokens=6"])
    records = run_transcripts(config, Path(tiny_model_dir), 4, only_successes=False)
    assert len(records) == 8 and {r.policy for r in records} == {"shared"}
    workflow = build_workflow(config)
    by_episode = {e: [r for r in records if r.episode == e] for e in range(4)}
    assert all([r.agent for r in turns] == ["analyst", "calculator"] for turns in by_episode.values())
    for analyst, calculator in by_episode.values():
        state = workflow.new_state("train", analyst.instance)
        assert analyst.prompt == workflow.render("analyst", state)
        # The calculator saw the state after the analyst's committed answer.
        workflow.apply("analyst", state, analyst.response)
        assert calculator.prompt == workflow.render("calculator", state) and calculator.instance == analyst.instance
    with pytest.raises(FileNotFoundError, match="--from"):
        run_transcripts(config, tmp_path / "nothing", 2)


def test_sft_lowers_the_loss_and_eval_loads_the_checkpoint(tiny_model_dir, tmp_path, capsys):
    transcripts = tmp_path / "t.jsonl"
    common = [f"policy.model={tiny_model_dir}", f"output_dir={tmp_path / 'runs'}", "run_name=sft"]
    assert main(["transcripts", CONFIG, "--from", "scripted", "--out", str(transcripts), "--episodes", "40"]) == 0
    assert main(["sft", CONFIG, *common, "regime=per_role", "--transcripts", str(transcripts), "--steps", "25",
                 "--batch-size", "16", "--lr", "3e-3"]) == 0, capsys.readouterr().err
    run = tmp_path / "runs" / "sft"
    summary = json.loads((run / "summary.json").read_text())
    for name in ("analyst", "calculator"):
        info = summary["policies"][name]
        assert info["turns"] == 40 and info["loss_after"] < 0.8 * info["loss_before"], info
    assert (run / "config.yaml").is_file() and (run / "metrics.jsonl").read_text().count("sft/analyst/loss") == 25
    capsys.readouterr()
    assert main(["eval", CONFIG, *common, "regime=per_role", "--checkpoint", str(run / "checkpoints" / "best"),
                 "--instances", "3"]) == 0
    assert 0.0 <= json.loads(capsys.readouterr().out)["success"] <= 1.0
    # The same run name again is refused, not mixed into the finished run.
    assert main(["sft", CONFIG, *common, "--transcripts", str(transcripts), "--steps", "1"]) == 2
    assert "already holds a run" in capsys.readouterr().err


def test_cli_errors_are_one_line_with_the_fix(tiny_model_dir, tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(json.loads(RECORD.to_json()) | {"version": 0}) + "\n")
    args = ["sft", CONFIG, f"policy.model={tiny_model_dir}", f"output_dir={tmp_path}"]
    assert main([*args, "--transcripts", str(bad)]) == 2
    assert "regenerate the file with `teamrl transcripts`" in capsys.readouterr().err
    assert main([*args, "--transcripts", str(tmp_path / "missing.jsonl")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["transcripts", CONFIG, "task.name=sokoban", "--from", "scripted", "--out", str(bad)]) == 2
    assert "no strong scripted team" in capsys.readouterr().err
