"""Images in chat messages (request/images.py), without a model: each image's size read from its header, and a request's
images together within a pixel budget, before any of them is decoded."""

from __future__ import annotations

import base64
import io

import pytest

from ovgenai_common.errors import APIError
from ovgenai_server.request import images
from ovgenai_server.request.images import MAX_REQUEST_PIXELS, ImageRef, decoded


def ref(width: int, height: int, index: int = 0) -> ImageRef:
    from PIL import Image

    out = io.BytesIO()
    Image.new("1", (width, height)).save(out, format="PNG")  # a few kilobytes, whatever its size
    return ImageRef("data:image/png;base64," + base64.b64encode(out.getvalue()).decode(),
                    f"messages.0.content.{index}.image_url")


def test_images_within_the_budget_are_decoded_as_rgb_rows():
    [image] = decoded([ref(3, 2)])
    assert (image.width, image.height, len(image.data)) == (3, 2, 3 * 2 * 3)


def test_a_request_s_images_past_the_budget_are_refused_before_any_is_decoded(monkeypatch):
    """Eight images of 4096x4096 are 400 MB of pixels from about 0.6 MB of PNG."""
    converted: list[int] = []
    real = images._decoded
    monkeypatch.setattr(images, "_decoded", lambda r, image: converted.append(1) or real(r, image))
    side = 3000  # each within the per-image limit; the second crosses the request's budget
    with pytest.raises(APIError) as refused:
        decoded([ref(side, side, index) for index in (1, 2, 3)])
    assert refused.value.param == "messages.0.content.2.image_url" and str(MAX_REQUEST_PIXELS) in refused.value.message
    assert converted == []


def test_one_image_past_its_own_limit_is_refused_naming_its_size():
    with pytest.raises(APIError) as refused:
        decoded([ref(5000, 5000)])
    assert "5000x5000" in refused.value.message
