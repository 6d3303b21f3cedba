"""A fetched body's Content-Encoding, decoded with a ceiling on the output.

httpx decodes each network read whole, so a few kilobytes of zstd, brotli or nested gzip expand to gigabytes before
any size check sees them. Links are asked for `Accept-Encoding: identity`; a server that compresses anyway is read
raw and decoded here, by zlib with `max_length`, so no call produces more than the bytes still allowed. Encodings
whose decoders take no output bound (br, zstd) and stacked encodings are refused.
"""

from __future__ import annotations

import zlib

ACCEPT_ENCODING = "identity"
# zlib's wbits: a gzip header, a zlib header; deflate also arrives raw (no header) from some servers.
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


class TooLarge(Exception):
    """The decoded body passed its limit."""


class UnsupportedEncoding(Exception):
    """An encoding that cannot be decoded within a bound."""


class BoundedDecoder:
    """Feed raw body blocks, get decoded bytes; TooLarge as soon as the total would pass `limit`."""

    def __init__(self, content_encoding: str, limit: int):
        named = (encoding.strip().lower() for encoding in content_encoding.split(","))
        encodings = [encoding for encoding in named if encoding not in ("", "identity")]
        if len(encodings) > 1:
            raise UnsupportedEncoding(f"stacked content encodings ({', '.join(encodings)})")
        if encodings and encodings[0] not in _WBITS:
            raise UnsupportedEncoding(f"Content-Encoding '{encodings[0]}'")
        self.encoding = encodings[0] if encodings else None
        self.limit = limit
        self.size = 0
        self._zlib = zlib.decompressobj(_WBITS[self.encoding]) if self.encoding else None
        self._first = True

    def decode(self, data: bytes) -> bytes:
        room = self.limit - self.size
        if self._zlib is None:
            out = data
        else:
            if self._first and self.encoding == "deflate" and data:
                self._first = False
                try:
                    out = self._zlib.decompress(data, room + 1)
                except zlib.error:  # a raw deflate stream, without the zlib header
                    self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
                    out = self._zlib.decompress(data, room + 1)
            else:
                out = self._zlib.decompress(data, room + 1)  # at most one byte past the limit, never more
        self.size += len(out)
        if self.size > self.limit:
            raise TooLarge
        return out
