"""Workload configurations: frozen dataclasses, validated before any work starts. No torch here.

Every ``validate()`` raises :class:`tracekit.errors.UsageError` with a one-line message.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field
from typing import Any

from tracekit.errors import UsageError

# canonical dtype name -> (aliases, element size in bytes)
DTYPES: dict[str, tuple[tuple[str, ...], int]] = {
    "float32": (("float32", "fp32", "float"), 4),
    "bfloat16": (("bfloat16", "bf16"), 2),
    "float16": (("float16", "fp16", "half"), 2),
}
SHORT = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def canonical_dtype(name: str) -> str:
    """``fp32``/``float32``/... → ``float32``; UsageError for anything else."""
    low = str(name).strip().lower()
    for canon, (aliases, _) in DTYPES.items():
        if low in aliases:
            return canon
    known = ", ".join(a for aliases, _ in DTYPES.values() for a in aliases)
    raise UsageError(f"unknown dtype {name!r} (known: {known})")


def element_size(dtype: str) -> int:
    return DTYPES[canonical_dtype(dtype)][1]


def check_device_name(device: str) -> str:
    """``cpu``, ``cuda`` or ``cuda:N``; UsageError otherwise (availability is checked with torch)."""
    d = str(device).strip().lower()
    if d == "cpu" or d == "cuda" or (d.startswith("cuda:") and d[5:].isdigit()):
        return d
    raise UsageError(f"unknown device {device!r} (use cpu, cuda or cuda:N)")


def parse_int_list(text: str, what: str) -> list[int]:
    """``"32,64,128"`` → [32, 64, 128]; every value must be a positive integer."""
    out: list[int] = []
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        try:
            v = int(part)
        except ValueError:
            raise UsageError(f"{what}: {part!r} is not an integer") from None
        if v <= 0:
            raise UsageError(f"{what}: {v} must be > 0")
        out.append(v)
    return out


def check_threads(n: int) -> None:
    if int(n) < 0:
        raise UsageError(f"--threads must be >= 0 (got {n})")


def _positive(name: str, value: int) -> None:
    if int(value) <= 0:
        raise UsageError(f"{name} must be > 0 (got {value})")


@dataclass(frozen=True)
class PhaseShapeConfig:
    d: int = 2048
    dtype: str = "float32"
    prefill_rows: tuple[int, ...] = (32, 64, 128, 256, 512, 1024, 2048, 4096)
    decode_rows: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
    device: str = "cpu"
    warmup: int = 2  # profiler-schedule warm-up steps per shape (traced, then discarded)
    active: int = 3  # profiled steps per shape
    reps: int = 5  # GEMMs per step (amortises launch latency on GPU)
    seed: int = 0
    threads: int = 0  # CPU intra-op threads (0 = torch's default)

    def validate(self) -> "PhaseShapeConfig":
        _positive("--d", self.d)
        if not self.prefill_rows and not self.decode_rows:
            raise UsageError("nothing to sweep: give --prefill-rows and/or --decode-rows")
        for m in (*self.prefill_rows, *self.decode_rows):
            _positive("rows (m)", m)
        for n, v in (("--warmup", self.warmup + 1), ("--active", self.active), ("--reps", self.reps)):
            _positive(n, v)
        check_threads(self.threads)
        return dataclasses.replace(self, dtype=canonical_dtype(self.dtype), device=check_device_name(self.device))


@dataclass(frozen=True)
class ModelConfig:
    """A decoder-only transformer: learned positions, pre-norm (LayerNorm), GELU MLP, tied nothing."""

    layers: int = 4
    d_model: int = 512
    heads: int = 8
    kv_heads: int = 0  # 0 → same as heads (MHA); fewer → grouped-query attention
    ffn_mult: int = 4
    vocab: int = 8192
    max_context: int = 1024
    dtype: str = "float32"

    @property
    def n_kv(self) -> int:
        return self.kv_heads or self.heads

    @property
    def head_dim(self) -> int:
        return self.d_model // self.heads

    def validate(self) -> "ModelConfig":
        for n in ("layers", "d_model", "heads", "ffn_mult", "vocab", "max_context"):
            _positive(f"--{n.replace('_', '-')}", getattr(self, n))
        if self.kv_heads < 0:
            raise UsageError(f"--kv-heads must be >= 0 (got {self.kv_heads})")
        if self.d_model % self.heads:
            raise UsageError(f"--d-model {self.d_model} is not a multiple of --heads {self.heads}")
        if self.heads % self.n_kv:
            raise UsageError(f"--heads {self.heads} is not a multiple of --kv-heads {self.n_kv}")
        return dataclasses.replace(self, dtype=canonical_dtype(self.dtype))


@dataclass(frozen=True)
class LengthDist:
    """Token-length distribution: ``fixed:N``, ``uniform:LO:HI`` (inclusive) or ``choice:A,B,C``."""

    spec: str

    def validate(self, what: str) -> "LengthDist":
        kind, _, rest = self.spec.partition(":")
        try:
            if kind == "fixed":
                vals = [int(rest)]
            elif kind == "uniform":
                lo, hi = (int(x) for x in rest.split(":"))
                if lo > hi:
                    raise UsageError(f"{what}: uniform:{lo}:{hi} has lo > hi")
                vals = [lo, hi]
            elif kind == "choice":
                vals = [int(x) for x in rest.split(",")]
            else:
                raise UsageError(f"{what}: unknown distribution {self.spec!r} (fixed:N, uniform:LO:HI, choice:A,B)")
        except ValueError:
            raise UsageError(f"{what}: cannot parse {self.spec!r}") from None
        if not vals or min(vals) <= 0:
            raise UsageError(f"{what}: lengths must be > 0 ({self.spec!r})")
        return self

    def max(self) -> int:
        kind, _, rest = self.spec.partition(":")
        if kind == "fixed":
            return int(rest)
        if kind == "uniform":
            return int(rest.split(":")[1])
        return max(int(x) for x in rest.split(","))

    def sample(self, n: int, rng: random.Random) -> list[int]:
        kind, _, rest = self.spec.partition(":")
        if kind == "fixed":
            return [int(rest)] * n
        if kind == "uniform":
            lo, hi = (int(x) for x in rest.split(":"))
            return [rng.randint(lo, hi) for _ in range(n)]
        vals = [int(x) for x in rest.split(",")]
        return [rng.choice(vals) for _ in range(n)]


# The KV cache's layouts of `run llm --kv-cache`: a pool allocated once for max_context positions
# (serving engines), or a cache that grows per generated token (Hugging Face's default).
KV_CACHE_LAYOUTS = ("pool", "dynamic")


@dataclass(frozen=True)
class LLMRunConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    batch: int = 4
    prompt_len: str = "uniform:64:256"
    output_len: str = "fixed:32"
    device: str = "cpu"
    seed: int = 0
    threads: int = 0  # CPU intra-op threads (0 = torch's default)
    warmup_decode_steps: int = 2  # decode steps in the (discarded) profiler warm-up pass
    profile_memory: bool = False  # torch.profiler(profile_memory=True): [memory] events in the trace
    kv_cache: str = "pool"  # pool: pre-allocated for max_context | dynamic: grows by one position per step

    def validate(self) -> "LLMRunConfig":
        model = self.model.validate()
        _positive("--batch", self.batch)
        if self.kv_cache not in KV_CACHE_LAYOUTS:
            raise UsageError(f"--kv-cache {self.kv_cache!r}: one of {', '.join(KV_CACHE_LAYOUTS)}")
        p = LengthDist(self.prompt_len).validate("--prompt-len")
        o = LengthDist(self.output_len).validate("--output-len")
        if p.max() + o.max() > model.max_context:
            raise UsageError(f"prompt ({p.max()}) + output ({o.max()}) tokens exceed --max-context {model.max_context}")
        if self.warmup_decode_steps < 0:
            raise UsageError("--warmup-decode-steps must be >= 0")
        check_threads(self.threads)
        return dataclasses.replace(self, model=model, device=check_device_name(self.device))


@dataclass(frozen=True)
class ServeConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    requests: int = 16
    prompt_len: str = "uniform:32:256"
    output_len: str = "uniform:8:32"
    arrival: str = "poisson:200"  # poisson:<req/s> | interval:<ms> | burst (all at t=0)
    token_budget: int = 256  # max tokens (prefill chunk tokens + decode tokens) per step
    max_seqs: int = 8  # max active sequences (KV-cache slots)
    chunk: int = 128  # max prefill tokens of one request per step
    device: str = "cpu"
    seed: int = 0
    threads: int = 0  # CPU intra-op threads (0 = torch's default)
    warmup_requests: int = 2
    profile_memory: bool = False  # torch.profiler(profile_memory=True): [memory] events in the trace

    def validate(self) -> "ServeConfig":
        model = self.model.validate()
        for n in ("requests", "token_budget", "max_seqs", "chunk"):
            _positive(f"--{n.replace('_', '-')}", getattr(self, n))
        p = LengthDist(self.prompt_len).validate("--prompt-len")
        o = LengthDist(self.output_len).validate("--output-len")
        if p.max() + o.max() > model.max_context:
            raise UsageError(f"prompt ({p.max()}) + output ({o.max()}) tokens exceed --max-context {model.max_context}")
        if self.token_budget < self.max_seqs:
            # every active sequence must be able to decode in one step, or decodes starve
            raise UsageError(f"--token-budget {self.token_budget} must be >= --max-seqs {self.max_seqs}")
        if self.warmup_requests < 0:
            raise UsageError("--warmup-requests must be >= 0")
        arrival_times(self.arrival, 1, random.Random(0))  # validates the spec
        check_threads(self.threads)
        return dataclasses.replace(self, model=model, device=check_device_name(self.device))


def arrival_times(spec: str, n: int, rng: random.Random) -> list[float]:
    """Arrival offsets in seconds from the loop start: ``poisson:<rate/s>``, ``interval:<ms>``, ``burst``."""
    kind, _, rest = spec.partition(":")
    try:
        if kind == "burst":
            return [0.0] * n
        if kind == "interval":
            gap = float(rest) / 1000.0
            if gap < 0:
                raise ValueError
            return [i * gap for i in range(n)]
        if kind == "poisson":
            rate = float(rest)
            if rate <= 0:
                raise ValueError
            t, out = 0.0, []
            for _ in range(n):
                out.append(t)
                t += rng.expovariate(rate)
            return out
    except ValueError:
        raise UsageError(f"--arrival: cannot parse {spec!r}") from None
    raise UsageError(f"--arrival: unknown schedule {spec!r} (poisson:<req/s>, interval:<ms>, burst)")


def as_dict(cfg: Any) -> dict[str, Any]:
    return dataclasses.asdict(cfg)
