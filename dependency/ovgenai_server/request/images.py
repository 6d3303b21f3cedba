"""Images in chat messages, decoded for a model that reads them (a VLM served with continuous batching).

Images come as data URLs (`data:image/png;base64,...`), the form OpenAI's API and the SDKs send a local image in.
The backend fetches nothing: an `http(s)` URL is refused with a 400 that says to send the image's data, so that a
request cannot make the server reach an address of the client's choosing. An image is checked before it is decoded:
its header's size against MAX_PIXELS, and all of a request's against MAX_REQUEST_PIXELS (a small file can declare
a huge image), the number per request against MAX_IMAGES; anything Pillow cannot read is a 400 naming the part.
"""

from __future__ import annotations

import base64
import binascii
import io
import re
from dataclasses import dataclass
from typing import Any

from ovgenai_common.errors import APIError, ErrorKind

from ..api.protocol import ChatMessage, ImagePart
from ..engine.contract.types import Image

MAX_IMAGES = 8
MAX_PIXELS = 4096 * 4096
# All of a request's images together: 50 MB of RGB pixels at most, whatever their files' size.
MAX_REQUEST_PIXELS = MAX_PIXELS
_DATA_URL = re.compile(r"data:image/[\w.+-]+;base64,", re.IGNORECASE)


def image_tag(index: int) -> str:
    """openvino-genai's model-independent placeholder: the image's tokens go where it stands in the prompt."""
    return f"<ov_genai_image_{index}>"


@dataclass(frozen=True)
class ImageRef:
    url: str
    param: str


def image_refs(messages: list[ChatMessage]) -> list[ImageRef]:
    refs = [
        ImageRef(part.image_url.url, f"messages.{m}.content.{p}.image_url")
        for m, message in enumerate(messages)
        for p, part in enumerate(message.content if isinstance(message.content, list) else [])
        if isinstance(part, ImagePart)
    ]
    if len(refs) > MAX_IMAGES:
        raise APIError(ErrorKind.INVALID_REQUEST, f"At most {MAX_IMAGES} images per request, got {len(refs)}.",
                       refs[MAX_IMAGES].param)
    return refs


def decoded(refs: list[ImageRef]) -> list[Image]:
    """The images, each read from its header first: every one within MAX_PIXELS, and all of them together within
    MAX_REQUEST_PIXELS, before any is decoded (a small file can declare a huge image)."""
    opened = [_opened(ref) for ref in refs]
    total = 0
    for ref, (image, _raw) in zip(refs, opened, strict=True):
        width, height = image.size
        total += width * height
        if total > MAX_REQUEST_PIXELS:
            raise APIError(ErrorKind.INVALID_REQUEST, f"The request's images come to {total} pixels by this one; at "
                           f"most {MAX_REQUEST_PIXELS} are taken per request.", ref.param)
    return [_decoded(ref, image) for ref, (image, _raw) in zip(refs, opened, strict=True)]


def _opened(ref: ImageRef) -> tuple[Any, bytes]:
    """The image opened (its header read, nothing decoded) and its bytes; a 400 naming the part otherwise."""
    from PIL import Image as PILImage
    from PIL import UnidentifiedImageError

    match = _DATA_URL.match(ref.url)
    if match is None:
        if ref.url.lower().startswith(("http://", "https://")):
            raise _invalid(ref, "Images are taken as data URLs (data:image/png;base64,...): the server fetches no "
                                "URLs.")
        raise _invalid(ref, "An image must be a data URL: data:image/<format>;base64,<data>.")
    try:
        raw = base64.b64decode(ref.url[match.end():], validate=True)
    except (binascii.Error, ValueError):
        raise _invalid(ref, "The image's data is not valid base64.") from None
    try:
        image = PILImage.open(io.BytesIO(raw))
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, PILImage.DecompressionBombError) as error:
        raise _invalid(ref, f"The image cannot be read: {error}.") from None
    width, height = image.size  # from the header: nothing decoded yet
    if width * height > MAX_PIXELS:
        raise _invalid(ref, f"The image is {width}x{height} pixels; at most {MAX_PIXELS} pixels are taken.")
    return image, raw


def _decoded(ref: ImageRef, image: Any) -> Image:
    from PIL import Image as PILImage

    try:
        with image:
            rgb = image.convert("RGB")
    except (OSError, ValueError, SyntaxError, PILImage.DecompressionBombError) as error:
        raise _invalid(ref, f"The image cannot be read: {error}.") from None
    return Image(rgb.tobytes(), rgb.height, rgb.width)


def _invalid(ref: ImageRef, message: str) -> APIError:
    return APIError(ErrorKind.INVALID_REQUEST, message, ref.param)
