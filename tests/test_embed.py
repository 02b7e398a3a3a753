"""The local embedder (all-MiniLM-L6-v2 from its registry package, offline) and its numpy twin,
which the command line embeds questions with (and its tests ingest with, so they load no torch)."""

from __future__ import annotations

import numpy as np
import pytest
from pgsift.embed import LocalEmbedder, NumpyMiniLM


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    return LocalEmbedder()


def test_local_embedder_loads_offline_and_embeds_meaningfully(embedder):
    vecs = embedder.embed(["How do refunds work?", "Refunds are paid within 14 days.",
                           "The cat sat on the mat."])
    assert vecs.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert vecs[0] @ vecs[1] > vecs[0] @ vecs[2] + 0.2


def test_the_numpy_model_gives_the_torch_models_vectors(embedder):
    """The CLI embeds questions with NumpyMiniLM and ingests with LocalEmbedder: their vectors
    must agree, for short, long (truncated at 256 tokens), empty and odd texts, batched with
    padding or not."""
    texts = ["How do refunds work?", "", "🙂🙂", "?!...", "a",
             "PostgreSQL keeps the chunks, their vectors and BM25 statistics. " * 60,
             "Reciprocal rank fusion merges the dense and the lexical legs by rank."]
    expected = embedder.embed(texts)
    for batch_size in (1, 3, 32):
        got = NumpyMiniLM(batch_size=batch_size).embed(texts)
        assert got.dtype == np.float32 and got.shape == expected.shape
        assert np.abs(got - expected).max() < 1e-5
