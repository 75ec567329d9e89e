"""One kernel taxonomy across AMD and NVIDIA: each kernel name gets a category, a role and a library.

- category: GEMM, attention, normalization, elementwise, reduction, optimizer, communication, memory copy, or
  `unknown` when no rule matches (never guessed into another category);
- role: what the kernel does, in words that are the same on both vendors (`GEMM large tile (>=128x128)`,
  `attention bwd`, `norm fwd`, `allreduce`, ...), so runs from different GPUs compare role by role;
- library: who wrote it (Tensile/hipBLASLt `Cijk_*`, rocBLAS, CK, MIOpen, RCCL/NCCL, Triton, cuBLAS `sm90_xmma*`,
  cuBLASLt `nvjet*`, CUTLASS, cuDNN, flash-attn, PyTorch ATen), or `unknown`.

Built-in rules are regular expressions tried in order, first match wins. Order matters: communication and copies
first (an RCCL kernel may contain "reduce"), the optimizer before elementwise (multi_tensor_apply kernels are
pointwise), attention before GEMM (flash-attention kernels mention gemm). Users add rules in a JSON file
(`configure(path)`, see docs/reports.md); user rules are tried before the built-ins.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from madengine_rocprof.errors import UserError
from madengine_rocprof.reports.user_regex import SYNTAX_HELP, UserPattern, compile_user

CATEGORIES = (
    "GEMM",
    "attention",
    "normalization",
    "elementwise",
    "reduction",
    "optimizer",
    "communication",
    "memory copy",
    "unknown",
)
UNKNOWN = "unknown"
RULES_ENV = "MADENGINE_ROCPROF_KERNEL_RULES"
RULES_FILE_NAME = "kernel_rules.json"  # under $MADENGINE_ROCPROF_HOME: the registered rules
RULE_KEYS = ("match", "category", "role", "library")


@dataclass(frozen=True)
class KernelClass:
    category: str
    role: str
    library: str
    rule: str  # which rule matched: `built-in <id>` or `<file> rules[i]`; "" when none did


def _re(pattern: str) -> re.Pattern:
    return re.compile(pattern, re.IGNORECASE)


# ---- libraries ---------------------------------------------------------------------------------------------
LIBRARIES: tuple[tuple[str, re.Pattern], ...] = tuple(
    (name, _re(p))
    for name, p in (
        (
            "RCCL/NCCL",
            r"nccl|rccl",
        ),  # RCCL keeps NCCL's kernel names (ncclDevKernel_*): the name cannot tell them apart
        ("Tensile/hipBLASLt", r"^(custom_)?cijk_|tensile"),
        ("hipBLASLt", r"hipblaslt"),
        ("rocBLAS", r"rocblas"),
        ("CK", r"\bck(_tile)?::|device_gemm_xdl|kernel_gemm_xdl|\bck_"),
        ("MIOpen", r"miopen"),
        ("HIP runtime", r"__amd_rocclr_"),
        ("flash-attn", r"flash_(fwd|bwd)|pytorch_flash|\bflash::"),
        ("cuDNN", r"cudnn|xmma_(fprop|dgrad|wgrad)|implicit_convolve"),
        ("cuBLASLt", r"nvjet|cublaslt"),
        ("cuBLAS", r"cublas|^sm\d+_xmma|^(ampere|volta|turing|maxwell|hopper)_[a-z0-9]*gemm"),
        ("CUTLASS", r"cutlass"),
        ("Triton", r"^triton_(poi|red|per|tem)_"),
        ("PyTorch ATen", r"\bat::native::|\bat::cuda::|^aten::"),
    )
)


def library_of(name: str) -> str:
    for library, pattern in LIBRARIES:
        if pattern.search(name):
            return library
    return UNKNOWN


# ---- GEMM shape class --------------------------------------------------------------------------------------
# The macro tile a GEMM library picked says what problem shape it was picked for: Tensile `MT128x64x16`,
# cuBLAS `tilesize128x128x8`, nvjet `_tst_128x64_`, CUTLASS/cuBLAS `_128x128_16x4` / `sgemm_128x64_`.
_TILE = (
    _re(r"MT(\d+)x(\d+)"),
    _re(r"tilesize(\d+)x(\d+)"),
    _re(r"nvjet_\w*?_(\d+)x(\d+)_"),
    _re(r"(?:gemm|gemv)_(\d+)x(\d+)"),
    _re(r"_(\d+)x(\d+)_\d+x\d+"),
)


def gemm_shape(name: str) -> str:
    for pattern in _TILE:
        found = pattern.search(name)
        if found:
            m, n = int(found.group(1)), int(found.group(2))
            if m == 0 or n == 0:
                continue
            if max(m, n) >= 4 * min(m, n):
                return "GEMM skinny tile (aspect >=4)"
            if min(m, n) >= 128:
                return "GEMM large tile (>=128x128)"
            if max(m, n) <= 64:
                return "GEMM small tile (<=64x64)"
            return "GEMM medium tile"
    return "GEMM tile not in name"


# ---- built-in rules: (id, category, role or role function, pattern) -----------------------------------------
_BWD = _re(r"bwd|backward|bprop|grad|cutlassB|dgrad|wgrad")


def _direction(prefix: str):
    return lambda name: f"{prefix} bwd" if _BWD.search(name) else f"{prefix} fwd"


def _collective(name: str) -> str:
    for role, pattern in (
        ("allreduce", r"all_?reduce"),
        ("allgather", r"all_?gather"),
        ("reduce-scatter", r"reduce_?scatter"),
        ("all-to-all", r"all_?to_?all"),
        ("broadcast", r"broadcast"),
        ("send/recv", r"send|recv"),
    ):
        if re.search(pattern, name, re.IGNORECASE):
            return role
    return "collective (other)"


_BUILTIN = (
    (
        "communication",
        "communication",
        _collective,
        r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|broadcast|send_?recv|c10d::",
    ),
    (
        "fill",
        "memory copy",
        "fill",
        r"memset|fillbuffer|__amd_rocclr_fill|fill_kernel|FillFunctor|aten::(fill_|zero_|zeros)\b",
    ),
    ("concat", "memory copy", "concat", r"CatArrayBatchedCopy|cat_?kernel|aten::cat\b"),
    ("cast", "memory copy", "dtype cast", r"(bfloat16|half|float|fp8)_copy_kernel|aten::_to_copy\b"),
    (
        "copy",
        "memory copy",
        "copy",
        r"memcpy|copybuffer|__amd_rocclr_copy|copy_?kernel|aten::(copy_|to|clone|contiguous|empty)\b",
    ),
    (
        "optimizer",
        "optimizer",
        "optimizer step",
        r"adamw?\b|adam_|FusedAdam|\bsgd|lamb_|lion_|adagrad|rmsprop|optimizer",
    ),
    ("foreach", "optimizer", "multi-tensor (foreach)", r"multi_tensor_apply|_foreach_"),
    ("softmax", "attention", _direction("softmax"), r"softmax"),
    ("rope", "attention", "rotary embedding", r"rotary|(^|[^a-z])rope"),
    # cuDNN's flash-attention backward runs helpers around its bprop kernel: dO.O row sums first, dQ conversion last
    ("attention_bwd_helper", "attention", "attention bwd", r"compute_dot_do_o|convert_dq_to"),
    ("attention", "attention", _direction("attention"), r"attn|attention|flash|fmha|sdpa|mha_(fwd|bwd)"),
    (
        "norm",
        "normalization",
        _direction("norm"),
        r"(rms|layer|batch|group|instance|_|\b)_?norm(?!al)|welford|GammaBetaBackward|MIOpenBatchNorm",
    ),
    ("splitk", "GEMM", "GEMM split-K reduce", r"splitKreduce|split_?k_?reduce"),
    ("gemv", "GEMM", "GEMV", r"gemv"),
    ("conv", "GEMM", "convolution", r"conv(olution)?[_\d]|implicit_convolve|xmma_(fprop|dgrad|wgrad)|miopenConv|igemm"),
    (
        "gemm",
        "GEMM",
        gemm_shape,
        r"gemm|cijk_|\bmm\b|\b(add|b)?mmbackward|matmul|addmm|bmm|aten::(mm|linear|baddbmm)\b|cutlass|cublas|nvjet|"
        r"hipblas|rocblas|tensile|xmma|wgmma|mfma|_mm_|dot_?kernel|triton_tem_fused_(mm|addmm|bmm)",
    ),
    ("loss", "reduction", "loss", r"nll_loss|cross_?entropy|xent|mse_loss"),
    (
        "index",
        "elementwise",
        "index/gather/embedding",
        r"embedding|gather|scatter|index_?(select|put|add)|indexFunc|aten::(index|embedding)",
    ),
    (
        "reduction",
        "reduction",
        "reduction",
        r"reduce_kernel|reduction|triton_(red|per)_|\b(sum|mean|argmax|argmin|amax)_kernel|aten::(sum|mean|max|min|argmax|amax)\b",
    ),
    (
        "activation",
        "elementwise",
        "activation",
        r"silu|swiglu|gelu|relu|sigmoid|tanh|softplus|aten::(silu|gelu|relu|sigmoid|tanh)\b",
    ),
    (
        "elementwise",
        "elementwise",
        "elementwise",
        r"elementwise|vectorized|unrolled|pointwise|triton_poi|triu|tril|\b(add|mul|sub|div|exp|neg|pow|sqrt|rsqrt|where|mask|"
        r"dropout)|aten::(add|mul|sub|div|exp|neg|pow|sqrt|rsqrt|where|masked_fill|dropout|triu|ones_like|t\b|view|reshape|"
        r"transpose|permute|expand|slice|select|unsqueeze|split|chunk)",
    ),
)
RULES: tuple[tuple[str, str, object, re.Pattern], ...] = tuple(
    (rule_id, category, role, _re(pattern)) for rule_id, category, role, pattern in _BUILTIN
)


@dataclass(frozen=True)
class UserRule:
    pattern: UserPattern
    category: str
    role: str
    library: str | None
    where: str  # `<file> rules[i]`


_user_rules: tuple[UserRule, ...] = ()


def _fail(what: str, file: str, where: str | None = None, fix: str | None = None) -> UserError:
    return UserError(what, file=file, where=where, fix=fix)


def load_rules(path: str | os.PathLike[str]) -> tuple[UserRule, ...]:
    """Read and validate a rules file: {"rules": [{"match": REGEX, "category": C, "role": R, "library": L}]}."""
    from madengine_rocprof import inputs
    from madengine_rocprof.models._common import closest

    file = str(path)
    data = inputs.load_json(path, "kernel rules file")
    example = '{"rules": [{"match": "my_fused_mlp", "category": "GEMM", "role": "fused MLP"}]}'
    if not isinstance(data, dict) or not isinstance(data.get("rules"), list):
        raise _fail('expected an object with a "rules" list', file, fix=f"write e.g. {example}")
    extra = sorted(set(data) - {"rules", "schema_version", "_comment"})
    if extra:
        raise _fail(f"unknown key '{extra[0]}'", file, fix='the top level holds "rules" (and optional "_comment")')
    rules = []
    for i, item in enumerate(data["rules"]):
        where = f"rules[{i}]"
        if not isinstance(item, dict):
            raise _fail("each rule is an object", file, where, fix=f"write e.g. {example}")
        for key in item:
            if key not in RULE_KEYS and key != "_comment":
                guess = closest(key, RULE_KEYS)
                raise _fail(
                    f"unknown key '{key}'",
                    file,
                    where,
                    fix=(f"did you mean '{guess}'? " if guess else "") + "keys: " + ", ".join(RULE_KEYS),
                )
        for key in RULE_KEYS:
            if key in item and not (isinstance(item[key], str) and item[key].strip()):
                raise _fail(f"'{key}' must be a non-empty string", file, f"{where}.{key}")
        if "match" not in item or "category" not in item:
            missing = "match" if "match" not in item else "category"
            raise _fail(f"'{missing}' is required", file, where, fix=f"write e.g. {example}")
        if item["category"] not in CATEGORIES or item["category"] == UNKNOWN:
            guess = closest(item["category"], CATEGORIES[:-1])
            raise _fail(
                f"unknown category '{item['category']}'",
                file,
                f"{where}.category",
                fix=(f"did you mean '{guess}'? " if guess else "")
                + "categories: "
                + ", ".join(CATEGORIES[:-1])
                + '; put your own grouping in "role"',
            )
        try:  # RE2: linear-time matching, so no rule can hang a report (reports/user_regex.py)
            pattern = compile_user(item["match"])
        except ValueError as err:
            raise _fail(
                f"invalid regular expression {item['match']!r}: {err}",
                file,
                f"{where}.match",
                fix=SYNTAX_HELP,
            ) from None
        rules.append(
            UserRule(
                pattern,
                item["category"],
                item.get("role") or item["category"],
                item.get("library"),
                f"{Path(file).name} {where}",
            )
        )
    return tuple(rules)


def rules_path(explicit: str | os.PathLike[str] | None) -> Path | None:
    """The rules file in force: the one given, else $MADENGINE_ROCPROF_KERNEL_RULES, else the registered one."""
    from madengine_rocprof.registry.store import user_home

    if explicit:
        return Path(explicit)
    if os.environ.get(RULES_ENV):
        return Path(os.environ[RULES_ENV])
    registered = user_home() / RULES_FILE_NAME
    return registered if registered.is_file() else None


def configure(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    """Load the user rules in force for this process (commands call it once); returns the file used."""
    global _user_rules
    path = rules_path(explicit)
    _user_rules = load_rules(path) if path else ()
    classify.cache_clear()
    return path


def set_rules(rules: tuple[UserRule, ...]) -> None:
    global _user_rules
    _user_rules = tuple(rules)
    classify.cache_clear()


@lru_cache(maxsize=65536)
def classify(kernel_name: str) -> KernelClass:
    library = library_of(kernel_name)
    for rule in _user_rules:
        if rule.pattern.search(kernel_name):
            return KernelClass(rule.category, rule.role, rule.library or library, rule.where)
    for rule_id, category, role, pattern in RULES:
        if pattern.search(kernel_name):
            return KernelClass(
                category, role(kernel_name) if callable(role) else str(role), library, f"built-in {rule_id}"
            )
    return KernelClass(UNKNOWN, UNKNOWN, library, "")


def categorize(kernel_name: str) -> str:
    return classify(kernel_name).category


def role_of(kernel_name: str) -> str:
    return classify(kernel_name).role
