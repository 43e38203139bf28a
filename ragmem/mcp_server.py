"""The MCP server's entry point: ``python -m ragmem.mcp_server [--store PATH] [--namespace NAME] [--session NAME]``.

The same server runs as ``ragmem mcp``. The implementation lives in :mod:`ragmem._mcp`; this module keeps the
documented ``python -m`` path stable and re-exports :func:`build_server` and :func:`serve` for embedding.
"""

from ._mcp import build_server, main, serve

__all__ = ["build_server", "main", "serve"]

if __name__ == "__main__":  # pragma: no cover
    from ._config import drop_working_directory

    drop_working_directory()  # a module planted in the working directory is never imported
    main()
