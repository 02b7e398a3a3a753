"""pgsift: hybrid retrieval for RAG inside PostgreSQL.

Every ranking step is a SQL function in schema `sift`; this package calls
them (Client, AsyncClient), installs them (migrate), and makes the one call
that must leave the database, the hosted rerank (pgsift.rerankers).
"""

from importlib.metadata import PackageNotFoundError, version

from . import rerankers
from .client import Client
from .client_async import AsyncClient
from .errors import (
    CollectionExists,
    CollectionNotFound,
    DimensionMismatch,
    DocumentNotFound,
    EmbedderUnavailable,
    EvaluationUnavailable,
    GoldenSetExists,
    GoldenSetNotFound,
    ImmutableChunk,
    IncompatibleCollections,
    InvalidArgument,
    InvalidCursor,
    InvalidKnob,
    MigrationError,
    PermissionDenied,
    PgsiftError,
    ReadOnlyDatabase,
    RerankerNotAllowed,
    SectionNotFound,
    ServerUnavailable,
    SpaceIncomplete,
    SpaceNotFound,
    TenantError,
    UnknownLanguage,
)
from .migrate import install_script, migrate
from .migrate_async import migrate as amigrate
from .models import (
    Candidate,
    Chunk,
    Collection,
    Document,
    Embedder,
    Explanation,
    Hit,
    Knob,
    Page,
    ReembedReport,
    Reranked,
    RerankerConfig,
    ResolvedSection,
    SearchResult,
    Section,
    VectorSpace,
)

try:
    __version__ = version("pgsift")   # the one version source: pyproject.toml
except PackageNotFoundError:  # pragma: no cover - running from a checkout without installing
    __version__ = "0+unknown"

__all__ = [
    "AsyncClient", "Candidate", "Chunk", "Client", "Collection", "CollectionExists", "CollectionNotFound",
    "DimensionMismatch", "Document", "DocumentNotFound", "Embedder", "EmbedderUnavailable", "EvaluationUnavailable",
    "Explanation", "GoldenSetExists", "GoldenSetNotFound", "Hit", "ImmutableChunk", "IncompatibleCollections",
    "InvalidArgument", "InvalidCursor", "InvalidKnob", "Knob", "MigrationError", "Page", "PermissionDenied",
    "PgsiftError", "ReadOnlyDatabase", "ReembedReport", "Reranked", "RerankerConfig", "RerankerNotAllowed",
    "ResolvedSection", "SearchResult", "Section", "SectionNotFound", "ServerUnavailable", "SpaceIncomplete",
    "SpaceNotFound", "TenantError", "UnknownLanguage", "VectorSpace", "amigrate", "install_script", "migrate",
    "rerankers",
]
