"""pgsift: hybrid retrieval for RAG inside PostgreSQL.

Every ranking step is a SQL function in schema `sift`; this package calls
them (Client, AsyncClient), installs them (migrate), and makes the one call
that must leave the database, the hosted rerank (pgsift.rerankers).
"""

from . import enrich, rerankers
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
    LimitExceeded,
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
    MaxSimScore,
    Page,
    ReembedReport,
    Reranked,
    RerankerConfig,
    ResolvedSection,
    SearchResult,
    Section,
    VectorSpace,
)
from .version import VERSION

__version__ = VERSION   # pgsift.version: the one source (pyproject.toml reads it too)

__all__ = [
    "AsyncClient",
    "Candidate",
    "Chunk",
    "Client",
    "Collection",
    "CollectionExists",
    "CollectionNotFound",
    "DimensionMismatch",
    "Document",
    "DocumentNotFound",
    "Embedder",
    "EmbedderUnavailable",
    "EvaluationUnavailable",
    "Explanation",
    "GoldenSetExists",
    "GoldenSetNotFound",
    "Hit",
    "ImmutableChunk",
    "IncompatibleCollections",
    "InvalidArgument",
    "InvalidCursor",
    "InvalidKnob",
    "Knob",
    "LimitExceeded",
    "MaxSimScore",
    "MigrationError",
    "Page",
    "PermissionDenied",
    "PgsiftError",
    "ReadOnlyDatabase",
    "ReembedReport",
    "Reranked",
    "RerankerConfig",
    "RerankerNotAllowed",
    "ResolvedSection",
    "SearchResult",
    "Section",
    "SectionNotFound",
    "ServerUnavailable",
    "SpaceIncomplete",
    "SpaceNotFound",
    "TenantError",
    "UnknownLanguage",
    "VectorSpace",
    "amigrate",
    "enrich",
    "install_script",
    "migrate",
    "rerankers",
]
