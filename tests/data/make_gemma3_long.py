"""Records llama.cpp's greedy continuation of a prompt longer than Gemma 3's 512-token sliding window
(tests/data/gemma3_long.json), for tests/contract/test_gemma3.py.

Run with an interpreter that has llama-cpp-python (a dev tool, never a pipeplan dependency):

    /work/llama-venv/bin/python tests/data/make_gemma3_long.py /root/.cache/pipeplan/models/gemma-3-270m-q4_k_m.gguf

llama-cpp-python 0.3.36 (AVX2 build, no AMX/AVX512), its defaults as in shared/models/gemma3-expected.json
(flash attention off, F16 KV cache, n_batch = n_ubatch = 512) with n_ctx 1024, one thread, BOS prepended;
greedy = argmax of the last position's logits, 32 tokens, generation does not stop at EOS.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

PARAGRAPHS = [
    "The river that runs through the valley begins as a thin stream high in the mountains, where snow melts "
    "slowly through the spring and early summer. Shepherds who bring their flocks to the upper meadows say "
    "that the water there is so cold that it makes your teeth ache, and so clear that you can count the "
    "pebbles on the bottom even where it is deep.",
    "Lower down, the stream is joined by a dozen smaller brooks, and by the time it reaches the first village "
    "it is wide enough to turn a mill wheel. The mill has stood on the same spot for more than three hundred "
    "years. It was rebuilt twice after floods, once after a fire, and once after the miller's youngest son "
    "decided to see what would happen if he removed a single wooden peg from the gear housing.",
    "Below the village the valley opens into farmland. In April the fields are green with young wheat, in "
    "July they are gold, and in October they are brown and bare, waiting for the plough. The farmers keep "
    "careful records of the river: how high it rose each winter, when the ice broke, which years the fish "
    "came back early and which years they did not come back at all.",
    "Halfway to the sea there is a town with a stone bridge of seven arches. Children race paper boats from "
    "one side to the other, and the old men who sit on the benches by the water keep a running tally of "
    "winners that nobody else is allowed to see. Every summer there is a festival with music, lanterns on the "
    "water, and a contest to catch the largest fish without a hook, which nobody has ever won.",
    "Past the town the river grows slow and brown. It winds through marshes full of reeds and herons, and "
    "the road that follows it gives up and turns away toward the hills. Only a narrow path continues, used by "
    "bird watchers, fishermen, and the occasional surveyor who comes to measure how far the marsh has spread "
    "since the last time anyone measured it.",
    "At the very end the river reaches the sea through a wide, shallow mouth. At low tide you can walk across "
    "the sand bars almost all the way to the other side, and at high tide the salt water pushes a mile "
    "upstream, so that the fish in the lower marsh never quite know whether they live in a river or in the "
    "ocean. The lighthouse keeper, who has lived there for forty years, says the river has a different voice "
    "every season, and that if you listen long enough it will tell you where it has been.",
    "In the winter the keeper's only company is a radio, a shelf of books he has read many times, and a cat "
    "that arrived one stormy night and never left. He writes letters to his sister in the city, describing "
    "the colour of the water each morning, the ships that pass far out on the horizon, and the storms that "
    "shake the windows of the lighthouse until the glass hums like a bell. She writes back about traffic, "
    "about her garden, and about the price of bread, and each of them thinks the other has the stranger life.",
    "When travellers ask the keeper what the river says, he smiles and tells them the same story every time. "
    "He says that long ago, before the mill and the bridge and the farms, the river was",
]
PROMPT = " ".join(PARAGRAPHS)
N_CTX = 1024
N_GENERATED = 32


def main(model: str) -> None:
    import llama_cpp
    import numpy as np
    from llama_cpp import Llama

    llm = Llama(model_path=model, n_ctx=N_CTX, n_threads=1, n_threads_batch=1, verbose=False)
    ids = llm.tokenize(PROMPT.encode("utf-8"), add_bos=True, special=False)
    n_vocab = llm.n_vocab()
    llm.reset()
    llm.eval(ids)
    out: list[int] = []
    for _ in range(N_GENERATED):
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(n_vocab,))
        tok = int(np.argmax(logits))
        out.append(tok)
        llm.eval([tok])
    doc = {
        "model": Path(model).name,
        "reference": f"llama.cpp via llama-cpp-python {llama_cpp.__version__} (AVX2 build); flash attention off, "
                     f"F16 KV cache, n_ctx {N_CTX}, n_batch/n_ubatch 512, 1 thread; BOS prepended; greedy = argmax "
                     f"of the last logits; {N_GENERATED} tokens, no stop at EOS",
        "command": "/work/llama-venv/bin/python tests/data/make_gemma3_long.py MODEL.gguf",
        "prompt": PROMPT,
        "prompt_ids": [int(i) for i in ids],
        "greedy_ids": out,
        "text": llm.detokenize(out).decode("utf-8", errors="replace"),
    }
    dest = Path(__file__).with_name("gemma3_long.json")
    dest.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{dest}: prompt {len(ids)} tokens, continuation {doc['text']!r}")


if __name__ == "__main__":
    main(sys.argv[1])
