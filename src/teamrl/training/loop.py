"""The training loop, top to bottom: rollout -> rewards -> advantages -> update -> log / eval / save."""

from __future__ import annotations

import json
import logging
import random
import time
from pathlib import Path
from statistics import mean
from typing import Any

import torch
from tqdm import tqdm

from teamrl.config import RunConfig
from teamrl.diagnostics.alerts import Alert
from teamrl.diagnostics.session import RunDiagnostics
from teamrl.diagnostics.transcripts import training_transcripts
from teamrl.policies.cpu_linear import onednn_layer_count
from teamrl.policies.loading import Policy
from teamrl.rollout.agent_params import agent_sampling, check_context
from teamrl.rollout.evaluation import evaluate
from teamrl.rollout.logprob_gap import gap_metrics
from teamrl.rollout.sampler import release as release_engines
from teamrl.rollout.sampler import served_by
from teamrl.rollout.tree import Episode, Sample
from teamrl.setup.team import build_policies, build_workflow
from teamrl.setup.threads import ThreadGovernor
from teamrl.training.arithmetic_notes import arithmetic_record
from teamrl.training.backends import make_backend
from teamrl.training.backends.base import UpdateSettings, update_seeds
from teamrl.training.backends.rollout_workers import RolloutPool
from teamrl.training.best_weights import BestWeights
from teamrl.training.credit import assign_advantages, trainable
from teamrl.training.disk_full import DiskFullError, is_disk_full, what_was_written
from teamrl.training.fingerprint import RunFingerprint
from teamrl.training.freed_memory import keep_freed_memory
from teamrl.training.resume import LoopState, TrackerStates, restore_training_state, save_training_state
from teamrl.training.run_dir import RunDirectory, TrainingInterrupted, claim_run
from teamrl.training.schedule import make_schedule
from teamrl.training.update import make_optimizer


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)


def rollout_metrics(samples: list[Sample], episodes: list[Episode]) -> dict[str, float]:
    """Success, returns and per-agent reward, length and |advantage| (call after assign_advantages)."""
    metrics = {
        "train/success": mean(e.success for e in episodes),
        "train/team_return": mean(e.team_return for e in episodes),
        "train/turns": mean(e.turns for e in episodes),
        "train/samples": float(len(samples)),
    }
    for agent in dict.fromkeys(s.agent for s in samples):
        mine = [s for s in samples if s.agent == agent]
        metrics[f"role/{agent}/reward"] = mean(s.reward for s in mine)
        metrics[f"role/{agent}/response_len"] = mean(len(s.generation.response_ids) for s in mine)
        metrics[f"role/{agent}/adv_abs"] = mean(abs(s.advantage) for s in mine)
    return metrics


