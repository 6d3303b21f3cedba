"""A small document set of invented facts (so no model can know them beforehand) and questions about them."""

from __future__ import annotations

import re

FACTS = [
    ("The lighthouse of Varnholm was painted teal in 1931.", "What color was the lighthouse of Varnholm painted?",
     "teal"),
    ("The chemist Odile Marchetti discovered the compound zephyrine.", "Who discovered zephyrine?", "Marchetti"),
    ("The river Quillon flows into Lake Dravo.", "Into which lake does the river Quillon flow?", "Dravo"),
    ("The Brassmoor railway has exactly 17 stations.", "How many stations does the Brassmoor railway have?", "17"),
    ("The official bird of Estuvia is the crimson plover.", "What is the official bird of Estuvia?", "plover"),
    ("Captain Ilse Varga commanded the airship Meridian.", "Who commanded the airship Meridian?", "Varga"),
    ("The Pellworth orchard grows a pear variety called Silverbell.",
     "What pear variety does the Pellworth orchard grow?", "Silverbell"),
    ("The main telescope of the Tarn Observatory has a mirror 4.2 metres wide.",
     "How wide is the mirror of the Tarn Observatory telescope?", "4.2"),
    ("The board game Hexfall was invented by Amadou Keita.", "Who invented the board game Hexfall?", "Keita"),
    ("The bakery Crumb and Kettle is famous for its cardamom buns.", "What is the bakery Crumb and Kettle famous for?",
     "cardamom"),
    ("Mount Eskarra is 3412 metres tall.", "How tall is Mount Eskarra?", "3412"),
    ("The Gilded Finch theatre opened with a play named The Lantern Thief.",
     "Which play opened the Gilded Finch theatre?", "Lantern Thief"),
    ("The programming language Wrenlang uses the file extension .wrn.", "Which file extension does Wrenlang use?",
     ".wrn"),
    ("The village of Otterby holds a cheese-rolling race every June.",
     "When does Otterby hold its cheese-rolling race?", "June"),
    ("The ship Halcyon Star was built in the Kessel shipyard.", "Where was the ship Halcyon Star built?", "Kessel"),
    ("Professor Lin Haoran wrote the book Patterns of Tide.", "Who wrote the book Patterns of Tide?", "Lin Haoran"),
    ("The mascot of the Zorblat festival is a purple heron named Fitch.",
     "What is the name of the Zorblat festival mascot?", "Fitch"),
    ("The Copperline bridge is 880 metres long.", "How long is the Copperline bridge?", "880"),
    ("The perfume Nocturne Blue contains vetiver and bergamot.", "What does the perfume Nocturne Blue contain?",
     "vetiver"),
    ("The robot vacuum K-Nine runs for 95 minutes per charge.",
     "How long does the K-Nine robot vacuum run on one charge?", "95"),
    ("The Aldermere library holds 2.3 million books.", "How many books does the Aldermere library hold?",
     "2.3 million"),
    ("The football club Rovers of Tamsin play in green and gold shirts.",
     "What colors do the Rovers of Tamsin wear?", "green and gold"),
    ("Doctor Yuki Sato invented the frostless window coating.", "Who invented the frostless window coating?", "Sato"),
    ("The island of Palmera exports vanilla and coconut fibre.", "What does the island of Palmera export?", "vanilla"),
]

FILLER = [
    "Local historians have written about this several times, and the records are kept in the town archive.",
    "Guides mention it on tours, and the detail appears in most printed brochures of the region.",
    "It remains a popular topic of conversation among residents and visitors alike.",
]


# Words too common to show where an answer came from.
COMMON = {
    "about", "also", "been", "called", "does", "from", "have", "into", "named", "that", "their", "there", "these",
    "they", "this", "were", "what", "when", "where", "which", "while", "with", "would", "your",
}


def _words(text: str) -> set[str]:
    return {w.lower().strip(".-") for w in re.findall(r"[A-Za-z][A-Za-z0-9.'-]{3,}", text)}


def grounded(answer: str, context: str, question: str) -> bool:
    """Whether the answer repeats a word of the context that the question does not contain. The facts are invented,
    so no model knows them: such a word came from the retrieved text. Properties like this hold whatever the
    model's numerics; which name a model picks does not."""
    filler = _words(" ".join(FILLER))
    return bool((_words(answer) & _words(context)) - _words(question) - COMMON - filler)


def paragraph(index: int) -> str:
    fact = FACTS[index][0]
    return " ".join([fact, *FILLER[index % 3 :], *FILLER[: index % 3]])


def documents() -> dict[str, str]:
    """Three documents of eight facts each: a text file, a Markdown file and an HTML page."""
    txt = "\n\n".join(paragraph(i) for i in range(0, 8))
    md = "# Notes\n\n" + "\n\n".join(f"## Entry {i}\n\n{paragraph(i)}" for i in range(8, 16))
    html = "<html><head><title>Almanac</title></head><body>" + "".join(
        f"<h2>Entry {i}</h2><p>{paragraph(i)}</p>" for i in range(16, 24)
    ) + "</body></html>"
    return {"almanac.txt": txt, "notes.md": md, "almanac.html": html}


def source_of(index: int) -> str:
    return ["almanac.txt", "notes.md", "almanac.html"][index // 8]


def minimal_pdf(text: str) -> bytes:
    """A one-page PDF with one line of text (Helvetica), with a correct cross-reference table."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for offset in offsets:
        out += f"{offset:010d} 00000 n \n".encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)
