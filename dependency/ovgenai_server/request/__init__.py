"""A request on its way to the engine: its prompt (the template, images), its sampling and structured
output checked and mapped, then admitted and given its turn (admission, fair share)."""
