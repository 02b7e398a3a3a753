"""Retrievers for LangChain and LlamaIndex over pgsift's Client and AsyncClient.

Each framework has its own module, imported only when asked for, so that importing
pgsift never imports a framework:

    from pgsift.integrations.langchain import PgsiftRetriever     # pip install 'pgsift[langchain]'
    from pgsift.integrations.llamaindex import PgsiftRetriever    # pip install 'pgsift[llamaindex]'

Importing a module whose framework is not installed raises IntegrationUnavailable (an
ImportError) that names the extra to install.
"""

from __future__ import annotations

from ..errors import PgsiftError


class IntegrationUnavailable(PgsiftError, ImportError):
    """The framework of an integration module is not installed (the message names the extra)."""


__all__ = ["IntegrationUnavailable"]
