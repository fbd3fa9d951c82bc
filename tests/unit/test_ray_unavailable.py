"""WL-L-4 (runtime) on the Ray backend: a stage whose event poll fails with Ray's ``ActorUnavailableError``
(temporarily unreachable) is polled again, not blamed for a fault, until it fails
``UNAVAILABLE_POLLS`` polls in a row; ``RayActorError`` (a dead actor) marks it dead at once."""

from __future__ import annotations

import types

import pytest

pytest.importorskip("ray")

from pipeplan.runtime import ray_backend  # noqa: E402
from pipeplan.runtime.ray_backend import UNAVAILABLE_POLLS, RayBackend  # noqa: E402
from ray.exceptions import ActorDiedError, ActorUnavailableError  # noqa: E402


class _Ref:
    """An object ref whose ``ray.get`` returns ``value`` (or raises it when it is an exception)."""

    def __init__(self, value: object):
        self.value = value


class _Actor:
    def __init__(self, outcomes: list[object]):
        self.outcomes = outcomes
        self.poll_events = types.SimpleNamespace(remote=self._remote)

    def _remote(self, cursor: int, wait_s: float) -> object:
        return _Ref(self.outcomes.pop(0))


def _fake_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    def get(ref: _Ref) -> object:
        if isinstance(ref.value, BaseException):
            raise ref.value
        return ref.value

    fake = types.SimpleNamespace(wait=lambda refs, num_returns, timeout: (list(refs), []), get=get)
    monkeypatch.setattr(ray_backend, "ray", fake)


def _backend(outcomes: dict[int, list[object]]) -> RayBackend:
    b = RayBackend()
    for s, outs in outcomes.items():
        b.actors[s] = _Actor(outs)  # type: ignore[assignment]
        b._cursor[s] = 0
        b._provisions[s] = types.SimpleNamespace(node_id=f"n{s}")  # type: ignore[assignment]
    return b


def test_unavailable_stage_is_retried_not_blamed(monkeypatch):
    _fake_ray(monkeypatch)
    unavailable = ActorUnavailableError("RPC error: connection attempt timed out", None)
    died = ActorDiedError()
    ok = ([], None)
    b = _backend({1: [died], 2: [unavailable] * (UNAVAILABLE_POLLS - 1) + [ok, ok]})
    for _ in range(UNAVAILABLE_POLLS + 1):
        b._pump(0.0)
    assert set(b._dead) == {1}, b._dead
    assert b._dead[1].startswith("Ray actor of stage 1 on node n1 died (ActorDiedError")
    assert b._unavailable == {}  # the successful poll of stage 2 reset its count


def test_stage_unavailable_every_poll_counts_as_dead(monkeypatch):
    _fake_ray(monkeypatch)
    unavailable = ActorUnavailableError("RPC error: connection attempt timed out", None)
    b = _backend({2: [unavailable] * UNAVAILABLE_POLLS})
    for i in range(UNAVAILABLE_POLLS):
        assert 2 not in b._dead, f"dead after {i} unavailable polls"
        b._pump(0.0)
    assert b._dead[2].startswith("Ray actor of stage 2 on node n2 died (ActorUnavailableError")
