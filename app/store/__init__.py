"""The history store: one SQLite file holding conversations, messages (with the model and
settings behind each reply), their search index, and the schema migrations."""

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
