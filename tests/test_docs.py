"""Every ```python sample in README.md and docs/*.md runs as written (as sqlite-utils and llm test theirs).

The blocks of one page run in order in one namespace, in a fresh working
directory, so a later sample may use what an earlier one made (as a reader
following the page would). A block preceded by ``<!-- docs-test: skip REASON -->``
is not run; the reason must be given (a signature, or a Chroma server).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"(?P<skip><!-- docs-test: skip(?P<reason>[^>]*)-->\s*\n)?```python\n(?P<code>.*?)```", re.S)


def samples(page: Path) -> list[tuple[int, str, str | None]]:
    """(line, code, skip reason or None) of each python block of a page."""
    text = page.read_text()
    out = []
    for m in BLOCK.finditer(text):
        line = text.count("\n", 0, m.start("code")) + 1
        out.append((line, m.group("code"), m.group("reason").strip() if m.group("skip") else None))
    return out


def test_every_page_with_python_has_samples_found():
    assert sum(len(samples(p)) for p in PAGES) >= 15
    for page in PAGES:
        for line, _, reason in samples(page):
            assert reason != "", f"{page.name}:{line}: a skipped sample must say why"


@pytest.mark.model  # the pages' samples open Memories with the bundled model
@pytest.mark.parametrize("page", [p for p in PAGES if any(r is None for _, _, r in samples(p))], ids=lambda p: p.name)
def test_samples_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAGMEM_STORE", str(tmp_path / ".ragmem"))
    # `ragmem` (the console script) must be found by samples that start it
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(sys.path))
    try:  # MCP stdio servers inherit only a safe list of variables: run them on this checkout, offline
        from mcp.client import stdio

        monkeypatch.setattr(stdio, "DEFAULT_INHERITED_ENV_VARS",
                            [*stdio.DEFAULT_INHERITED_ENV_VARS, "PYTHONPATH", "RAGMEM_STORE", "HF_HUB_OFFLINE"])
    except ImportError:
        pass
    namespace: dict = {"__name__": "__docs__"}
    ran = 0
    for line, code, reason in samples(page):
        if reason:
            continue
        try:
            exec(compile(code, f"{page.name}:{line}", "exec"), namespace)
        except Exception as exc:  # noqa: BLE001 - name the sample that failed
            raise AssertionError(f"the sample at {page.relative_to(ROOT)}:{line} failed: {type(exc).__name__}: {exc}") from exc
        ran += 1
    assert ran
    for value in namespace.values():  # stores opened by the samples
        close = getattr(value, "close", None)
        if type(value).__name__ == "Memory" and callable(close):
            close()


# ------------------------------------------------------------------ the CLI reference, generated from --help


def _cli_help():
    """scripts/cli_help.py, imported from its path (scripts/ is no package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("cli_help", ROOT / "scripts" / "cli_help.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_reference_is_current():
    """docs/cli.md's reference section is what every command's --help prints now (simonw/llm checks with cog)."""
    cli_help = _cli_help()
    doc = cli_help.DOC.read_text(encoding="utf-8")
    assert cli_help.updated(doc) == doc, "docs/cli.md is stale: run `python scripts/cli_help.py` and commit it"


def test_cli_reference_check_catches_a_stale_section():
    cli_help = _cli_help()
    doc = cli_help.DOC.read_text(encoding="utf-8")
    stale = doc.replace("Show this message and exit.", "Show this.", 1)
    assert stale != doc and cli_help.updated(stale) == doc
    with pytest.raises(SystemExit, match="markers"):
        cli_help.updated(doc.replace(cli_help.END, ""))


def test_every_cli_command_is_documented_by_hand():
    """sqlite-utils' rule: each command has a written section of docs/cli.md, not only its generated --help."""
    cli_help = _cli_help()
    from ragmem._cli import cli

    doc = cli_help.DOC.read_text(encoding="utf-8")
    written = doc[: doc.index(cli_help.START)] + doc[doc.index(cli_help.END):]
    headings = re.findall(r"^### `ragmem ([^`]*)`", written, re.M)
    paths = cli_help.command_paths(cli)
    assert len(paths) >= 20
    for path in paths:
        if isinstance(_command(cli, path), click.Group):
            continue  # a group (show, state, forget) is documented through its commands
        name = " ".join(path)
        assert any(h == name or h.startswith(name + " ") for h in headings), f"`ragmem {name}` has no section in docs/cli.md"


def _command(cli, path):
    cmd = cli
    for name in path:
        cmd = cmd.commands[name]
    return cmd
