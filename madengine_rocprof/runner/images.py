"""Workload images: pick the model's Dockerfile by its `# CONTEXT` header, build it with the docker SDK, cache by
content hash (the tag is the hash of the Dockerfile, the build args and the base image id, so an unchanged
image is never rebuilt).

Also a command for scripts/setup_docker.sh: `python -m madengine_rocprof.runner.images --model M --gpu-vendor CPU`.
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from madengine_rocprof.errors import UserError

CONTEXT_LINE = re.compile(r"^#\s*CONTEXT\s+(\{.*\})\s*$")
ARG_BASE = re.compile(r"^\s*ARG\s+BASE_DOCKER(?:=(\S+))?\s*$", re.MULTILINE)
IMAGE_REPO = "madengine-rocprof"


class BuildFailed(Exception):
    """The image build failed; the message names the log."""


@dataclass(frozen=True)
class ImagePlan:
    dockerfile: Path
    build_args: dict[str, str]
    tag: str
    base_docker: str


def dockerfile_context(path: Path) -> dict[str, str]:
    """The `# CONTEXT {...}` header among the first lines ({} when absent)."""
    with path.open(encoding="utf-8") as f:
        for _, line in zip(range(10), f, strict=False):
            m = CONTEXT_LINE.match(line.strip())
            if m:
                try:
                    value = ast.literal_eval(m.group(1))
                except (ValueError, SyntaxError):
                    raise UserError(
                        "unreadable # CONTEXT header", file=str(path), fix="write a Python dict literal"
                    ) from None
                return {str(k): str(v).upper() for k, v in value.items()}
    return {}


def select_dockerfile(repo: Path, prefix: str, gpu_vendor: str, guest_os: str | None = None) -> Path:
    """madengine's filter: the files `<prefix>*.Dockerfile` whose CONTEXT matches the vendor (and OS if given)."""
    folder = (repo / prefix).parent
    stem = Path(prefix).name
    candidates = sorted(folder.glob(f"{stem}*Dockerfile"))
    if not candidates:
        raise UserError(f"no Dockerfile matches '{prefix}*Dockerfile'", file=str(folder),
                        fix="check the card's dockerfile prefix in models.json")
    matches = []
    for path in candidates:
        ctx = dockerfile_context(path)
        if ctx.get("gpu_vendor") != gpu_vendor.upper():
            continue
        if guest_os and ctx.get("guest_os") not in (None, guest_os.upper()):
            continue
        matches.append(path)
    if not matches:
        seen = ", ".join(f"{p.name} {dockerfile_context(p)}" for p in candidates)
        raise UserError(
            f"no Dockerfile for gpu_vendor {gpu_vendor}" + (f" and guest_os {guest_os}" if guest_os else ""),
            file=str(folder),
            fix=f"add one with a matching '# CONTEXT' header; found: {seen}",
        )
    return matches[0]


def default_base(dockerfile: Path) -> str:
    m = ARG_BASE.search(dockerfile.read_text(encoding="utf-8"))
    return (m.group(1) or "") if m else ""


def plan_image(dockerfile: Path, build_args: dict[str, str], base_image_id: str = "") -> ImagePlan:
    """Tag = hash of the Dockerfile text, the build args and the base image's id (when known locally)."""
    digest = hashlib.sha256()
    digest.update(dockerfile.read_bytes())
    for key in sorted(build_args):
        digest.update(f"\0{key}={build_args[key]}".encode())
    digest.update(f"\0base={base_image_id}".encode())
    name = re.sub(r"[^a-z0-9_.-]+", "-", dockerfile.name.lower().removesuffix(".dockerfile"))
    base = build_args.get("BASE_DOCKER") or default_base(dockerfile)
    return ImagePlan(dockerfile, dict(build_args), f"{IMAGE_REPO}/{name}:{digest.hexdigest()[:12]}", base)


