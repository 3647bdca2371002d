"""The history store: one SQLite file holding conversations, messages (with the model and
settings behind each reply), their search index, and the schema migrations.

sqlite_utils is imported here first, without numpy: it imports numpy (when installed) only to map
numpy's number types to column types when it makes a table from Python values, and Cove makes its
tables from Python types and stores vectors as bytes, so numpy (a tenth of a second to import)
would buy nothing in a `cove history` command. Where numpy is already imported, sqlite_utils gets it.
"""

import sys

if "sqlite_utils" not in sys.modules and "numpy" not in sys.modules:
    sys.modules["numpy"] = None  # type: ignore[assignment]  # `import numpy` raises ImportError meanwhile
    try:
        import sqlite_utils  # noqa: F401
    finally:
        del sys.modules["numpy"]

from app.store.database import DatabaseError, OpenedDatabase, close_database, open_database
from app.store.export import export_conversation
from app.store.history import Checkpointer, Conversation, ConversationNotFound, History, Message, MessageNotFound
from app.store.migrations import MIGRATIONS, Migration
from app.store.search import SearchHit, search_messages

__all__ = [
    "MIGRATIONS",
    "Checkpointer",
    "Conversation",
    "ConversationNotFound",
    "DatabaseError",
    "History",
    "Message",
    "MessageNotFound",
    "Migration",
    "OpenedDatabase",
    "SearchHit",
    "close_database",
    "export_conversation",
    "open_database",
    "search_messages",
]
