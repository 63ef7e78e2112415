"""The hostile-input campaign for the side inputs (issue 37): seeded generators of model configs,
capture folders and engine file names, each case checked against what docs/robustness.md
promises for its class.

- **configs**: a real config's fields set to hostile values (huge, negative, fractional,
  infinite, text, nested), its bytes cut, nested, or not UTF-8. A case passes when
  :func:`read_model_config` returns sizes that are integers in [1, 2^31) (head_dim > 0) that a
  dataset can hold and read back, or raises one ``UsageError`` line.
- **capture folders**: a trace with its ``capture_traces/`` folder whose
  ``execution_details.json`` and capture files are mutated (entries naming files outside the
  folder or links out of it, hostile batch sizes, deep nesting, cut, empty and non-JSON files). A
  case passes when the trace loads with warnings of text, no file outside the folder merged, or
  ends in one typed line.
- **engine names**: vLLM and SGLang file names with hostile rank digits (huge, full-width,
  signed) and hostile ``distributedInfo``. A case passes when every rank kept is an integer with
  0 ≤ rank < world size < 2^31.

Deterministic: case k of generator g uses ``random.Random(37 * 1_000_003 + k)``; a failure names
g and k, and ``TRACEKIT_FUZZ_CASE=k`` reruns that case. The budget per generator is
``TRACEKIT_FUZZ_SECONDS`` / 3 (default 6 s in all; ``.ci/run`` gives 60 s).
"""

from __future__ import annotations

import copy
import json
import os
import random
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import piecewise_trace as P
from tracekit.errors import TracekitError, UsageError
from tracekit.sources import load
from tracekit.sources.engine_names import MAX_WORLD, apply_engine_name
from tracekit.sources.model_config import _FIELDS, read_model_config
from tracekit.tables.check import _bounded

SEED = 37
GPT_OSS = {
    "architectures": ["GptOssForCausalLM"],
    "hidden_size": 2880,
    "head_dim": 64,
    "intermediate_size": 2880,
    "num_attention_heads": 64,
    "num_hidden_layers": 36,
    "num_key_value_heads": 8,
    "num_local_experts": 128,
    "num_experts_per_tok": 4,
    "torch_dtype": "bfloat16",
    "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn"]},
    "text_config": {"hidden_size": 1},
}
HOSTILE: list[Any] = [
    None,
    True,
    0,
    -1,
    1.5,
    2**31,
    2**63,
    10**309,
    "64",
    "",
    [],
    {},
    [64],
    {"a": 1},
    "\x1b]52;c;x\x07",
]
RAW = ["1e309", "-1e309", "1" + "0" * 5000, "[" * 3000, "NaN", "Infinity", "1e-400"]
DIGITS = ["0", "1", "3", "07", "2147483647", "2147483648", "9223372036854775808", "9" * 40, "\uff13", "\u0663", "-1"]


def _budget() -> float:
    return float(os.environ.get("TRACEKIT_FUZZ_SECONDS", "6")) / 3


def _run(gen: str, case: Callable[[random.Random, int], None]) -> None:
    only = os.environ.get("TRACEKIT_FUZZ_CASE")
    cases = [int(only)] if only else range(1_000_000)
    t_end = time.monotonic() + _budget()
    done = 0
    for k in cases:
        if not only and time.monotonic() > t_end:
            break
        try:
            case(random.Random(SEED * 1_000_003 + k), k)
        except BaseException as exc:  # noqa: BLE001 - name the case, then fail
            raise AssertionError(f"fuzz {gen} case {k} (TRACEKIT_FUZZ_CASE={k}): {type(exc).__name__}: {exc}") from exc
        done += 1
    assert done >= 1
    print(f"fuzz {gen}: {done} cases")


# ------------------------------------------------------------------ model configs
def _config_text(rng: random.Random) -> bytes:
    cfg = copy.deepcopy(GPT_OSS)
    raw: list[str] = []
    for _ in range(rng.randint(1, 4)):
        key = rng.choice([*cfg, "n_shared_experts", "moe_intermediate_size", "d_model"])
        if rng.random() < 0.3:
            raw.append(rng.choice(RAW))
            cfg[key] = f"\x00RAW{len(raw) - 1}\x00"
        elif rng.random() < 0.15:
            cfg.pop(key, None)
        else:
            cfg[key] = copy.deepcopy(rng.choice(HOSTILE))
    if rng.random() < 0.2:
        cfg = {"text_config": cfg}  # the multimodal layout
    text = json.dumps(cfg)
    for i, r in enumerate(raw):
        text = text.replace(f'"\\u0000RAW{i}\\u0000"', r)
    data = text.encode()
    op = rng.randrange(6)
    if op == 0:
        data = data[: rng.randrange(len(data))]
    elif op == 1:
        data = b"\xff\xfe" + data
    elif op == 2:
        data = b"[" * rng.choice([10, 1000, 5000]) + data
    return data


def test_fuzz_model_configs(tmp_path: Path) -> None:
    def case(rng: random.Random, k: int) -> None:
        p = tmp_path / "config.json"
        p.write_bytes(_config_text(rng))
        try:
            cfg = read_model_config(p)
        except UsageError as exc:
            assert "\n" not in str(exc) and str(exc).startswith(str(p)), repr(exc)
            return
        for f in _FIELDS:
            v = cfg[f]
            assert v is None or (type(v) is int and 1 <= v <= MAX_WORLD), (f, v)
        assert cfg["head_dim"] is None or cfg["head_dim"] > 0
        assert all(_bounded(v) for v in cfg.values()), cfg  # what a dataset reads back (tables/check.py)
        json.loads(json.dumps(cfg, allow_nan=False))

    _run("configs", case)


