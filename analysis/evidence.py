"""Evidence providers and their resolution under an EvidencePolicy (seed 003, "Cost resolution analysis").

* :class:`RooflineProvider` — analytic: ``max(flops / peak_flops, bytes / peak_bandwidth)`` on the
  task's device from the DeploymentBinding (``bytes / link_bandwidth`` for send/recv). A device
  without the peak it needs is an error naming the device and field, never an assumed peak.
  Confidence 0.5 (an analytic bound, Williams et al., "Roofline", CACM 2009).
* :class:`MeasuredTable` — a JSON table written by ``pipeplan calibrate`` (:mod:`pipeplan.tools.calibrate`,
  cached per machine + model and used by default) or ``bench/measure_kernels.py`` (what our runtime's
  tasks cost on this machine: by default each command of a calibration replay charged with its
  dispatch, including the recv/send hops; or isolated kernel hot loops). Any task key may appear,
  transfers included. An exact key is a direct measurement (confidence from the
  samples' spread); the same op and dtypes at another shape is *scaled* by the work ratio and
  returned **out of domain** (confidence 0.25) — it can never pass as a measurement (AB-C-3).

Normalized request key: ``"<op>|<dtype,dtype,...>|<d0>x<d1>x..."`` (operand dtypes reads-then-writes,
work shape). :func:`resolve` applies the policy: the first provider answering in its domain wins —
``direct`` when it is the policy's first provider, ``fallback`` otherwise (only when the policy
allows fallback); when no provider answers in-domain, an out-of-domain answer is used with status
``out_of_domain`` (again only when fallback is allowed); an estimate whose uncertainty
(``1 - confidence``) exceeds the policy's budget is an error.

Measured-table format (``pipeplan-kernel-timings/1``)::

    {"format": "pipeplan-kernel-timings/1", "created_unix": 1700000000.0, "machine": {...},
     "entries": [{"key": "matmul|f32,f32,f32|1x64x64", "op": "matmul", "seconds": 1.2e-06,
                  "flops": 8192, "bytes": 16896, "samples": 50, "rel_spread": 0.05}]}
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pipeplan.dialects.bindings import DeviceInstance, EvidencePolicy
from pipeplan.errors import PipeplanError

TABLE_FORMAT = "pipeplan-kernel-timings/1"
ROOFLINE_CONFIDENCE = 0.5
OUT_OF_DOMAIN_CONFIDENCE = 0.25


class EvidenceError(PipeplanError):
    """Evidence that cannot price a request under the policy: unreadable/stale table, missing
    device peak, forbidden fallback, uncertainty over budget. ``code`` names the kind."""

    code = "evidence"


def request_key(op: str, dtypes: Sequence[str], shape: Sequence[int]) -> str:
    """The normalized key of an estimate request (see the module docstring)."""
    return f"{op}|{','.join(dtypes)}|{'x'.join(str(d) for d in shape)}"


@dataclass(frozen=True)
class EstimateRequest:
    """What to price: one candidate of one task on one device. ``lineage`` is for diagnostics."""

    task: str
    candidate: str
    impl: str
    op: str
    dtypes: tuple[str, ...]
    shape: tuple[int, ...]
    flops: int
    bytes_read: int
    bytes_written: int
    collective: str
    device: DeviceInstance
    lineage: str

    @property
    def key(self) -> str:
        """The normalized key (:func:`request_key`)."""
        return request_key(self.op, self.dtypes, self.shape)


@dataclass(frozen=True)
class Estimate:
    """A provider's answer: seconds, confidence in [0, 1], and whether the request was in its domain."""

    duration_s: float
    confidence: float
    provider: str
    in_domain: bool


class RooflineProvider:
    """Analytic roofline over the DeploymentBinding's device peaks (see module docstring)."""

    name = "roofline"

    def estimate(self, req: EstimateRequest) -> Estimate:
        """Roofline time of ``req`` on its device.

        Raises:
            EvidenceError (code ``missing_peak``): the device lacks a peak the request needs.
        """
        d = req.device
        nbytes = req.bytes_read + req.bytes_written
        if req.collective != "none":
            bw = self._peak(d, "link_bandwidth_bytes_per_s", req)
            return Estimate(nbytes / bw, ROOFLINE_CONFIDENCE, self.name, True)
        bw = self._peak(d, "bandwidth_bytes_per_s", req)
        t = nbytes / bw
        if req.flops:
            t = max(t, req.flops / self._peak(d, "flops_per_s", req))
        return Estimate(t, ROOFLINE_CONFIDENCE, self.name, True)

    @staticmethod
    def _peak(d: DeviceInstance, field: str, req: EstimateRequest) -> float:
        v = getattr(d, field)
        if not v or v <= 0:
            raise EvidenceError(f"roofline evidence needs {field} of device {d.id} (DeploymentBinding), which is "
                                f"not stated; needed for {req.lineage}", code="missing_peak", where=d.id)
        return float(v)

    def fingerprint(self) -> str:
        """Identity of the model (its formula revision); device peaks enter via the deployment fingerprint."""
        return hashlib.sha256(b"roofline/1: max(flops/peak_flops, bytes/peak_bw); link: bytes/link_bw").hexdigest()