def train(
    config: RunConfig, model_path: str | None = None, progress: bool = True, first_steps: int | None = None
) -> Path:
    """Train the configured team (or resume it: train.resume); returns the run directory.

    first_steps: play and train only the run's first steps, with no held-out evaluation (it draws from
    generators of its own, so the steps are the full run's bit for bit) and no checkpoint; the summary
    holds the steps and the fingerprint. A cheap check that a run still starts as it did
    (`teamrl study --check-bits`).
    """
    lock, resume = claim_run(config)  # a run directory another process writes is refused here
    caller_threads = torch.get_num_threads()  # given back when the run ends
    try:
        seed_everything(config.seed)
        threads = ThreadGovernor(config.train.threads)  # `auto` is decided again before every step
        threads.apply()  # before the policies are built: a first run warms the tiny default up there
        if config.train.keep_freed_memory:
            keep_freed_memory()  # glibc's malloc: no page faults for each step's large tensors (freed_memory.py)
        workflow = build_workflow(config)
        eval_sampling = agent_sampling(config.rollout, workflow.agents, "eval")  # checks by_role's names early
        policies, mapping = build_policies(config, workflow, model_path)
        contexts = {name: getattr(p.network.config, "max_position_embeddings", None) for name, p in policies.items()}
        onednn_layers = onednn_layer_count([p.network for p in policies.values()])  # policy.cpu_linear, resolved
        check_context(agent_sampling(config.rollout, workflow.agents, "train"), mapping, contexts)
        diagnostics = RunDiagnostics(config, workflow.agents, mapping)
        optimizers = {
            name: make_optimizer(p, config.policy_config(name), config.train, diagnostics.needs_reference)
            for name, p in policies.items()
        }
        run = RunDirectory(config, resume, lock)
        run.write_json("arithmetic.json", arithmetic_record(config, list(policies), onednn_layers))
    except BaseException:  # nothing trained yet: a directory this call created is removed
        torch.set_num_threads(caller_threads)
        if lock is not None:
            lock.release(discard=True)
        raise
    backend = pool = None
    failed = True
    try:
        generator = torch.Generator().manual_seed(config.seed)
        rng = random.Random(config.seed)
        trackers = diagnostics.tracker_factory()
        fingerprint = RunFingerprint()  # what the run sampled, bit for bit: two runs the same run or not
        components: dict[str, Any] = {"diagnostics": diagnostics, "fingerprint": fingerprint}
        if trackers is not None:
            components["trackers"] = TrackerStates()
        schedule = make_schedule(config, workflow, policies, mapping)  # which weights sample which step
        if config.trainer.rollout_schedule == "pipelined":
            components["pipeline"] = schedule  # the next step's rollout, already played at a checkpoint
        state = restore_training_state(resume, policies, optimizers, generator, rng, components)
        tcfg, algo = config.train, config.algorithm
        backend = make_backend(
            config.trainer, optimizers, UpdateSettings(algo, config.rollout.temperature, tcfg.grad_clip, trackers)
        )
        if trackers is not None:
            components["trackers"].attach(backend)
        # After make_backend (it connects to Ray) and the restore (the workers copy the current weights).
        version = state.step if state is not None else 0  # updates the restored weights have seen
        pool = RolloutPool(config, policies, mapping, version) if config.trainer.rollout_workers else None
        schedule.begin(pool, optimizers, generator, rng, version)
        # The evaluations between the first and the last run on the first `midway` instances only, and
        # every evaluation's score on those same instances picks the best checkpoint.
        midway = tcfg.midway_eval_instances
        midway = midway if 0 < midway < tcfg.eval_instances else tcfg.eval_instances

        def held_out(step: int, instances: int) -> tuple[float, float]:
            """(success on the first `instances` held-out instances, success on the first `midway`)."""
            started = time.time()
            with tqdm(
                total=instances,
                desc=f"held-out eval (step {step})",
                leave=False,
                disable=not progress,
                dynamic_ncols=True,
            ) as eval_bar:
                metrics, episodes = evaluate(
                    workflow,
                    policies,
                    mapping,
                    instances,
                    seed=config.seed,
                    sampling=eval_sampling,
                    on_batch=eval_bar.update,
                )
            run.log(
                step,
                {f"eval/{k}": v for k, v in metrics.items()}
                | {
                    "eval/instances": float(instances),
                    "time/eval_s": time.time() - started,
                    "time/threads": float(threads.count),
                    "time/onednn_layers": float(onednn_layers),
                },
            )
            logging.getLogger("teamrl").info(
                "held-out evaluation at step %d: success %.3f on %d instances, %.0f s",
                step,
                metrics["success"],
                instances,
                time.time() - started,
            )
            run.write_json(
                f"transcripts/eval_step{step:05d}.json",
                [{"instance": e.instance, "success": e.success, "turns": e.transcript} for e in episodes[:8]],
            )
            picked = episodes[:midway]  # evaluate's episodes come in instance order
            pick = mean(e.success for e in picked) if len(picked) == midway else metrics["success"]
            return metrics["success"], pick

        threads.apply()
        best_weights = BestWeights(run, policies, optimizers, on_disk=bool(tcfg.checkpoint_every))
        checking = first_steps is not None  # a bit check: the first steps' fingerprint, nothing else
        if checking and state is not None:
            raise ValueError("first_steps checks a new run; it cannot continue one")
        if state is None and checking:
            state = LoopState()
        elif state is None:
            initial, best_initial = held_out(0, tcfg.eval_instances)
            best_weights.record(0)  # best = the weights of best_step, step 0 until beaten
            state = LoopState(initial_success=initial, best_success=best_initial)
            diagnostics.alerts(0, {"eval/success": initial})  # the first peak (a resumed run restored its own)
        history = {"initial": state.initial_success}
        best, best_step = state.best_success, state.best_step
        best_weights.step = best_step  # a resumed run's best checkpoint is on disk already
        started = time.time() - state.elapsed_s
        last = min(tcfg.steps, first_steps) if first_steps is not None else tcfg.steps
        bar = tqdm(range(state.step + 1, last + 1), disable=not progress, desc="train", dynamic_ncols=True)
        step = state.step
        for step in bar:
            step_threads = threads.apply()
            t0, evaluated = time.time(), {}
            rollout = schedule.take(step)  # serial: played now; pipelined: played during the last update
            samples, episodes = rollout.samples, rollout.episodes
            if not episodes:
                raise RuntimeError(
                    f"step {step} played no episode: the workflow dropped every one (a program task drops a run "
                    "that crashed, exceeded task.timeout_s or reported no reward; train.log has a warning for each, "
                    "with its reason). Fix the program or raise task.timeout_s, then "
                    "continue with train.resume=auto"
                )
            fingerprint.add(step, samples)
            engine_metrics, engine_alerts = _engine_checks(config, policies, samples, step)
            t1 = time.time()
            advantages = assign_advantages(samples, episodes, algo)
            metrics = rollout_metrics(samples, episodes)  # after assign_advantages: it reads them
            metrics.update({f"adv/{k}": v for k, v in advantages.items()})
            metrics.update(workflow.metrics())  # a workflow's own rollout metrics (gateway/...)
            batches = {
                name: trainable([s for s in samples if s.policy == name], algo.drop_zero_signal) for name in optimizers
            }
            seeds = update_seeds(list(optimizers), rng)  # before the next rollout takes from rng (pipelined)
            schedule.before_update(step)  # pipelined: the workers start playing step + 1
            per_role = []
            for name, result in backend.update(batches, seeds).items():
                metrics.update(_policy_metrics(name, result.stats))
                per_role.append(result.diagnostics)
            schedule.after_update(step, optimizers)  # the new weights go to the rollout workers
            if algo.rollout_correction != "none":
                metrics.update(_staleness(batches, step - 1))
            metrics.update(diagnostics.step_metrics(samples, per_role))
            t2 = time.time()
            tokens = sum(len(s.generation.response_ids) for s in samples)
            metrics.update(
                {
                    "time/rollout_s": rollout.seconds,
                    "time/update_s": t2 - t1,
                    "time/tokens_per_s": tokens / max(rollout.seconds, 1e-9),
                    "time/elapsed_s": t2 - started,
                    "time/threads": float(step_threads),
                }
            )
            if tcfg.eval_every and step % tcfg.eval_every == 0 and step < tcfg.steps and not checking:
                success, pick = held_out(step, midway)
                evaluated = {"eval/success": success}
                if pick > best:
                    best, best_step = pick, step
                    best_weights.record(step)
                metrics["eval/best_success"] = best
                run.write_json(
                    f"transcripts/train_step{step:05d}.json",
                    training_transcripts(samples, episodes, config.diagnostics.train_transcripts),
                )
            waited = schedule.settle()  # pipelined: step + 1's rollout, played during the update and evaluation
            if config.trainer.rollout_schedule == "pipelined":
                metrics.update({"time/rollout_wait_s": rollout.waited + waited, "time/step_s": time.time() - t0})
            metrics.update(engine_metrics)
            metrics.update(
                _report_alerts(run.path, diagnostics.alerts(step, metrics | evaluated) + engine_alerts, progress)
            )
            run.log(step, metrics)
            logging.getLogger("teamrl").info(
                "step %d/%d: train success %.3f, team return %.3f, %.1f s%s",
                step,
                tcfg.steps,
                metrics["train/success"],
                metrics["train/team_return"],
                t2 - t0,
                f", held-out success {evaluated['eval/success']:.3f}" if "eval/success" in evaluated else "",
            )
            bar.set_postfix(success=f"{metrics['train/success']:.2f}", best=f"{best:.2f}")
            if tcfg.checkpoint_every and step % tcfg.checkpoint_every == 0 and not checking:
                state = LoopState(step, history["initial"], best, best_step, time.time() - started)
                backend.pull_optimizer_state()  # the Ray backend's optimizers live in its actors
                save_training_state(run, state, policies, optimizers, generator, rng, tcfg.keep_last, components)
            if tcfg.time_budget_s and time.time() - started > tcfg.time_budget_s:
                break
        train_seconds = time.time() - started
        if checking:
            run.write_json("summary.json", {"steps": step, "fingerprint": fingerprint.summary(optimizers)})
            failed = False
            return run.path
        final, best_final = held_out(step, tcfg.eval_instances)
        _report_alerts(run.path, diagnostics.alerts(step, {"eval/success": final}), progress)
        if best_final > best:  # a tie keeps the earlier step, as during training (and the collapse alert)
            best, best_step = best_final, step
            best_weights.record(step, last=True)
        best_weights.finish(step)
        summary = {
            "initial_success": history["initial"],
            "final_success": final,
            "best_success": best,
            "best_step": best_step,
            "best_instances": midway,
            "steps": step,
            "train_seconds": train_seconds,
            "agent_to_policy": mapping,
            "fingerprint": fingerprint.summary(optimizers),
        }
        run.write_json("summary.json", summary)
        failed = False
        return run.path
    except KeyboardInterrupt as err:  # Ctrl-C: say where the run stands (the CLI prints how to resume)
        raise TrainingInterrupted(run.path) from err
    except Exception as err:  # a full disk is named as such, with the run directory to resume
        if is_disk_full(err, run.path):
            raise DiskFullError(what_was_written(err, f"the run directory {run.path}"), run.path) from err
        raise
    finally:  # also when a step fails: Ray actors, rollout workers and sandbox workers are released
        if pool:
            pool.close()
        release_engines(policies)
        if backend is not None:
            backend.close()
        workflow.close()
        torch.set_num_threads(caller_threads)
        run.close(failed=failed)


