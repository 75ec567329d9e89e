"""Models in madengine's format (root models.json) and madengine's `--tags` selection.

A tag selects the cards whose name equals it, the cards that list it in `tags`, or every card for `all`.
`name:k=v[:k2=v2]` selects by name or tag and appends ` --k v` to the card's args (madengine's rule).
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from madengine_rocprof import inputs
from madengine_rocprof.errors import UserError
from madengine_rocprof.models._common import closest, load_json

REQUIRED = ("name", "dockerfile", "scripts")
SAFE_NAME = re.compile(r"^[A-Za-z0-9_.+-]+$")  # the name becomes a folder: no '/', no '..' (see run directories)


@dataclass(frozen=True)
class ModelCard:
    name: str
    dockerfile: str           # prefix such as docker/tinytransformer; the vendor's file is chosen at build time
    scripts: str              # the entry script, e.g. scripts/tinytransformer/run.sh
    args: str = ""
    n_gpus: str = "1"
    training_precision: str = ""
    tags: tuple[str, ...] = ()
    timeout: float | None = None
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def with_extra_args(self, extra: list[tuple[str, str]]) -> ModelCard:
        added = " ".join(f"{shlex.quote('--' + k)} {shlex.quote(v)}" for k, v in extra)
        args = f"{self.args} {added}".strip() if added else self.args
        return ModelCard(self.name, self.dockerfile, self.scripts, args, self.n_gpus, self.training_precision,
                         self.tags, self.timeout, self.raw)


def load_models(path: Path) -> list[ModelCard]:
    """Read models.json: a list of cards; bad input is a UserError naming the card."""
    if not path.exists():
        raise UserError("models file not found", file=str(path),
                        fix="run from a MAD-style repository (models.json, docker/, scripts/) or pass --repo DIR; "
                            "`madengine-rocprof paths` shows the shipped TinyTransformer repository")
    text = inputs.read_text(path, "models file")
    data = load_json(text, str(path))
    if not isinstance(data, list):
        raise UserError("top level must be a list of model cards", file=str(path), fix="wrap the cards in [ ... ]")
    cards = []
    for i, raw in enumerate(data):
        where = f"[{i}]"
        if not isinstance(raw, dict):
            raise UserError("a model card must be an object", file=str(path), where=where)
        for key in REQUIRED:
            if not isinstance(raw.get(key), str) or not raw[key]:
                raise UserError(f"missing or empty '{key}'", file=str(path), where=f"{where}.{key}",
                                fix=f"every card needs {', '.join(REQUIRED)} as strings")
        if not SAFE_NAME.match(raw["name"]) or raw["name"] in (".", ".."):
            raise UserError(f"model name {raw['name']!r} cannot name a run directory", file=str(path),
                            where=f"{where}.name", fix="use letters, digits, '_', '-', '.' and '+' only")
        tags = raw.get("tags", [])
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise UserError("tags must be a list of strings", file=str(path), where=f"{where}.tags")
        timeout = raw.get("timeout")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
            raise UserError("timeout must be a positive number of seconds", file=str(path), where=f"{where}.timeout")
        cards.append(ModelCard(
            name=raw["name"], dockerfile=raw["dockerfile"], scripts=raw["scripts"], args=str(raw.get("args", "")),
            n_gpus=str(raw.get("n_gpus", "1")), training_precision=str(raw.get("training_precision", "")),
            tags=tuple(tags), timeout=float(timeout) if timeout is not None else None, raw=raw,
        ))
    names = [c.name for c in cards]
    for name in names:
        if names.count(name) > 1:
            raise UserError(f"model '{name}' is defined twice", file=str(path), fix="give every card a unique name")
    return cards


def parse_tag(tag: str) -> tuple[str, list[tuple[str, str]]]:
    """'tiny_llama_v1:batch-size=4:num-steps=2' -> ('tiny_llama_v1', [('batch-size','4'), ('num-steps','2')])."""
    name, *pairs = tag.split(":")
    extra = []
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key:
            raise UserError(f"'{pair}' in tag '{tag}' is not k=v", where="--tags",
                            fix="write extra model arguments as name:key=value, e.g. tiny_llama_v1:num-steps=5")
        extra.append((key, value))
    return name, extra


def select_models(cards: list[ModelCard], tags: list[str], models_file: str = "models.json") -> list[ModelCard]:
    """Cards matching any tag, in models.json order, each once; an unknown tag is a UserError with a suggestion."""
    if not tags:
        raise UserError("no model selected", where="--tags", fix="pass --tags NAME, a tag, or all")
    chosen: dict[str, ModelCard] = {}
    for tag in tags:
        name, extra = parse_tag(tag)
        matches = cards if name == "all" else [c for c in cards if c.name == name or name in c.tags]
        if not matches:
            known = sorted({c.name for c in cards} | {t for c in cards for t in c.tags})

            guess = closest(name, known)
            hint = f"did you mean '{guess}'? " if guess else ""
            raise UserError(f"no model has the name or tag '{name}'", file=models_file, where="--tags",
                            fix=f"{hint}known names and tags: {', '.join(known)}")
        for card in matches:
            chosen[card.name] = card.with_extra_args(extra) if extra else chosen.get(card.name, card)
    order = [c.name for c in cards]
    return sorted(chosen.values(), key=lambda c: order.index(c.name))
