"""HTML's memory while it is read: a page of millions of small tags takes a few sections' worth, never its tree.
Under system/ for its time (seconds of parsing), not for any process it starts."""

from __future__ import annotations

import tracemalloc

import pytest

from ovgenai_services.gateway.ingestion.readers import load_pages


@pytest.mark.parametrize("element", ["<b></b>", "<p>ab</p>", "<i><u>c</u></i>"])
def test_eight_mebibytes_of_small_tags_take_a_few_mebibytes(tmp_path, element):
    # A tree builder keeps a Python object per element: BeautifulSoup took 360-510 MB for 4 MiB of such tags.
    path = tmp_path / "tags.html"
    path.write_text("<html><body>" + element * (8 * 2**20 // len(element)) + "</body></html>")
    tracemalloc.start()
    try:
        size = sum(len(page.page_content) for page in load_pages(path, "html"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 2**20, peak  # a few sections' worth, not the page's tree
    assert (size > 0) == (element != "<b></b>")  # the text is kept
