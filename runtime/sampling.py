"""Token sampling from a logits row: greedy, or temperature + top-k + top-p with a seeded generator.

Order of operations follows llama.cpp's default sampler chain for these three samplers
(``top_k`` -> ``top_p`` -> ``temp`` -> ``dist``): top-k and top-p select candidates from the logits
ranking (top-p on the softmax of the *un-tempered* logits, as ``llama_sampler_top_p`` sees them
before ``temp``), then the survivors are sampled from ``softmax(logits / temperature)`` with a numpy
``Generator`` (PCG64) seeded by ``seed``, so equal seeds give equal sequences. Logits are numpy arrays or
anything ``numpy.asarray`` takes (a CPU torch tensor); this module never imports torch.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from pipeplan.errors import PipeplanError


class SamplingError(PipeplanError):
    """Invalid sampler parameters, or logits that are not a finite 1-D float row."""

    code = "sampling"
    kind = "runtime"


SEED_MAX = 2**63 - 1
"""Largest ``seed`` (frames carry it as an int64; llama.cpp's is a uint32, so every llama.cpp seed fits)."""
TOP_K_MAX = 2**31 - 1
"""Largest ``top_k`` (an int32 like llama.cpp's; larger than any vocabulary, so it means all)."""


def _int_in(name: str, v: object, lo: int, hi: int, extra: str = "") -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise SamplingError(f"{name} must be an int{extra}, got {v!r}", where=name)
    if not lo <= v <= hi:
        raise SamplingError(f"{name} must be in [{lo}, {hi}], got {v}", where=name)
    return v


class Sampler:
    """Pick the next token id from logits ``[n_vocab]``.

    Args:
        temperature: 0 = greedy argmax (ties: lowest id); > 0 scales logits before softmax. Any finite
            positive value is safe, down to the smallest subnormal: the scaled logits are computed in
            float64 relative to the best one, so a tiny temperature tends to greedy instead of overflowing.
        top_k: keep the k highest logits (0 = all), ``0 <= top_k <=`` :data:`TOP_K_MAX`.
        top_p: keep the smallest set of highest-probability tokens whose probability reaches
            ``top_p`` (1.0 = all; always keeps at least one token).
        seed: seed of the generator, ``0 <= seed <=`` :data:`SEED_MAX` (None: a fixed default seed 0,
            still reproducible).

    Raises:
        SamplingError: ``temperature < 0`` or not finite, ``top_k`` not an int in range, ``top_p``
            outside ``(0, 1]``, or ``seed`` not an int in range.
    """

    def __init__(self, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0, seed: int | None = None):
        if (isinstance(temperature, bool) or not isinstance(temperature, int | float)
                or not math.isfinite(temperature) or temperature < 0):
            raise SamplingError(f"temperature must be a finite number >= 0, got {temperature!r}", where="temperature")
        _int_in("top_k", top_k, 0, TOP_K_MAX, " >= 0")
        if isinstance(top_p, bool) or not isinstance(top_p, int | float) or not (0.0 < top_p <= 1.0):
            raise SamplingError(f"top_p must be in (0, 1], got {top_p!r}", where="top_p")
        if seed is not None:
            _int_in("seed", seed, 0, SEED_MAX, " or None")
        self.temperature = float(temperature)
        self.top_k = top_k
        self.top_p = float(top_p)
        self.seed = 0 if seed is None else seed
        self._generator: np.random.Generator | None = None

    @property
    def generator(self) -> np.random.Generator:
        """The numpy ``Generator`` (PCG64) seeded with ``seed`` (made on first use)."""
        if self._generator is None:
            self._generator = np.random.Generator(np.random.PCG64(self.seed))
        return self._generator

    @property
    def greedy(self) -> bool:
        """Whether this sampler is greedy (temperature 0, or top_k 1)."""
        return self.temperature == 0.0 or self.top_k == 1

    def candidates(self, logits: Any) -> tuple[np.ndarray, np.ndarray]:
        """The ids kept by top-k then top-p, highest logit first (ties: lowest id first), and their logits.

        Shapes: ``logits`` ``[n_vocab]`` -> (int64 ``[m]``, float32 ``[m]``), ``1 <= m <= n_vocab``.
        """
        arr = _as_numpy(logits)
        if arr is None:
            raise SamplingError("logits must be a float array (numpy or torch)", where="logits")
        vals = arr.astype(np.float32, copy=False).reshape(-1)
        ids = np.argsort(-vals, kind="stable")
        if self.top_k > 0:
            ids = ids[: self.top_k]
        v = vals[ids]
        if self.top_p < 1.0:
            e = np.exp(v - v[0])
            probs = e / e.sum(dtype=np.float32)
            cum = np.cumsum(probs, dtype=np.float32)
            keep = int(np.searchsorted(cum, np.float32(self.top_p), side="left")) + 1
            keep = max(1, min(keep, v.size))
            ids, v = ids[:keep], v[:keep]
        return ids.astype(np.int64), v

    def sample(self, logits: Any) -> int:
        """One token id from ``logits`` (``[n_vocab]``, or ``[1, n_vocab]``).

        Raises:
            SamplingError: logits not a 1-row float array, empty, or containing NaN.
        """
        a = _as_numpy(logits)
        if a is None or a.dtype.kind != "f":
            raise SamplingError("logits must be a float array (numpy or torch)", where="logits")
        if a.ndim == 2 and a.shape[0] == 1:
            a = a[0]
        if a.ndim != 1 or a.size == 0:
            raise SamplingError(f"logits must have shape [n_vocab], got {tuple(a.shape)}", where="logits")
        if np.isnan(a).any():
            raise SamplingError("logits contain NaN", where="logits")
        if self.greedy:
            return int(np.argmax(a))
        ids, vals = self.candidates(a)
        # float64, relative to the best logit: (v - max) / T is <= 0, so no overflow for any T > 0, and
        # 0 / T = 0 keeps the best token (a float32 T would round a tiny temperature to 0 and give NaN)
        # 0 / T = 0 keeps the best token; a tiny T sends the others to -inf (weight 0): not an error
        with np.errstate(over="ignore"):
            w = np.exp((vals.astype(np.float64) - float(vals[0])) / self.temperature)
        cum = np.cumsum(w)
        pick = int(np.searchsorted(cum, self.generator.random() * cum[-1], side="right"))
        return int(ids[min(pick, ids.size - 1)])


def _as_numpy(x: Any) -> np.ndarray | None:
    """``x`` as a numpy array without a copy where possible (a torch tensor through ``.numpy()``); None when
    it is not array-like."""
    if isinstance(x, np.ndarray):
        return x
    to_numpy = getattr(x, "numpy", None)
    if callable(to_numpy):
        return np.asarray(x.detach().cpu().numpy() if hasattr(x, "detach") else to_numpy())
    try:
        return np.asarray(x)
    except (TypeError, ValueError):
        return None
