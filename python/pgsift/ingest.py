"""Turn files into pgsift Documents: a folder of .md/.txt files, or a JSONL of chunks.

Two strategies for Markdown. `flat` (the default) cuts at headings, then at
paragraph boundaries into chunks of at most `max_words` words. `hierarchical`
keeps the document's structure: its sections (the heading tree) are written
with it and each chunk is an exact slice of one section, of about
`target_tokens` tokens of the embedder's own tokenizer (pgsift.chunking), so
parent_return and neighbours can give back a section or the text around a
hit. Either way each chunk carries a context header ("Title > Section") so a
chunk read alone still says where it comes from. Chunks without an embedding
are embedded with the given embedder, in batches.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .chunking import LocalTokenizer, TokenCounter, chunk_hierarchical
from .errors import EmbedderUnavailable, InvalidArgument
from .languages import detect
from .models import Chunk, Document, Embedder, Section, embedding_text

Progress = Callable[[int, int], None]   # (chunks embedded so far, chunks to embed)

_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
SUFFIXES = (".md", ".markdown", ".txt")
STRATEGIES = ("flat", "hierarchical")


@dataclass
class TextChunk:
    context: str | None
    content: str
    token_count: int | None = None
    section: int | None = None


def chunk_structured(text: str, title: str, counter: TokenCounter,
                     target_tokens: int = 128) -> tuple[list[Section], list[TextChunk]]:
    """The hierarchical strategy: the document's sections and its passages, each an exact
    slice of the text (a passage of whitespace alone, possible only in a blank text, is left out)."""
    structured = chunk_hierarchical(text, counter, target_tokens=target_tokens,
                                    max_tokens=max(256, target_tokens))
    chunks = [TextChunk(structured.context(p.section, title), p.text, p.token_count, p.section)
              for p in structured.passages if p.text.strip()]
    return structured.sections, chunks


def _split_paragraphs(lines: list[str]) -> list[str]:
    paragraphs: list[str] = []
    current: list[str] = []
    fenced = False
    for line in lines:
        if line.strip().startswith("```"):
            fenced = not fenced
        if not line.strip() and not fenced:
            if current:
                paragraphs.append("\n".join(current).strip())
                current = []
        else:
            current.append(line)
    if current:
        paragraphs.append("\n".join(current).strip())
    return [p for p in paragraphs if p]


def chunk_markdown(text: str, title: str, max_words: int = 180) -> list[TextChunk]:
    """Sections by heading, then paragraphs packed up to max_words (a longer paragraph
    is split by words)."""
    sections: list[tuple[list[str], list[str]]] = [([], [])]
    path: list[str] = []
    fenced = False
    # HTML comments are notes to the renderer (or to tests), not text a reader sees.
    for line in _COMMENT.sub("", text).splitlines():
        if line.strip().startswith("```"):
            fenced = not fenced
        m = None if fenced else _HEADING.match(line)
        if m:
            level = len(m.group(1))
            path = [*path[: level - 1], m.group(2)]
            sections.append((list(path), []))
        else:
            sections[-1][1].append(line)

    chunks: list[TextChunk] = []
    for heading_path, body in sections:
        context = " > ".join([title, *[h for h in heading_path if h != title]])
        buf: list[str] = []
        size = 0
        for para in _split_paragraphs(body):
            words = para.split()
            while len(words) > max_words:  # a paragraph longer than a chunk
                if buf:
                    chunks.append(TextChunk(context, "\n\n".join(buf)))
                    buf, size = [], 0
                chunks.append(TextChunk(context, " ".join(words[:max_words])))
                words = words[max_words:]
                para = " ".join(words)
            if size + len(words) > max_words and buf:
                chunks.append(TextChunk(context, "\n\n".join(buf)))
                buf, size = [], 0
            if words:
                buf.append(para)
                size += len(words)
        if buf:
            chunks.append(TextChunk(context, "\n\n".join(buf)))
    return chunks


def _tokenizer_if_installed() -> TokenCounter | None:
    try:
        return LocalTokenizer()
    except EmbedderUnavailable:
        return None


def _title_of(text: str, path: Path) -> str:
    for line in text.splitlines():
        m = _HEADING.match(line)
        if m:
            return m.group(2)
    return path.stem.replace("-", " ").replace("_", " ")


EMBED_STEP = 32   # texts per embedder call (the local embedder's batch): the progress callback's grain


def _embed_texts(embedder: Embedder, texts: list[str], progress: Progress | None) -> list[Any]:
    """Vectors for texts, EMBED_STEP at a time so a caller can show progress (embedding is
    most of an ingest's time on the CPU): progress(0, total) before the first call, then
    after each. Texts go longest first, so each call pads its batch little (the order the
    vectors come back in is the texts')."""
    if progress is not None:
        progress(0, len(texts))
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    vectors: list[Any] = [None] * len(texts)
    for start in range(0, len(order), EMBED_STEP):
        step = order[start:start + EMBED_STEP]
        for i, vector in zip(step, embedder.embed([texts[i] for i in step]), strict=True):
            vectors[i] = vector
        if progress is not None:
            progress(min(start + EMBED_STEP, len(texts)), len(texts))
    return vectors


def _embed_all(pending: list[tuple[Document, list[TextChunk]]], embedder: Embedder | None,
               progress: Progress | None = None, embed: bool = True) -> list[Document]:
    texts = [embedding_text(c.context, c.content)
             for _, chunks in pending for c in chunks] if embed else []
    if texts and embedder is None:
        raise InvalidArgument("these chunks have no embeddings and no embedder was given "
                              "(pip install 'pgsift[embed]' for the local one)")
    vectors = iter(_embed_texts(embedder, texts, progress) if texts and embedder is not None else [])
    for doc, chunks in pending:
        doc.chunks = [Chunk(content=c.content, context=c.context, embedding=next(vectors) if embed else None,
                            token_count=c.token_count, section=c.section) for c in chunks]
    return [doc for doc, _ in pending]


def documents_from_folder(folder: Path, embedder: Embedder | None, max_words: int = 180,
                          root: Path | None = None, *, strategy: str = "flat", target_tokens: int = 128,
                          counter: TokenCounter | None = None, detect_language: bool = False,
                          progress: Progress | None = None, embed: bool = True) -> list[Document]:
    """Every .md/.txt file under `folder` (or the file itself), chunked and embedded. With the
    hierarchical strategy sizes are counted by `counter` (default: the local embedder's tokenizer);
    `detect_language` sets each document's language (pgsift.languages, offline); `progress(done,
    total)` is called as chunks are embedded (first with done 0); `embed=False` leaves the chunks
    without vectors (for a dry run, or enrichment, which embeds them itself)."""
    if strategy not in STRATEGIES:
        raise InvalidArgument(f"chunking strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
    if counter is None:
        counter = LocalTokenizer() if strategy == "hierarchical" else _tokenizer_if_installed()
    folder = Path(folder)
    files = [folder] if folder.is_file() else sorted(
        p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES)
    root = root or (folder.parent if folder.is_file() else folder)
    pending = []
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        title = _title_of(text, path)
        sections: list[Section] = []
        if counter is not None and strategy == "hierarchical":
            # HTML comments are notes to the renderer, not text: the document is the rest.
            sections, chunks = chunk_structured(_COMMENT.sub("", text), title, counter, target_tokens)
        else:
            chunks = chunk_markdown(text, title, max_words=max_words)
            if counter is not None:   # sizes for evaluation's token counts
                for c in chunks:
                    c.token_count = counter.count(c.content)
        if chunks:
            uri = path.relative_to(root).as_posix() if path.is_relative_to(root) else path.as_posix()
            pending.append((Document(source_uri=uri, title=title, chunks=[], sections=sections,
                                     language=detect(text) if detect_language else None,
                                     metadata={"path": uri, "suffix": path.suffix.lower()}), chunks))
    return _embed_all(pending, embedder, progress, embed)


def documents_from_jsonl(path: Path, embedder: Embedder | None, progress: Progress | None = None,
                         embed: bool = True) -> list[Document]:
    """One chunk per line: {"source_uri", "content", optional "title", "language", "context",
    "embedding", "metadata", "token_count"}; lines of one source_uri form a document,
    in file order. Chunks without an embedding are embedded (not with `embed=False`)."""
    docs: dict[str, Document] = {}
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            uri, content = row["source_uri"], row["content"]
        except RecursionError as exc:   # Python's parser recurses once a level
            raise InvalidArgument(f"{path}:{n}: nested too deep to parse") from exc
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise InvalidArgument(f"{path}:{n}: expected a JSON object with source_uri and content") from exc
        doc = docs.setdefault(uri, Document(source_uri=uri, title=row.get("title"), chunks=[],
                                            language=row.get("language"), metadata=row.get("metadata") or {}))
        doc.chunks.append(Chunk(content=content, context=row.get("context"),
                                embedding=row.get("embedding"), token_count=row.get("token_count")))
    missing = [(d, c) for d in docs.values() for c in d.chunks if c.embedding is None]
    if missing and embed:
        if embedder is None:
            raise InvalidArgument(f"{path}: chunks without 'embedding' need an embedder")
        vectors = _embed_texts(embedder, [embedding_text(c.context, c.content)
                                          for _, c in missing], progress)
        for (_, chunk), vec in zip(missing, vectors, strict=True):
            chunk.embedding = vec
    return list(docs.values())


def documents_from_path(path: Path, embedder: Embedder | None, max_words: int = 180, *,
                        strategy: str = "flat", target_tokens: int = 128,
                        detect_language: bool = False, progress: Progress | None = None,
                        embed: bool = True) -> list[Document]:
    """A .jsonl of chunks (documents_from_jsonl), else a folder or file of .md/.txt
    (documents_from_folder)."""
    path = Path(path)
    if not path.exists():
        raise InvalidArgument(f"{path} does not exist")
    if path.is_file() and path.suffix.lower() == ".jsonl":
        if strategy != "flat":
            raise InvalidArgument(f"{path}: a JSONL carries its own chunks; --chunking applies to .md/.txt files")
        return documents_from_jsonl(path, embedder, progress, embed=embed)
    return documents_from_folder(path, embedder, max_words=max_words, strategy=strategy,
                                 target_tokens=target_tokens, detect_language=detect_language,
                                 progress=progress, embed=embed)

