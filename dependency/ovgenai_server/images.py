"""Images in chat messages, decoded for a model that reads them (a VLM served with continuous batching).

Images come as data URLs (`data:image/png;base64,...`), the form OpenAI's API and the SDKs send a local image in.
The backend fetches nothing: an `http(s)` URL is refused with a 400 that says to send the image's data, so that a
request cannot make the server reach an address of the client's choosing. An image is checked before it is decoded:
its header's size against MAX_PIXELS (a small file can declare a huge image), the number per request against
MAX_IMAGES; anything Pillow cannot read is a 400 naming the part.
"""

from __future__ import annotations

import base64
import binascii
import io
import re
from dataclasses import dataclass

from ovgenai_common.errors import APIError, ErrorKind
from ovgenai_common.protocol import ChatMessage, ImagePart

from .engine.types import Image

MAX_IMAGES = 8
MAX_PIXELS = 4096 * 4096
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


def decode_image(ref: ImageRef) -> Image:
    from PIL import Image as PILImage
    from PIL import UnidentifiedImageError

    def invalid(message: str) -> APIError:
        return APIError(ErrorKind.INVALID_REQUEST, message, ref.param)

    match = _DATA_URL.match(ref.url)
    if match is None:
        if ref.url.lower().startswith(("http://", "https://")):
            raise invalid("Images are taken as data URLs (data:image/png;base64,...): the server fetches no URLs.")
        raise invalid("An image must be a data URL: data:image/<format>;base64,<data>.")
    try:
        raw = base64.b64decode(ref.url[match.end():], validate=True)
    except (binascii.Error, ValueError):
        raise invalid("The image's data is not valid base64.") from None
    try:
        with PILImage.open(io.BytesIO(raw)) as image:
            width, height = image.size  # from the header: nothing decoded yet
            if width * height > MAX_PIXELS:
                raise invalid(f"The image is {width}x{height} pixels; at most {MAX_PIXELS} pixels are taken.")
            rgb = image.convert("RGB")
    except APIError:
        raise
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, PILImage.DecompressionBombError) as error:
        raise invalid(f"The image cannot be read: {error}.") from None
    return Image(rgb.tobytes(), rgb.height, rgb.width)