def local_image_id(client: Any, ref: str) -> str:
    if not ref:
        return ""
    try:
        return client.images.get(ref).id
    except Exception:  # broad (ImageNotFound, API errors): no local id; the build that follows pulls it or says why
        return ""


def ensure_image(client: Any, dockerfile: Path, build_args: dict[str, str], log_path: Path | None = None,
                 say: Callable[[str], None] = print) -> tuple[str, str, float]:
    """Build unless an image with the same content hash exists. Returns (tag, image id, build seconds)."""
    base = build_args.get("BASE_DOCKER") or default_base(dockerfile)
    plan = plan_image(dockerfile, build_args, local_image_id(client, base))
    existing = local_image_id(client, plan.tag)
    if existing:
        say(f"[build] {plan.tag} exists (same Dockerfile, build args and base): not rebuilt")
        if log_path:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            log_path.write_text(f"image {plan.tag} ({existing}) exists: not rebuilt\n", encoding="utf-8")
        return plan.tag, existing, 0.0
    say(f"[build] {dockerfile.name} -> {plan.tag} (base {base or '?'})")
    started = time.monotonic()
    # optional log: closed by the `finally` below, which also ends the build
    log = open(log_path, "w", encoding="utf-8") if log_path else None  # noqa: SIM115
    try:
        error = None
        stream = client.api.build(path=str(dockerfile.parent), dockerfile=dockerfile.name, tag=plan.tag,
                                  buildargs=build_args or None, rm=True, forcerm=True, decode=True,
                                  labels={"org.madengine-rocprof.dockerfile": dockerfile.name})
        for chunk in stream:
            text = chunk.get("stream") or chunk.get("status") or ""
            if "error" in chunk:
                error = chunk.get("error") or str(chunk.get("errorDetail"))
                text = f"ERROR: {error}\n"
            if text and log:
                log.write(text if text.endswith("\n") else text + "\n")
                log.flush()
            if text.startswith("Step "):
                say(f"[build]   {text.strip()}")
        if error:
            raise BuildFailed(f"image build failed: {error.strip()}" + (f" (log: {log_path})" if log_path else ""))
    except BuildFailed:
        raise
    except Exception as err:  # docker API errors: daemon gone, bad context
        raise BuildFailed(
            f"image build failed: {type(err).__name__}: {err}" + (f" (log: {log_path})" if log_path else "")
        ) from err
    finally:
        if log:
            log.close()
    image_id = client.images.get(plan.tag).id
    seconds = time.monotonic() - started
    say(f"[build] {plan.tag} built in {seconds:.1f}s")
    return plan.tag, image_id, seconds


def main(argv: list[str] | None = None) -> int:
    """Prebuild a model's image (used by scripts/setup_docker.sh); prints its tag last."""
    import docker  # the SDK is a runtime dependency of the runner, not of the stdlib parts
    from madengine_rocprof.runner.selection import load_models, select_models

    p = argparse.ArgumentParser(prog="python -m madengine_rocprof.runner.images")
    p.add_argument("--model", required=True)
    p.add_argument("--gpu-vendor", required=True, help="AMD, NVIDIA or CPU")
    p.add_argument("--repo", default=".", help="repository root holding models.json and docker/")
    args = p.parse_args(argv)
    repo = Path(args.repo).resolve()
    try:
        card = select_models(load_models(repo / "models.json"), [args.model], str(repo / "models.json"))[0]
        dockerfile = select_dockerfile(repo, card.dockerfile, args.gpu_vendor)
        log_dir = repo / ".cache" / "docker"
        log_dir.mkdir(parents=True, exist_ok=True)
        tag = ensure_image(docker.from_env(), dockerfile, {}, log_dir / f"build_{dockerfile.name}.log")[0]
    except (UserError, BuildFailed) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(tag)  # last line: the tag, e.g. for madengine's MAD_CONTAINER_IMAGE
    return 0


if __name__ == "__main__":
    sys.exit(main())
