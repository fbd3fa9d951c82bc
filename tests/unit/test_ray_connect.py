"""How RayBackend connects (issue 14 item 3, RP-AR-1): the ray.init arguments for each --ray-address form."""

from __future__ import annotations

import pytest

ray = pytest.importorskip("ray")


class _Stop(Exception):
    pass


@pytest.mark.parametrize("address, embedded", [(None, True), ("local", True), ("auto", False)])
def test_local_starts_an_embedded_instance_carrying_the_node_ids(monkeypatch, address, embedded):
    """``--ray-address local`` starts an embedded instance as no address does (its node carries every plan node
    id as a custom resource, and the backend shuts it down); ``auto`` connects to a running cluster, which must
    carry them itself."""
    from types import SimpleNamespace

    from pipeplan.runtime import ray_backend

    seen = {}

    def fake_init(**kw):
        seen.update(kw)
        raise _Stop

    monkeypatch.setattr(ray_backend.ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray_backend.ray, "init", fake_init)
    monkeypatch.setattr(ray_backend, "probe_ray_address", lambda a: None)
    b = ray_backend.RayBackend(address)
    provisions = [SimpleNamespace(node_id="local0"), SimpleNamespace(node_id="local1")]
    with pytest.raises(ray_backend.RayUnavailableError):
        b._connect(provisions)
    if embedded:
        assert seen["resources"] == {"pipeplan_node:local0": 1.0, "pipeplan_node:local1": 1.0}
        assert seen["num_cpus"] == 2 and seen.get("address") == address
    else:
        assert "resources" not in seen and seen["address"] == "auto"


def test_an_address_that_is_not_ray_fails_fast():
    """A --ray-address where something listens that does not answer as a Ray cluster (here an HTTP/1 server;
    Ray's GCS speaks gRPC over HTTP/2) is error[ray_unavailable] at once, not ray.init's minutes of retries; a
    server that answers the HTTP/2 preface with a SETTINGS frame passes the probe."""
    import socket
    import threading
    import time

    from pipeplan.runtime.ray_backend import RayUnavailableError, probe_ray_address

    def serve(srv, reply):
        conn, _ = srv.accept()
        with conn:
            conn.recv(64)
            conn.sendall(reply)
            time.sleep(0.2)

    for reply, ok in ((b"HTTP/1.1 400 Bad Request\r\n\r\n", False), (bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]), True)):
        srv = socket.create_server(("127.0.0.1", 0))
        t = threading.Thread(target=serve, args=(srv, reply), daemon=True)
        t.start()
        addr = f"127.0.0.1:{srv.getsockname()[1]}"
        t0 = time.monotonic()
        if ok:
            probe_ray_address(addr)
        else:
            with pytest.raises(RayUnavailableError) as e:
                probe_ray_address(addr)
            assert e.value.code == "ray_unavailable" and "does not answer as a Ray cluster" in e.value.message
        assert time.monotonic() - t0 < 2.0
        t.join(5)
        srv.close()
