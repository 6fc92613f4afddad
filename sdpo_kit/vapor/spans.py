"""Tagged spans: which tokens of a completion lie between two tags (VAPOR's verifiable and
preference spans, e.g. the answer inside ``<answer>...</answer>``).

    find_span_token_indices(text, open_tag, close_tag, tokenizer)            -> range | None
    find_span_token_indices(text, open_tag, close_tag, offsets=offsets)      -> range | None
    token_char_offsets(tokenizer, token_ids)                                 -> (text, offsets)

The span is found in characters first (the first ``open_tag`` and the first ``close_tag`` after
it: the first complete pair), then mapped to the tokens whose characters overlap it. A token
that straddles a tag boundary (BPE merges ``">9"`` or ``"9</"`` into one token) is included:
its log-prob carries the content's character, and leaving it out would lose the span's
content entirely when the whole answer shares a token with a tag. So the token range can hold a
few tag characters at its ends, never less than the content.

Left out on purpose: nested or overlapping tag pairs (the first complete pair wins) and
case-insensitive tags.
"""

from __future__ import annotations

from collections.abc import Sequence


def find_char_span(text: str, open_tag: str, close_tag: str) -> tuple[int, int] | None:
    """(start, end) of the characters strictly between the first ``open_tag`` and the first
    ``close_tag`` after it; None when a tag is missing, no close tag follows the open tag (it
    comes first, or not at all), or nothing lies between them."""
    if not open_tag or not close_tag:
        raise ValueError(f"tags must be non-empty strings, got {open_tag!r} and {close_tag!r}")
    i = text.find(open_tag)
    if i < 0:
        return None
    start = i + len(open_tag)
    end = text.find(close_tag, start)
    if end < 0 or end == start:
        return None
    return start, end


def token_char_offsets(tokenizer, token_ids: Sequence[int]) -> tuple[str, list[tuple[int, int]]]:
    """The decoded text of ``token_ids`` and each token's (start, end) characters in it.

    For generated ids, which need not be what tokenizing their text would give. Each token is
    decoded alone when the pieces add up to the whole decode (character and most BPE
    tokenizers); otherwise from growing prefixes (a token that is part of a multi-byte
    character then gets an empty range and joins the token that completes it)."""
    ids = [int(t) for t in token_ids]

    def decode(x):
        return tokenizer.decode(x, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    text = decode(ids)
    pieces = [decode([t]) for t in ids]
    if "".join(pieces) == text:
        ends = [sum(map(len, pieces[:k + 1])) for k in range(len(pieces))]
    else:  # growing prefixes; a partial character decodes to U+FFFD until its last byte arrives
        ends, prev = [], 0
        for k in range(len(ids)):
            prefix = decode(ids[:k + 1]).rstrip("\ufffd")
            prev = len(prefix) if len(prefix) >= prev and text.startswith(prefix) else prev
            ends.append(prev)
    return text, list(zip([0, *ends[:-1]], ends))


def find_span_token_indices(text: str, open_tag: str, close_tag: str, tokenizer=None, *,
                            offsets: Sequence[tuple[int, int]] | None = None) -> range | None:
    """The token index range covering the characters strictly between the tags, or None.

    Give either ``tokenizer`` (``text`` is tokenized with its character offsets; a fast
    tokenizer) or ``offsets``: each token's (start, end) characters in ``text``, e.g. from
    ``token_char_offsets`` for generated ids. Tokens overlapping the content are included, the
    ones straddling a tag boundary too (module docstring). None when a tag is missing, the close
    tag comes first, or the content is empty (the first complete pair is used)."""
    chars = find_char_span(text, open_tag, close_tag)
    if chars is None:
        return None
    if offsets is None:
        if tokenizer is None:
            raise ValueError("give a tokenizer or the tokens' character offsets")
        offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    c0, c1 = chars
    hits = [k for k, (s, e) in enumerate(offsets) if e > s and s < c1 and e > c0]
    return range(hits[0], hits[-1] + 1) if hits else None
