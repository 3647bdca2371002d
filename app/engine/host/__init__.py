"""The engine host process: every module that imports llama_cpp lives here, and runs only in the
host (`python -m app.engine.host.main`, one process per loaded model). The parent side of the
engine (client, process, protocol, generation) is in app/engine/ and never loads native code;
tests/test_layering.py fails if a module outside this package imports llama_cpp."""
