"""pipeplan.models: torch-free architecture program builders and hyper-parameters (llama.cpp graphs)."""
