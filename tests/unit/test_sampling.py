"""Sampler: greedy, top-k, top-p, temperature, seeded reproducibility, invalid parameters."""

from __future__ import annotations

import math

import pytest
import torch
from pipeplan.runtime.sampling import Sampler, SamplingError

LOGITS = torch.tensor([1.0, 3.0, 2.0, 0.5, 2.9, -1.0])


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_greedy_is_argmax():
    """temperature 0 (and top_k 1 at any temperature) returns the argmax; [1, V] rows are accepted."""
    assert Sampler().sample(LOGITS) == 1
    assert Sampler(temperature=5.0, top_k=1, seed=3).sample(LOGITS) == 1
    assert Sampler().sample(LOGITS[None, :]) == 1


def test_seeded_reproducible():
    """Equal seeds give equal sequences; a different seed gives a different one."""
    s1, s2, s3 = Sampler(temperature=1.5, seed=7), Sampler(temperature=1.5, seed=7), Sampler(temperature=1.5, seed=8)
    r1 = [s1.sample(LOGITS) for _ in range(50)]
    r2 = [s2.sample(LOGITS) for _ in range(50)]
    r3 = [s3.sample(LOGITS) for _ in range(50)]
    assert r1 == r2 and r1 != r3


def test_top_k_and_top_p_restrict_support():
    """top_k keeps the k highest logits; top_p keeps the smallest prefix reaching probability p."""
    s = Sampler(temperature=10.0, top_k=2, seed=0)
    assert {s.sample(LOGITS) for _ in range(200)} == {1, 4}
    probs = torch.softmax(LOGITS, 0)
    order = torch.argsort(LOGITS, descending=True).tolist()  # [1, 4, 2, 0, 3, 5]
    p = float(probs[order[0]] + probs[order[1]]) + 1e-4  # needs the third token too
    ids, _ = Sampler(temperature=1.0, top_p=p).candidates(LOGITS)
    assert ids.tolist() == order[:3]
    s = Sampler(temperature=10.0, top_p=p, seed=1)
    assert {s.sample(LOGITS) for _ in range(300)} == set(order[:3])
    assert Sampler(temperature=1.0, top_p=1e-6).candidates(LOGITS)[0].tolist() == [1]


def test_temperature_distribution():
    """With temperature T the empirical frequencies follow softmax(logits / T) (2000 draws, 4 sigma)."""
    logits = torch.tensor([math.log(3.0), 0.0])  # p = 0.75 / 0.25 at T = 1; 0.634 / 0.366 at T = 2
    for temp, p0 in ((1.0, 0.75), (2.0, math.sqrt(3) / (math.sqrt(3) + 1))):
        s = Sampler(temperature=temp, seed=123)
        n = 2000
        hits = sum(s.sample(logits) == 0 for _ in range(n))
        assert abs(hits / n - p0) < 4 * math.sqrt(p0 * (1 - p0) / n)


@pytest.mark.parametrize("kw,where", [
    ({"temperature": -0.1}, "temperature"), ({"temperature": float("nan")}, "temperature"),
    ({"top_k": -1}, "top_k"), ({"top_k": 1.5}, "top_k"),
    ({"top_p": 0.0}, "top_p"), ({"top_p": 1.01}, "top_p"), ({"seed": "x"}, "seed"),
])
def test_invalid_parameters(kw, where):
    """Invalid sampler parameters raise SamplingError naming the parameter."""
    with pytest.raises(SamplingError, match=where) as e:
        Sampler(**kw)
    assert e.value.where == where and e.value.code == "sampling"


def test_invalid_logits():
    """NaN logits, integer logits, and wrong shapes raise SamplingError."""
    s = Sampler(temperature=1.0)
    with pytest.raises(SamplingError, match="NaN"):
        s.sample(torch.tensor([0.0, float("nan")]))
    with pytest.raises(SamplingError, match="float"):
        s.sample(torch.tensor([1, 2]))
    with pytest.raises(SamplingError, match=r"shape \[n_vocab\]"):
        s.sample(torch.zeros(2, 3))
