import numpy as np
from conftest import random_documents


def test_search_round_trip(client):
    client.create_collection("c", embedding_dims=8)
    rng = np.random.default_rng(1)
    client.upsert_documents("c", random_documents(rng, 10, 8))
    result = client.search("c", "alpha", embedding=rng.normal(size=8), top_k=5)
    assert len(result) == 5
    assert result.legs == ["dense", "lexical"]
