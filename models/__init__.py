"""Everything about model files, Qt-free: GGUF reading and validation, the local library, the starter model."""
