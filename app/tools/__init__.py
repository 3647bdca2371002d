"""Tool calls: tool definitions and tool_choice read from API requests (spec), which format a
model's chat template calls tools in (families), the grammar that keeps a call valid (grammar),
reading calls out of a reply (parsers) and the messages a template without tools is given
(generic). Qt-free, and never loads llama.cpp's library: the engine host and the API server
both use it."""
