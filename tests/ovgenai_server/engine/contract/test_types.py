"""What crosses the engine seam (engine/contract/types.py): which process ends a request at its stop strings."""

from __future__ import annotations

from ovgenai_server.engine.contract.types import GenerationParams, TextPrompt, TokenPrompt, engine_ends_at_stops

TOKENS, IMAGES = TokenPrompt([1, 2]), TextPrompt("<ov_genai_image_0> hi", [1, 2], ())


def test_the_engine_stops_prompts_with_images_and_the_api_process_the_others():
    """A prompt's image tokens are counted as the engine ends it: the engine stops those; the API process ends the
    others, and cuts the text of all."""
    stops = GenerationParams(max_new_tokens=12, stop=("END",))
    assert engine_ends_at_stops(stops, IMAGES) and not engine_ends_at_stops(stops, TOKENS)
    assert not engine_ends_at_stops(GenerationParams(max_new_tokens=12), IMAGES)
