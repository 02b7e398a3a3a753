"""pgsift: hybrid retrieval for RAG inside PostgreSQL.

Every ranking step is a SQL function in schema `sift`; this package calls
them (Client), installs them (migrate), and runs the embedded server.
"""

from . import rerank
from .client import Client, Embedder
from .errors import (
    CollectionExists,
    CollectionNotFound,
    DimensionMismatch,
    DocumentNotFound,
    EmbedderUnavailable,
    IncompatibleCollections,
    InvalidArgument,
    InvalidKnob,
    MigrationError,
    PgsiftError,
    ServerUnavailable,
    UnknownLanguage,
)
from .migrate import install_script, migrate
from .models import Candidate, Chunk, Collection, Document, Hit, SearchResult

__version__ = "0.1.0"

__all__ = [
    "Candidate", "Chunk", "Client", "Collection", "CollectionExists", "CollectionNotFound",
    "DimensionMismatch", "Document", "DocumentNotFound", "Embedder", "EmbedderUnavailable", "Hit", "IncompatibleCollections",
    "InvalidArgument", "InvalidKnob", "MigrationError", "PgsiftError", "SearchResult",
    "ServerUnavailable", "UnknownLanguage", "install_script", "migrate", "rerank",
]
