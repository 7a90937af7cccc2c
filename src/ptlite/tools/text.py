"""BERT's WordPiece tokenization, for text models' inputs on the device (no transformers, no tokenizers package):
`WordPiece.from_vocab(path)` reads a `vocab.txt` (a token a line, its id the line number) and `encode` turns
sentences into the `input_ids` and `attention_mask` arrays a BERT-style encoder takes.

What it does, as Hugging Face's BertTokenizer does for uncased models: control characters dropped and whitespace
normalised; CJK ideographs split apart; lowercased and accents stripped (NFD, combining marks dropped); split on
whitespace and on every punctuation character; each word then matched greedily, longest prefix first, against the
vocabulary, continuations spelled "##piece" ([UNK] for a word that cannot be spelled, or past 100 characters).
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MAX_WORD = 100  # longer words are [UNK], as BertTokenizer does


@dataclass
class Encoding:
    """A batch of token ids (int64, [batch, length], padded with the [PAD] id) and its mask (1 for tokens)."""

    input_ids: np.ndarray
    attention_mask: np.ndarray


class WordPiece:
    """An uncased WordPiece tokenizer over a vocabulary (token -> id)."""

    def __init__(self, vocab: dict[str, int], lowercase: bool = True) -> None:
        for special in ("[CLS]", "[SEP]", "[PAD]", "[UNK]"):
            if special not in vocab:
                raise ValueError(f"the vocabulary has no {special} token: not a BERT WordPiece vocabulary")
        self.vocab = vocab
        self.lowercase = lowercase
        self.cls, self.sep, self.pad, self.unk = (vocab[t] for t in ("[CLS]", "[SEP]", "[PAD]", "[UNK]"))

    @classmethod
    def from_vocab(cls, path: str | os.PathLike, lowercase: bool = True) -> WordPiece:
        """Read a vocab.txt: one token a line, in id order."""
        with open(path, encoding="utf-8") as f:
            tokens = [line.rstrip("\n") for line in f]
        return cls({token: i for i, token in enumerate(tokens) if token}, lowercase)

    def tokenize(self, text: str) -> list[str]:
        """The WordPiece tokens of one text, without [CLS] and [SEP]."""
        pieces: list[str] = []
        for word in _words(text, self.lowercase):
            pieces += self._word_pieces(word)
        return pieces

    def _word_pieces(self, word: str) -> list[str]:
        if len(word) > MAX_WORD:
            return ["[UNK]"]
        pieces, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.vocab:
                    break
                end -= 1
            if end == start:
                return ["[UNK]"]
            pieces.append(piece)
            start = end
        return pieces

    def encode(self, texts: Sequence[str] | str, max_length: int = 256, pad_to: int | None = None) -> Encoding:
        """ids and mask of a batch of texts: [CLS] tokens [SEP], each cut to max_length tokens in all, padded to the
        longest (or to `pad_to`, for a model captured with a fixed length)."""
        if isinstance(texts, str):
            texts = [texts]
        if max_length < 2:
            raise ValueError(f"max_length {max_length}: a sequence holds [CLS] and [SEP] at least")
        rows = [[self.cls, *(self.vocab.get(p, self.unk) for p in self.tokenize(t))][:max_length - 1] + [self.sep]
                for t in texts]
        length = max((len(r) for r in rows), default=0) if pad_to is None else pad_to
        if any(len(r) > length for r in rows):
            raise ValueError(f"a text is {max(len(r) for r in rows)} tokens, past pad_to={length}; raise pad_to or "
                             "lower max_length")
        ids = np.full((len(rows), length), self.pad, np.int64)
        mask = np.zeros((len(rows), length), np.int64)
        for i, row in enumerate(rows):
            ids[i, :len(row)] = row
            mask[i, :len(row)] = 1
        return Encoding(ids, mask)


def _words(text: str, lowercase: bool) -> list[str]:
    """BertTokenizer's basic tokenization: cleaned, CJK split, lowercased without accents, split at whitespace and
    at each punctuation character."""
    cleaned = []
    for ch in text:
        code = ord(ch)
        if code == 0 or code == 0xFFFD or _is_control(ch):
            continue
        if _is_cjk(code):
            cleaned += [" ", ch, " "]
        else:
            cleaned.append(" " if _is_whitespace(ch) else ch)
    words = []
    for token in "".join(cleaned).split():
        if lowercase:
            token = "".join(c for c in unicodedata.normalize("NFD", token.lower())
                            if unicodedata.category(c) != "Mn")
        current = ""
        for ch in token:
            if _is_punctuation(ch):
                if current:
                    words.append(current)
                words.append(ch)
                current = ""
            else:
                current += ch
        if current:
            words.append(current)
    return words


def _is_whitespace(ch: str) -> bool:
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def _is_control(ch: str) -> bool:
    return ch not in "\t\n\r" and unicodedata.category(ch) in ("Cc", "Cf")


def _is_punctuation(ch: str) -> bool:
    code = ord(ch)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(code: int) -> bool:
    return (0x4E00 <= code <= 0x9FFF or 0x3400 <= code <= 0x4DBF or 0x20000 <= code <= 0x2A6DF
            or 0x2A700 <= code <= 0x2B73F or 0x2B740 <= code <= 0x2B81F or 0x2B820 <= code <= 0x2CEAF
            or 0xF900 <= code <= 0xFAFF or 0x2F800 <= code <= 0x2FA1F)
