"""Invented facts (no model knows them beforehand) and a question on each, for the RAG benchmark."""

from __future__ import annotations

FACTS = [
    ("The harbour of Kelstow was rebuilt in granite in 1874.", "When was the harbour of Kelstow rebuilt?", "1874"),
    ("The botanist Mirela Oduya named the orchid Stellaria vesper.", "Which orchid did Mirela Oduya name?",
     "vesper"),
    ("The canal of Brunvik links Lake Ostra with the Tessel sea.", "Which lake does the canal of Brunvik link?",
     "Ostra"),
    ("The Dunmere tramway runs 42 trams on weekdays.", "How many trams does the Dunmere tramway run on weekdays?",
     "42"),
    ("The national flower of Valdoria is the silver thistle.", "What is the national flower of Valdoria?", "thistle"),
    ("Pilot Anouk Brenner flew the glider Kestrel over the Alps.", "Which glider did Anouk Brenner fly?", "Kestrel"),
    ("The Harrowgate vineyard grows a grape called Emberleaf.", "Which grape does the Harrowgate vineyard grow?",
     "Emberleaf"),
    ("The radio telescope at Skellan has a dish 64 metres wide.", "How wide is the dish of the Skellan telescope?",
     "64"),
    ("The card game Tidewright was designed by Olu Adebayo.", "Who designed the card game Tidewright?", "Adebayo"),
    ("The cafe Copper Spoon is known for its saffron cake.", "What is the cafe Copper Spoon known for?", "saffron"),
    ("Mount Veyrac rises 2871 metres above the sea.", "How high is Mount Veyrac?", "2871"),
    ("The Lantern Hall opened with a concert called Northern Lights.", "Which concert opened the Lantern Hall?",
     "Northern Lights"),
    ("The data format Quillpack uses the file extension .qpk.", "Which file extension does Quillpack use?", ".qpk"),
    ("The town of Marrowby holds a kite festival every April.", "When does Marrowby hold its kite festival?",
     "April"),
    ("The ferry Morning Gull was built at the Ardent yard.", "Where was the ferry Morning Gull built?", "Ardent"),
    ("Doctor Sana Qureshi wrote the book Maps of Rain.", "Who wrote the book Maps of Rain?", "Qureshi"),
]


def document() -> str:
    return "\n\n".join(fact for fact, _, _ in FACTS)