def _policy_metrics(name: str, stats: dict[str, float]) -> dict[str, float]:
    """An update's stats as `policy/<name>/<stat>`; rollout correction's as `rollout_correction/<name>/<metric>`."""
    out = {}
    for key, value in stats.items():
        group, _, metric = key.partition("/")
        out[f"{group}/{name}/{metric}" if group == "rollout_correction" else f"policy/{name}/{key}"] = value
    return out


def _staleness(batches: dict[str, list[Sample]], version: int) -> dict[str, float]:
    """`rollout_correction/<policy>/staleness`: the mean number of updates between the weights that sampled
    a policy's samples and the weights (version `version`) that update on them."""
    return {
        f"rollout_correction/{name}/staleness": mean(version - s.weights_version for s in batch)
        for name, batch in batches.items()
        if batch
    }


def _engine_checks(
    config: RunConfig, policies: dict[str, Policy], samples: list[Sample], step: int
) -> tuple[dict[str, float], list[Alert]]:
    """The logprob-gap metrics and alerts of the policies another engine than the built-in one sampled."""
    measured = [name for name, policy in policies.items() if served_by(policy) is not None]
    if not measured:
        return {}, []
    metrics, warnings = gap_metrics(policies, samples, config.rollout.logprob_gap_warn, measured)
    return metrics, [Alert(step, "logprob_gap", name, message) for name, message in warnings.items()]


def _report_alerts(folder: Path, alerts: list[Alert], progress: bool) -> dict[str, float]:
    """Append alerts to alerts.jsonl and print them; returns `alert/<kind>` = 1 metrics for the step."""
    if not alerts:
        return {}
    with open(folder / "alerts.jsonl", "a", encoding="utf-8") as handle:
        for alert in alerts:
            handle.write(json.dumps(alert.to_json()) + "\n")
            (tqdm.write if progress else logging.getLogger("teamrl").warning)(
                f"[alert step {alert.step}] {alert.message}"
            )
    return {f"alert/{alert.kind}": 1.0 for alert in alerts}
