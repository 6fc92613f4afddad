"""VAPOR's real-model data on SmolLM2-135M-Instruct's own tokenizer: the preference spans of every pair
are found on its BPE tokens, and they hold the answer's digits."""

from sdpo_kit import make_task
from sdpo_kit.vapor.parts import preference_batch
from sdpo_kit.vapor.spans import find_span_token_indices

TAGS = ("<answer>", "</answer>")


def test_spans_of_chosen_and_rejected_on_the_real_tokenizer(real):
    """Each chosen / rejected text's span decodes to its tagged number (BPE tokens straddling a tag may add
    tag characters, never lose a digit); ``preference_batch`` finds both spans of every pair."""
    _, _, tok = real
    rows = make_task("vapor_word_problems", n_eval=30).splits()[1]
    for r in rows:
        for col in ("chosen", "rejected"):
            ids = tok(r[col], add_special_tokens=False).input_ids
            span = find_span_token_indices(r[col], *TAGS, tok)
            number = r[col].split("<answer>")[1].split("</answer>")[0]
            assert span is not None and number in tok.decode(ids[span.start:span.stop]), (r[col], span)
    batch = preference_batch(tok, [r["prompt"] for r in rows], [r["chosen"] for r in rows],
                             [r["rejected"] for r in rows], TAGS)
    assert batch.found.tolist() == [1] * len(rows)
    decoded = [tok.decode(batch.completion_ids[k][batch.span_mask[k].bool()]) for k in range(len(rows))]
    assert [d.strip() for d in decoded] == [r["answer"] for r in rows], "the chosen span is the right answer"
