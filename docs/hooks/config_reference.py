"""MkDocs hook: fill docs/reference/config.md with the reference generated from the config dataclasses.

The help text of every field lives once, beside the field in `teamrl.config` (and in each task's
settings class); `teamrl.config.reference` reads it back, so the page cannot drift from the code.
"""

from __future__ import annotations

MARKER = "<!-- generated: config reference -->"


def generated_reference() -> str:
    """The configuration reference: the run config's sections, LoRA, then every registered task's settings."""
    from teamrl.config import LoraConfig, RunConfig
    from teamrl.config.reference import config_reference
    from teamrl.config.tasks import TASKS

    try:  # the gateway registers the `program` task (its server needs the gateway extra: fastapi, uvicorn)
        import teamrl.gateway  # noqa: F401
    except ImportError:
        pass
    extra = [("`policy.lora` (and `policies.<name>.lora`)", LoraConfig, "policy.lora.")]
    extra += [(f"`task` with `name: {name}`", entry.settings, "task.") for name, entry in sorted(TASKS.items())]
    return config_reference(RunConfig, extra)


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ANN001 (MkDocs' hook signature)
    if MARKER in markdown:
        return markdown.replace(MARKER, generated_reference())
    return markdown
