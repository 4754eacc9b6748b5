"""The import rules of the code base (docs/design.md "Layers"), checked on grimp's import graph.

Layers, highest first; a module may import from its own layer and the layers below it:

    entry     app (create_app), app.wsgi, app.cli, app.replay, app.settings_doc, app.web.*, app.mcp.*, app.console.*,
              app.*.commands
    decide    app.decide.*                      the pipeline and the other recorded calls
    adapters  auth, contracts, engine, policy, idempotency, approvals, audit, receipts, session, provenance, redis_client,
              tracing, proxy
    base      errors, settings, models, vocabulary, timefmt, jwa, bodies, fingerprint, metrics, logs, about, terminal,
              deadline

Import cycles among app modules are refused whatever their layers (function-level imports
count: they are dependencies too), and ``bench`` never imports ``tests``.
"""

from __future__ import annotations

from dataclasses import dataclass

import grimp

LAYERS = ("entry", "decide", "adapters", "base")
_BASE = {"errors", "settings", "models", "vocabulary", "timefmt", "jwa", "bodies", "fingerprint", "metrics", "logs",
         "about", "terminal", "deadline"}
_ADAPTERS = {"auth", "contracts", "engine", "policy", "idempotency", "approvals", "audit",
             "receipts", "session", "provenance", "redis_client", "tracing", "proxy"}


def layer_of(module: str) -> str:
    """The layer of an ``app`` module. Raises ``ValueError`` for a module no rule places."""
    parts = module.split(".")
    if parts[0] != "app":
        raise ValueError(f"{module} is not an app module")
    if len(parts) == 1 or parts[1] in {"wsgi", "cli", "replay", "web", "console", "settings_doc", "mcp"} or parts[-1] == "commands":
        return "entry"
    if parts[1] == "decide":
        return "decide"
    if parts[1] in _ADAPTERS:
        return "adapters"
    if parts[1] in _BASE:
        return "base"
    raise ValueError(f"{module} belongs to no layer: add it to tests/support/import_layers.py")


@dataclass(frozen=True)
class Violation:
    """``importer`` imports ``imported`` (at ``line``) against the rules: ``rule`` says which."""

    importer: str
    imported: str
    rule: str


def layer_violations(graph: grimp.ImportGraph, package: str = "app") -> list[Violation]:
    """Every import of a ``package`` module from a higher layer."""
    found = []
    for importer in sorted(m for m in graph.modules if m == package or m.startswith(package + ".")):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            if not imported.startswith(package + ".") and imported != package:
                continue
            if LAYERS.index(layer_of(imported)) < LAYERS.index(layer_of(importer)):
                found.append(Violation(importer, imported, f"{layer_of(importer)} may not import {layer_of(imported)}"))
    return found


def import_cycles(graph: grimp.ImportGraph, package: str = "app") -> list[list[str]]:
    """The import cycles among ``package``'s modules: each strongly connected component of more
    than one module (or a module importing itself), sorted (Tarjan's algorithm)."""
    modules = sorted(m for m in graph.modules if m == package or m.startswith(package + "."))
    edges = {m: sorted(i for i in graph.find_modules_directly_imported_by(m) if i in modules) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(root: str) -> None:
        work = [(root, iter(edges[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1 or node in edges[node]:
                        cycles.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(edges[child])))
            elif child in on_stack:
                low[node] = min(low[node], index[child])

    for module in modules:
        if module not in index:
            visit(module)
    return sorted(cycles)


def imports_between(graph: grimp.ImportGraph, importer_package: str, imported_package: str) -> list[tuple[str, str]]:
    """Every direct import from a module of ``importer_package`` into ``imported_package``."""
    return sorted(
        (importer, imported)
        for importer in graph.modules
        if importer == importer_package or importer.startswith(importer_package + ".")
        for imported in graph.find_modules_directly_imported_by(importer)
        if imported == imported_package or imported.startswith(imported_package + ".")
    )
