"""Tools and reasoning: what a request's tools ask of the template and the engine, and a chat answer's text
read into reasoning, content and tool calls."""
