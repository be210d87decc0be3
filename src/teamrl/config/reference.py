"""The configuration reference, generated from the config dataclasses' own help text.

Every field's help text is written once, as the string literal right below the field (the attribute
docstring convention of `sections.py`, `training_sections.py` and `run.py`). This module reads those
strings back from the source with `ast`, so the docs' configuration reference (`docs/reference/config.md`,
built by the MkDocs hook in `docs/hooks/`) can never disagree with the code.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap
import types
import typing
from collections.abc import Sequence
from typing import Any

from teamrl.config.options import choices


def field_help(cls: type) -> dict[str, str]:
    """Field name -> its help text (the string literal after the field in the class body; '' if none)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = next(node for node in tree.body if isinstance(node, ast.ClassDef)).body
    helps: dict[str, str] = {}
    for node, following in zip(body, [*body[1:], None]):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        text = ""
        if (
            isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            text = " ".join(following.value.value.split())
        helps[node.target.id] = text
    return helps


def field_default(f: dataclasses.Field) -> Any:
    """The field's default value (its factory called), or None when it has none."""
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def _show(value: Any) -> str:
    if dataclasses.is_dataclass(value):
        return "(section)"
    if isinstance(value, str):
        return f'`"{value}"`' if value == "" else f"`{value}`"
    return f"`{value!r}`" if isinstance(value, (dict, list)) else f"`{value}`"


def _type_name(f: dataclasses.Field, hint: Any) -> str:
    """The type column: a word option lists its words (`a` or `b`), other types read as annotated."""
    parts = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    if any(choices(part) for part in parts):
        return " or ".join(
            " or ".join(f"`{word}`" for word in choices(part))
            if choices(part)
            else getattr(part, "__name__", str(part))
            for part in parts
        )
    kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
    return kind.replace("|", "or").replace("  ", " ")


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def section_table(cls: type, prefix: str) -> str:
    """A markdown table of one config dataclass: key (with `prefix`), type, default, help."""
    helps, hints = field_help(cls), typing.get_type_hints(cls)
    rows = ["| key | type | default | what it does |", "|---|---|---|---|"]
    for f in dataclasses.fields(cls):
        default = field_default(f)
        if dataclasses.is_dataclass(default):
            continue  # nested sections get their own table
        rows.append(
            f"| `{prefix}{f.name}` | {_cell(_type_name(f, hints[f.name]))} | {_cell(_show(default))} "
            f"| {_cell(helps.get(f.name, ''))} |"
        )
    return "\n".join(rows)


def config_reference(root: type, extra_sections: Sequence[tuple[str, type, str]] = ()) -> str:
    """The whole reference: the root's own fields, each nested section, then `extra_sections`
    ((title, dataclass, key prefix), e.g. each task's settings under `task.`)."""
    doc = inspect.getdoc(root) or ""
    parts = [f"## Top level\n\n{doc}\n\n{section_table(root, '')}"]
    for f in dataclasses.fields(root):
        default = field_default(f)
        if dataclasses.is_dataclass(default):
            cls: type = type(default)
            parts.append(f"## `{f.name}`\n\n{inspect.getdoc(cls) or ''}\n\n{section_table(cls, f.name + '.')}")
            for inner in dataclasses.fields(cls):
                sub = field_default(inner)
                if dataclasses.is_dataclass(sub):
                    parts.append(
                        f"### `{f.name}.{inner.name}`\n\n{section_table(type(sub), f'{f.name}.{inner.name}.')}"
                    )
    for title, cls, prefix in extra_sections:
        parts.append(f"## {title}\n\n{inspect.getdoc(cls) or ''}\n\n{section_table(cls, prefix)}")
    return "\n\n".join(parts) + "\n"
