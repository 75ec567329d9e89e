"""madengine's additional context (--additional-context-file FILE, --additional-context JSON) as a typed model.

Merge rule (ours, documented in docs/configs.md): the file is read first, then the CLI string is merged over it
DEEPLY: objects merge key by key at every level; lists and scalars are replaced by the CLI value. (madengine itself
merges only the top level, so a CLI {"docker_env_vars": {"B": "3"}} drops every other docker_env_vars key.)
Unknown top-level keys are kept and reported as warnings; keys starting with "_" are comments and kept silently.
"""
from __future__ import annotations

import copy
import os
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError, field_validator

from madengine_rocprof.models._common import closest, parse_json_object, read_text_file, validation_errors
from madengine_rocprof.models.tool import NAME_PATTERN, ScriptRef, check_env_names

CLI_SOURCE = "--additional-context"


class ToolRef(BaseModel):
    """A context `tools` entry: a registry tool by name, optionally overriding cmd and adding env vars."""

    model_config = ConfigDict(extra="forbid")
    name: StrictStr = Field(pattern=NAME_PATTERN)
    cmd: StrictStr | None = Field(
        default=None, description="replaces the registry command entirely (madengine semantics)"
    )
    env_vars: dict[str, StrictStr] = Field(
        default_factory=dict, description="merged key by key over the registry's env vars"
    )
    pre_scripts: list[ScriptRef] | None = None
    post_scripts: list[ScriptRef] | None = None

    _check_env = field_validator("env_vars")(check_env_names)


class Distributed(BaseModel):
    model_config = ConfigDict(extra="allow")
    launcher: StrictStr | None = Field(
        default=None, description="torchrun, deepspeed, megatron, torchtitan, vllm, sglang, ..."
    )
    nnodes: StrictInt | None = Field(default=None, ge=1)
    nproc_per_node: StrictInt | None = Field(default=None, ge=1)
    port: StrictInt | None = Field(default=None, ge=1, le=65535)
    backend: StrictStr | None = None


class Slurm(BaseModel):
    model_config = ConfigDict(extra="allow")
    partition: StrictStr | None = None
    nodes: StrictInt | None = Field(default=None, ge=1)
    gpus_per_node: StrictInt | None = Field(default=None, ge=1)
    time: StrictStr | None = None
    output_dir: StrictStr | None = None
    exclusive: StrictBool | None = None
    modules: list[StrictStr] | None = None


class AdditionalContext(BaseModel):
    """madengine's additional context. Extra keys are allowed (kept, warned about by `load_context`)."""

    model_config = ConfigDict(
        extra="allow", populate_by_name=True, title="madengine additional context (madengine-rocprof)"
    )

    schema_ref: StrictStr | None = Field(default=None, alias="$schema", description="optional JSON Schema for editors")
    gpu_vendor: Literal["AMD", "NVIDIA"] | None = Field(
        default=None, description="AMD or NVIDIA (case-insensitive); detected when absent"
    )
    guest_os: Literal["UBUNTU", "CENTOS"] | None = Field(
        default=None, description="UBUNTU or CENTOS (case-insensitive)"
    )
    tools: list[ToolRef] = Field(default_factory=list, description="profiling tools; the LAST listed is the outermost")
    pre_scripts: list[ScriptRef] = Field(default_factory=list)
    post_scripts: list[ScriptRef] = Field(default_factory=list)
    env_vars: dict[str, StrictStr] = Field(
        default_factory=dict, description="madengine passes these only to SLURM/K8s jobs"
    )
    docker_env_vars: dict[str, StrictStr] = Field(default_factory=dict, description="container environment (--env K=V)")
    docker_mounts: dict[str, StrictStr] = Field(default_factory=dict, description="{container_path: host_path}")
    docker_gpus: StrictStr | None = Field(default=None, description='GPU list such as "0,2-4" or "all"')
    docker_cpus: StrictStr | None = None
    docker_build_arg: dict[str, StrictStr] = Field(default_factory=dict)
    distributed: Distributed | None = None
    gpus_per_node: int | None = Field(
        default=None, gt=0, strict=True,
        description="madengine's GPU count for a run: its local Docker runs start this many torchrun ranks "
                    "(madengine does not read distributed.nproc_per_node there)")
    slurm: Slurm | None = None
    k8s: dict[str, Any] | None = None
    debug: StrictBool = False
    timeout: float | None = Field(default=None, gt=0, description="seconds")
    MAD_CONTAINER_IMAGE: StrictStr | None = Field(default=None, description="use this image, skip the build")
    model_args: StrictStr | None = None
    encapsulate_script: StrictStr | None = None

    _check_env = field_validator("env_vars", "docker_env_vars")(check_env_names)

    @field_validator("gpu_vendor", "guest_os", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    @field_validator("timeout", mode="before")
    @classmethod
    def _number(cls, value: Any) -> Any:
        if isinstance(value, bool) or (value is not None and not isinstance(value, (int, float))):
            raise ValueError("timeout must be a number of seconds (fix: write e.g. 3600 without quotes)")
        return value

    def extra_keys(self) -> dict[str, Any]:
        """Keys madengine-rocprof does not model (comments included), as given."""
        return dict(self.model_extra or {})

    def to_madengine(self) -> dict[str, Any]:
        """The context as madengine reads it (unset optional keys omitted, extra keys kept)."""
        return self.model_dump(by_alias=True, exclude_none=True, exclude_defaults=True)


def known_keys() -> list[str]:
    return [f.alias or n for n, f in AdditionalContext.model_fields.items()]


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """New dict: objects merge recursively; lists and scalars from `override` replace those in `base`."""
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _known_fields() -> dict[tuple, list[str]]:
    return {
        ("tools",): list(ToolRef.model_fields),
        ("pre_scripts",): list(ScriptRef.model_fields),
        ("post_scripts",): list(ScriptRef.model_fields),
        ("tools", "pre_scripts"): list(ScriptRef.model_fields),
        ("tools", "post_scripts"): list(ScriptRef.model_fields),
    }


def validate_context(data: dict[str, Any], source: str | None = None,
                     text: str | None = None) -> tuple[AdditionalContext, list[str]]:
    """Validate a context dict; returns the model and warnings about unknown keys.

    `text` is the JSON the data came from (when it came from one file), so errors can carry line numbers."""
    try:
        ctx = AdditionalContext.model_validate(data)
    except ValidationError as err:
        raise validation_errors(err, source, _known_fields(), text) from None
    warnings = []
    for key in ctx.extra_keys():
        if key.startswith("_"):
            continue  # comment key, e.g. "_comment"
        guess = closest(key, known_keys())
        hint = f" (did you mean '{guess}'?)" if guess else ""
        where = f"{source}: " if source else ""
        warnings.append(f"{where}{key}: unknown key, kept and passed on as given{hint}")
    return ctx, warnings


def load_context(path: str | os.PathLike[str] | None, cli_json: str | None) -> tuple[AdditionalContext, list[str]]:
    """Read the context file (if any), deep-merge the CLI JSON string over it, validate.

    Raises UserError naming the file/JSON path on bad input. Returns (context, warnings).
    """
    data: dict[str, Any] = {}
    source = text = None
    if path is not None:
        source = str(path)
        text = read_text_file(path, "additional context file")
        data = parse_json_object(text, source)
    if cli_json is not None and cli_json.strip():
        override = parse_json_object(cli_json, CLI_SOURCE)
        data = deep_merge(data, override)
        # After a merge a value may come from either input, so line numbers would mislead.
        source, text = (f"{source} + {CLI_SOURCE}", None) if source else (CLI_SOURCE, cli_json)
    return validate_context(data, source, text)
