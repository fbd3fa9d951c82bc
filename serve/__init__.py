"""``pipeplan serve``: an OpenAI-compatible HTTP server over one started pipeline (issue 14 item 2).

Modules: :mod:`~pipeplan.serve.scheduler` (requests, their token streams, the FIFO scheduler that owns the
:class:`~pipeplan.runtime.orchestrator.Pipeline`), :mod:`~pipeplan.serve.chat` (the GGUF's
``tokenizer.chat_template`` rendered with jinja2), :mod:`~pipeplan.serve.app` (the Starlette routes:
``/v1/completions``, ``/v1/chat/completions``, ``/v1/models``, ``/health``) and :mod:`~pipeplan.serve.server`
(uvicorn on a pre-bound socket, graceful shutdown on SIGTERM/SIGINT). The CLI is ``tools/cmd_serve.py``.
"""
