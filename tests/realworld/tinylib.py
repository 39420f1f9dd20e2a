"""Tiny stand-ins for what users download from a hub: built in code, offline."""

from __future__ import annotations

from typing import Any

WORDS = [
    "the",
    "a",
    "cat",
    "dog",
    "sat",
    "on",
    "mat",
    "hello",
    "world",
    "good",
    "bad",
    "movie",
    "was",
    "great",
    "awful",
]


def tiny_tokenizer() -> Any:
    """A word-level ``PreTrainedTokenizerFast`` (vocabulary of 20), no files."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3}
    vocab.update({word: i + 4 for i, word in enumerate(WORDS)})
    model = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    model.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=model, pad_token="[PAD]", unk_token="[UNK]")


def quiet_transformers() -> None:
    """transformers' config warnings about tiny vocabularies are noise here."""
    from transformers.utils import logging

    logging.set_verbosity_error()
