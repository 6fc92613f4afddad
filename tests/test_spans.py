"""Tagged spans (VAPOR): the tokens between two tags, for the tiny lab's character tokenizer and
for a BPE tokenizer trained here (no hub) whose merges glue tags to their neighbours."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from sdpo_kit.lab.model import build_tokenizer
from sdpo_kit.vapor.spans import find_char_span, find_span_token_indices, token_char_offsets

OPEN, CLOSE = "<answer>", "</answer>"


@pytest.fixture(scope="module")
def chars():
    return build_tokenizer()


@pytest.fixture(scope="module")
def bpe():
    """Byte-level BPE trained on tagged answers: merges such as '>1', '2</', 'answer>' appear."""
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    corpus = [f"so the sum is <answer>{n}</answer> done" for n in range(0, 400, 7)] * 20
    core.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return PreTrainedTokenizerFast(tokenizer_object=core)


# (text, expected content between the first complete pair, or None)
CASES = [
    ("<answer>9</answer>", "9"),
    ("I think <answer> 42 </answer>.", " 42 "),
    ("<answer>3</answer><answer>9</answer>", "3"),                  # repeated: the first complete pair
    ("</answer>7<answer>9</answer>", "9"),                          # a stray close tag first, then a pair
    ("</answer>9<answer>", None),                                   # wrong order: no close after the open
    ("<answer>9", None), ("9</answer>", None), ("9", None), ("", None),   # a tag missing
    ("<answer></answer>", None),                                    # empty content
    ("<answer><answer>5</answer>", "<answer>5"),                    # the first open tag counts
]


@pytest.mark.parametrize("text,content", CASES)
def test_char_span_edge_cases(text, content):
    span = find_char_span(text, OPEN, CLOSE)
    assert (None if span is None else text[span[0]:span[1]]) == content


@pytest.mark.parametrize("text,content", CASES)
def test_character_tokenizer_span_is_exactly_the_content(chars, text, content):
    """One token per character: the token range is the content's characters, no more."""
    span = find_span_token_indices(text, OPEN, CLOSE, chars)
    if content is None:
        assert span is None
    else:
        ids = chars(text, add_special_tokens=False)["input_ids"]
        assert chars.decode(ids[span.start:span.stop]) == content


@pytest.mark.parametrize("text,content", [c for c in CASES if c[1] is not None])
def test_bpe_span_covers_the_content_and_only_overlapping_tokens(bpe, text, content):
    """With BPE, tokens glued to a tag are included: the range's text contains the content, every
    token in it overlaps the content, and the tokens on either side do not."""
    enc = bpe(text, add_special_tokens=False, return_offsets_mapping=True)
    offsets = enc["offset_mapping"]
    span = find_span_token_indices(text, OPEN, CLOSE, bpe)
    c0, c1 = find_char_span(text, OPEN, CLOSE)
    assert offsets[span.start][0] <= c0 and offsets[span.stop - 1][1] >= c1
    assert all(s < c1 and e > c0 for s, e in offsets[span.start:span.stop])
    for k in (span.start - 1, span.stop):
        if 0 <= k < len(offsets):
            assert not (offsets[k][0] < c1 and offsets[k][1] > c0)


def test_bpe_merges_really_straddle_the_tags(bpe):
    """The trained BPE glues a tag to the answer somewhere, so the tests above see straddling tokens."""
    straddling = 0
    for n in range(0, 400, 7):
        text = f"so the sum is <answer>{n}</answer> done"
        offsets = bpe(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        c0, c1 = find_char_span(text, OPEN, CLOSE)
        straddling += any(s < c0 < e or s < c1 < e for s, e in offsets)
    assert straddling > 0


def test_generated_ids_offsets(chars, bpe):
    """token_char_offsets gives each generated token's characters in the decoded text (pieces
    that add up; a multi-byte character split over byte tokens goes to the token that completes
    it), and find_span_token_indices accepts them."""
    for tok, text in ((chars, "x <answer>12</answer>"), (bpe, "the sum is <answer>133</answer> done €")):
        ids = tok(text, add_special_tokens=False)["input_ids"]
        decoded, offsets = token_char_offsets(tok, ids)
        assert decoded == text and len(offsets) == len(ids)
        assert offsets[0][0] == 0 and offsets[-1][1] == len(text)
        assert all(a[1] == b[0] for a, b in zip(offsets, offsets[1:]))
        span = find_span_token_indices(decoded, OPEN, CLOSE, offsets=offsets)
        assert tok.decode(ids[span.start:span.stop]).count(text[text.index(">") + 1:text.index("</")]) == 1
    euro = bpe("€", add_special_tokens=False)["input_ids"]
    assert len(euro) == 3  # three byte tokens: the prefix fallback is exercised
    assert token_char_offsets(bpe, euro)[1] == [(0, 0), (0, 0), (0, 1)]


def test_bad_calls():
    with pytest.raises(ValueError, match="tags"):
        find_char_span("x", "", CLOSE)
    with pytest.raises(ValueError, match="tokenizer or"):
        find_span_token_indices("<answer>9</answer>", OPEN, CLOSE)