class MeasuredTable:
    """A measured kernel-timing table (JSON, :data:`TABLE_FORMAT`) as an estimate provider.

    Raises (constructor):
        EvidenceError (code ``bad_evidence``): unreadable file, wrong format, malformed entry;
            (code ``stale_evidence``): older than ``max_age_s`` (> 0) at ``now``.
    """

    name = "measured"

    def __init__(self, path: str | Path, *, max_age_s: int = 0, now: float | None = None):
        self.path = Path(path)
        try:
            raw = self.path.read_bytes()
            doc = json.loads(raw)
        except (OSError, ValueError) as e:
            raise EvidenceError(f"measured table {self.path}: cannot read: {e}", code="bad_evidence",
                                where=str(self.path)) from None
        if not isinstance(doc, dict) or doc.get("format") != TABLE_FORMAT or not isinstance(doc.get("entries"), list):
            raise EvidenceError(f"measured table {self.path}: not a {TABLE_FORMAT} document", code="bad_evidence",
                                where=str(self.path))
        self.digest = hashlib.sha256(raw).hexdigest()
        self.created = float(doc.get("created_unix", 0.0))
        if max_age_s > 0 and (now if now is not None else time.time()) - self.created > max_age_s:
            raise EvidenceError(f"measured table {self.path} is older than the policy's freshness {max_age_s} s",
                                code="stale_evidence", where=str(self.path))
        self.entries: dict[str, dict] = {}
        self._by_family: dict[str, list[dict]] = {}
        for i, entry in enumerate(doc["entries"]):
            try:
                key, secs = str(entry["key"]), float(entry["seconds"])
                work = float(entry.get("flops") or 0) or float(entry.get("bytes") or 0)
            except (KeyError, TypeError, ValueError):
                raise EvidenceError(f"measured table {self.path}: entry {i} lacks key/seconds", code="bad_evidence",
                                    where=str(self.path)) from None
            if secs < 0 or not math.isfinite(secs):
                raise EvidenceError(f"measured table {self.path}: entry {i} has invalid seconds {secs}",
                                    code="bad_evidence", where=str(self.path))
            rec = {**entry, "key": key, "seconds": secs, "_work": work}
            self.entries[key] = rec
            self._by_family.setdefault(key.rsplit("|", 1)[0], []).append(rec)

    def estimate(self, req: EstimateRequest) -> Estimate | None:
        """Exact key: in-domain. Same op+dtypes at another shape: scaled by work, out of domain.
        Otherwise None."""
        e = self.entries.get(req.key)
        if e is not None:
            conf = max(0.5, min(0.99, 1.0 - float(e.get("rel_spread", 0.05))))
            return Estimate(e["seconds"], conf, self.name, True)
        fam = self._by_family.get(req.key.rsplit("|", 1)[0])
        work = float(req.flops or (req.bytes_read + req.bytes_written))
        if not fam or work <= 0:
            return None
        best = min((x for x in fam if x["_work"] > 0), key=lambda x: abs(math.log(work / x["_work"])), default=None)
        if best is None:
            return None
        return Estimate(best["seconds"] * work / best["_work"], OUT_OF_DOMAIN_CONFIDENCE, self.name, False)

    def fingerprint(self) -> str:
        """sha256 of the table file's bytes."""
        return self.digest


def providers_for(policy: EvidencePolicy) -> list[RooflineProvider | MeasuredTable]:
    """The policy's providers, in order (measured tables loaded and checked for freshness)."""
    out: list[RooflineProvider | MeasuredTable] = []
    for p in policy.providers:
        if p == "roofline":
            out.append(RooflineProvider())
        elif p.startswith("measured:"):
            out.append(MeasuredTable(p[len("measured:"):], max_age_s=policy.max_age_s))
        else:
            raise EvidenceError(f"unknown evidence provider {p!r}", code="bad_evidence", where=p)
    return out


def evidence_fingerprint(providers: Sequence[RooflineProvider | MeasuredTable]) -> str:
    """sha256 over the providers' names and fingerprints, in policy order."""
    h = hashlib.sha256()
    for p in providers:
        h.update(f"{p.name}:{p.fingerprint()};".encode())
    return h.hexdigest()


def resolve(req: EstimateRequest, providers: Sequence[RooflineProvider | MeasuredTable],
            policy: EvidencePolicy) -> tuple[Estimate, str]:
    """Resolve ``req`` under ``policy``: ``(estimate, status)`` with status direct | fallback |
    out_of_domain (rules in the module docstring).

    Raises:
        EvidenceError: ``fallback_forbidden`` (the first provider has no in-domain evidence and the
            policy forbids fallback), ``no_evidence`` (no provider answered), ``over_budget``
            (uncertainty above the policy budget), ``missing_peak`` (roofline without peaks).
    """
    ood: Estimate | None = None
    for i, p in enumerate(providers):
        est = p.estimate(req)
        if est is not None and est.in_domain:
            status = "direct" if i == 0 else "fallback"
            _budget(req, est, policy)
            return est, status
        if est is not None and ood is None:
            ood = est
        if i == 0 and policy.fallback == "forbid":
            what = "only out-of-domain (scaled) evidence" if est is not None else "no entry"
            raise EvidenceError(
                f"evidence policy {policy.revision} forbids fallback, but provider {policy.providers[0]} has {what} "
                f"for key {req.key} ({req.lineage}, candidate {req.impl})", code="fallback_forbidden", where=req.task)
    if ood is not None:
        _budget(req, ood, policy)
        return ood, "out_of_domain"
    raise EvidenceError(f"no evidence provider of policy {policy.revision} can price key {req.key} ({req.lineage})",
                        code="no_evidence", where=req.task)


def _budget(req: EstimateRequest, est: Estimate, policy: EvidencePolicy) -> None:
    if 1.0 - est.confidence > policy.uncertainty_budget + 1e-12:
        raise EvidenceError(
            f"estimate for {req.lineage} from {est.provider} has uncertainty {1.0 - est.confidence:.2f}, above the "
            f"policy's budget {policy.uncertainty_budget:.2f}", code="over_budget", where=req.task)
