"""Incremental detokenization never splits a multi-byte character and emits every character once."""

from __future__ import annotations

from ovgenai_server.engine.api_process.detokenizer import SequenceText, detokenize_step

# A byte-level toy vocabulary: ids are bytes; decoding replaces incomplete UTF-8 with U+FFFD.
TEXT = "héllo 世界 🙂!"
IDS = list(TEXT.encode())


def decode_batch(batch):
    return [bytes(ids).decode("utf-8", errors="replace") for ids in batch]


def test_streaming_bytes_reassembles_text_without_replacement_characters():
    state = SequenceText()
    pieces = []
    for i, token in enumerate(IDS):
        [piece] = detokenize_step(decode_batch, [(state, [token], i == len(IDS) - 1)])
        assert "\ufffd" not in piece
        pieces.append(piece)
    assert "".join(pieces) == TEXT


def test_several_sequences_share_one_batch_call():
    calls = []

    def counting(batch):
        calls.append(len(batch))
        return decode_batch(batch)

    states = [SequenceText(), SequenceText()]
    out = detokenize_step(counting, [(states[0], list(b"ab"), False), (states[1], list(b"cd"), False)])
    assert out == ["ab", "cd"] and calls == [4]


def test_final_flush_emits_incomplete_tail():
    state = SequenceText()
    [piece] = detokenize_step(decode_batch, [(state, IDS[:2], True)])  # "h" + first byte of "é"
    assert piece == "h\ufffd"
