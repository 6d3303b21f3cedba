"""A link's Content-Encoding decoded within LINK_MAX_BYTES: a compression bomb stops at the limit, having produced
at most one byte past it; encodings without an output bound are refused."""

from __future__ import annotations

import gzip
import tracemalloc
import zlib

import pytest

from ovgenai_services.gateway.ingestion.decoding import BoundedDecoder, TooLarge, UnsupportedEncoding

LIMIT = 1 << 20
WIRE_BLOCK = 1 << 16


def gzip_of_zeros(size: int) -> bytes:
    """`size` zero bytes gzipped, built a block at a time (the bomb is never held decompressed)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(1 << 20)
    parts = [compressor.compress(block) for _ in range(size // len(block))]
    return b"".join([*parts, compressor.flush()])


def test_a_gzip_bomb_stops_at_the_limit_without_expanding():
    bomb = gzip_of_zeros(1 << 28)  # 256 MiB of zeros in about 256 KiB, 256 times the limit
    decoder = BoundedDecoder("gzip", LIMIT)
    produced = 0
    tracemalloc.start()
    try:
        with pytest.raises(TooLarge):
            for start in range(0, len(bomb), WIRE_BLOCK):
                produced += len(decoder.decode(bomb[start:start + WIRE_BLOCK]))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert produced <= LIMIT and decoder.size == LIMIT + 1
    assert peak < 4 * LIMIT  # one block's output at most, not the ~64 MiB a whole block expands to


@pytest.mark.parametrize(("encoding", "encode"), [
    ("gzip", gzip.compress), ("x-gzip", gzip.compress), ("deflate", zlib.compress),
    ("deflate", lambda data: zlib.compress(data)[2:-4]),  # raw deflate, as some servers send it
    ("", lambda data: data), ("identity", lambda data: data),
])
def test_encodings_within_the_limit_decode_whole(encoding, encode):
    page = b"<p>The Moonwick canal is 42 kilometres long.</p>" * 1000
    wire = encode(page)
    decoder = BoundedDecoder(encoding, LIMIT)
    assert b"".join(decoder.decode(wire[i:i + 100]) for i in range(0, len(wire), 100)) == page


def test_an_uncompressed_body_over_the_limit_is_too_large():
    decoder = BoundedDecoder("identity", 10)
    decoder.decode(b"x" * 10)
    with pytest.raises(TooLarge):
        decoder.decode(b"y")


@pytest.mark.parametrize("encoding", ["br", "zstd", "compress", "gzip, gzip", "deflate, gzip"])
def test_encodings_without_an_output_bound_or_stacked_are_refused(encoding):
    with pytest.raises(UnsupportedEncoding):
        BoundedDecoder(encoding, LIMIT)
