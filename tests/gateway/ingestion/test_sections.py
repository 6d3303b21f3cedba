"""Text cut into sections of bounded size as it is read: at a paragraph break in the section's second half, else a
line break, else a space, else anywhere; runs of blank lines become one paragraph break; nothing is lost."""

from __future__ import annotations

from ovgenai_services.gateway.ingestion.sections import Sections, text_sections


def feed(text: str, size: int):
    return (text[i:i + size] for i in range(0, len(text), size))


def test_sections_are_bounded_and_cut_at_breaks_and_lose_nothing():
    paragraphs = [f"Paragraph {i} tells of canal number {i}." for i in range(5000)]
    text = "\n\n".join(paragraphs)
    sections = list(text_sections(feed(text, 4096), 10_000))
    assert all(len(section) <= 10_000 for section in sections)
    assert [line for section in sections for line in section.split("\n\n")] == paragraphs


def test_a_line_without_breaks_is_cut_at_spaces_then_anywhere():
    words = " ".join(["canal"] * 10_000)
    sections = list(text_sections([words], 1000))
    assert all(len(s) <= 1000 for s in sections) and " ".join(sections) == words
    assert "".join(text_sections(["x" * 2500], 1000)) == "x" * 2500


def test_a_paragraph_break_in_the_first_half_gives_way_to_a_later_line_break():
    sections = Sections(20)
    sections.add("ab\n\ncdefghij\nklmnopqrstuvwxyz")
    first = next(sections.take())
    assert first == "ab\n\ncdefghij"  # cut after the line break at 13, not the paragraph break at 4


def test_blank_lines_collapse_and_empty_sections_are_dropped():
    assert list(text_sections(["one\n \n\t\n\ntwo"], 100)) == ["one\n\ntwo"]
    assert list(text_sections(["   ", "\n\n"], 100)) == []


def test_nothing_is_taken_before_a_section_is_full_unless_final():
    sections = Sections(100)
    sections.add("short")
    assert list(sections.take()) == []
    assert list(sections.take(final=True)) == ["short"]
