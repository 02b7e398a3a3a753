"""Language detection, offline: which language a question or a document is in, as an ISO
639-1 code (the `query_language` knob and `Document.language` take it).

lingua (the optional extra `pgsift[lang]`) carries its models in the wheel; nothing is
downloaded. Its low-accuracy mode (trigram models, ~100 MB, built once per process in well
under a second) is what short questions need; a text it cannot place gives None, never a
guess.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from .errors import InvalidArgument

__all__ = ["detect"]


@lru_cache(maxsize=1)
def _detector() -> Any:
    try:
        from lingua import LanguageDetectorBuilder
    except ImportError as exc:
        raise InvalidArgument("language detection needs the 'lang' extra: pip install 'pgsift[lang]' "
                              "(or give the language code yourself)") from exc
    return LanguageDetectorBuilder.from_all_languages().with_low_accuracy_mode().build()


def detect(text: str) -> str | None:
    """The ISO 639-1 code of the text's language (en, de, zh, th, ...), or None when it has no
    letters or lingua cannot tell."""
    if not isinstance(text, str):
        raise InvalidArgument(f"detect takes text, got {type(text).__name__}")
    if not any(ch.isalpha() for ch in text):
        return None
    language = _detector().detect_language_of(text[:5000])
    return None if language is None else str(language.iso_code_639_1.name).lower()
