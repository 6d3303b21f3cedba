"""An upload's name (its base name only, never a path; a long one keeps its extension), its kind by extension (else
by its content type), and its content hash."""

from __future__ import annotations

import hashlib

import pytest

from ovgenai_common.errors import APIError
from ovgenai_services.gateway.ingestion.files import MAX_NAME, file_hash, kind_of, safe_name, suffix_of, text_hash


@pytest.mark.parametrize(("given", "name"), [
    ("report.pdf", "report.pdf"),
    ("../../etc/passwd", "passwd"),
    ("C:\\Users\\me\\notes.txt", "notes.txt"),
    ("  spaced.md  ", "spaced.md"),
    ("folder/sub/page.html", "page.html"),
])
def test_a_name_is_the_base_name_whatever_path_came_with_it(given, name):
    assert safe_name(given) == name


@pytest.mark.parametrize("given", [None, "", "   ", ".", "..", "a/.."])
def test_a_file_without_a_name_is_refused(given):
    with pytest.raises(APIError) as refused:
        safe_name(given)
    assert refused.value.status == 400 and refused.value.param == "files"


def test_a_long_name_keeps_its_extension():
    name = safe_name("x" * 400 + ".markdown")
    assert len(name) == MAX_NAME and name.endswith(".markdown")
    assert safe_name("y" * 300) == "y" * MAX_NAME


@pytest.mark.parametrize(("name", "kind"), [("a.txt", "text"), ("a.MD", "markdown"), ("a.markdown", "markdown"),
                                            ("a.htm", "html"), ("a.HTML", "html"), ("a.pdf", "pdf"),
                                            ("a.docx", "docx"), ("a.PPTX", "pptx"), ("a.xlsx", "xlsx"),
                                            ("a.csv", "csv"), ("a.json", "json")])
def test_the_kind_is_the_extensions(name, kind):
    assert kind_of(name, "application/octet-stream") == kind
    assert kind_of("spooled" + suffix_of(kind)) == kind


@pytest.mark.parametrize(("content_type", "kind"), [
    ("application/vnd.openxmlformats-officedocument.wordprocessingml.document", "docx"),
    ("application/vnd.openxmlformats-officedocument.presentationml.presentation", "pptx"),
    ("application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", "xlsx"),
    ("text/csv; charset=utf-8", "csv"), ("application/json", "json"), ("TEXT/PLAIN", "text"),
])
def test_a_name_without_a_known_extension_is_read_as_its_content_type_says(content_type, kind):
    assert kind_of("export", content_type) == kind
    assert kind_of("notes.csv", "text/plain") == "csv"  # the extension first


def test_an_unsupported_kind_is_refused_naming_the_supported_ones():
    with pytest.raises(APIError) as refused:
        kind_of("slides.key", "application/octet-stream")
    message = refused.value.message
    assert refused.value.status == 400 and ".pdf" in message and ".docx" in message and "slides.key" in message


def test_hashes_are_sha256_of_the_content(tmp_path):
    path = tmp_path / "big.bin"
    content = b"canal " * 400_000  # past one read block
    path.write_bytes(content)
    assert file_hash(path) == hashlib.sha256(content).hexdigest()
    assert text_hash("café") == hashlib.sha256("café".encode()).hexdigest()