# ------------------------------------------------------------------ capture folders
@pytest.fixture(scope="module")
def capture_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("capture_template")
    P.write_case(d, 3)
    outside = d / "outside.pt.trace.json"  # a trace outside the folder, never to be merged
    outside.write_text(json.dumps({"traceEvents": P.capture_doc(P.T, 3, True)["traceEvents"]}))
    return d


def _mutate_folder(cap: Path, rng: random.Random) -> None:
    details = cap / "execution_details.json"
    listed: list[Any] = json.loads(details.read_text())
    files = sorted(p for p in cap.iterdir() if p.name != details.name)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(9)
        if op == 0:  # an entry naming a file outside the folder
            listed.append({"file": rng.choice(["../outside.pt.trace.json", str(cap.parent / "outside.pt.trace.json")])})
        elif op == 1:  # a link out of the folder
            link = cap / f"link{rng.randrange(99)}.json"
            if not link.exists():
                link.symlink_to(cap.parent / "outside.pt.trace.json")
            listed.append({"file": link.name, "batch_size": rng.choice([1, P.T])})
        elif op == 2 and listed:
            e = rng.choice(listed)
            if isinstance(e, dict):
                e[rng.choice(["batch_size", "file", "mode"])] = copy.deepcopy(rng.choice(HOSTILE))
        elif op == 3 and files:
            f = rng.choice(files)
            if f.is_file() and not f.is_symlink():
                f.write_bytes(f.read_bytes()[: rng.randrange(max(1, f.stat().st_size))])
        elif op == 4 and files:
            f = rng.choice(files)
            if not f.is_symlink():
                f.write_bytes(rng.choice([b"", b"\x1b]52;c;AAAA\x07", b"[1, 2]", b"{}"]))
        elif op == 5:
            (cap / f"stray{rng.randrange(9)}.json").write_bytes(rng.choice([b"", b"{", b"[]"]))
        elif op == 6:  # not a list of entries
            details.write_text(json.dumps(rng.choice([[], {}, "x", [1, None]])))
            return
        elif op == 7:
            details.write_bytes(b"[" * rng.choice([100, 2000, 10000]))
            return
        else:
            details.write_bytes(json.dumps(listed).encode()[: rng.randrange(1, 200)])
            return
    details.write_text(json.dumps(listed))


def test_fuzz_capture_folders(capture_template: Path, tmp_path: Path) -> None:
    def case(rng: random.Random, k: int) -> None:
        d = tmp_path / f"case{k}"
        shutil.copytree(capture_template, d, symlinks=True)
        _mutate_folder(d / "capture_traces", rng)
        try:
            tr = load(d / "step.json")
        except TracekitError as exc:
            assert "\n" not in str(exc), repr(exc)
            return
        warns = tr.meta.get("warnings") or []
        assert all(isinstance(w, str) and "\x1b" not in w for w in warns), warns
        merged = (tr.meta.get("capture") or {}).get("files") or []
        assert all(Path(f).resolve().parent == (d / "capture_traces").resolve() for f in merged), merged
        shutil.rmtree(d)

    _run("capture folders", case)


# ------------------------------------------------------------------ engine names
def _name(rng: random.Random) -> str:
    def dg() -> str:
        return rng.choice(DIGITS)

    forms = [
        lambda: f"{rng.choice(['', 'pre_'])}dp{dg()}_pp{dg()}_tp{dg()}_ep{dg()}_rank{dg()}.{dg()}.pt.trace.json",
        lambda: f"rank{dg()}.{dg()}.pt.trace.json.gz",
        lambda: (
            f"run{dg()}-TP-{dg()}{rng.choice(['', '-DP-' + dg()])}{rng.choice(['', '-EXTEND', '-DECODE'])}"
            ".trace.json.gz"
        ),
        lambda: f"x-TP-{dg()}-EP-{dg()}.trace.json",
    ]
    return rng.choice(forms)()


def test_fuzz_engine_names() -> None:
    def case(rng: random.Random, k: int) -> None:
        dist: dict[str, Any] = {}
        if rng.random() < 0.6:
            dist = {"rank": rng.choice([*HOSTILE, 0, 1, 5]), "world_size": rng.choice([*HOSTILE, 2, 8])}
            dist = {k2: v if type(v) is int or v is None else None for k2, v in dist.items()}  # as the loader's _int
        meta: dict[str, Any] = {"distributed": dist, "warnings": []}
        apply_engine_name(meta, _name(rng))
        d = meta.get("distributed") or {}
        rank, world = d.get("rank"), d.get("world_size")
        assert world is None or 1 <= world <= MAX_WORLD, d
        assert rank is None or 0 <= rank < (world or MAX_WORLD), d
        for key, v in (meta.get("layout") or {}).items():
            if key.endswith("_rank") or key == "rank":
                assert v is None or (type(v) is int and 0 <= v < MAX_WORLD), (key, v)
        assert all(_bounded(v) for part in ("distributed", "layout") for v in (meta.get(part) or {}).values())
        assert all(isinstance(w, str) and "\n" not in w for w in meta["warnings"])

    _run("engine names", case)
