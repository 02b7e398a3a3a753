"""pgsift's benchmarks, one module a `pgsift bench` command (quality, profile, scale, ...), and
the SQL they send (bench.queries). Only the CLI's bench commands, `pgsift golden import` (a BEIR
folder, read as the quality benchmark reads it) and the tests import them: `import pgsift`
loads none of it. The figures are in bench/README.md.

The quality benchmark's names stand here too, as they did in the one module it was.
"""

from ..beir import BeirDataset, corpus_documents, load_beir, read_jsonl, read_qrels
from .quality import MODES, format_table, load_collection, run_quality

__all__ = ["MODES", "BeirDataset", "corpus_documents", "format_table", "load_beir", "load_collection",
           "read_jsonl", "read_qrels", "run_quality"]
