"""The tool contract registry: load contracts, look them up by exact ``(name, version)``.

Lookups are by exact membership in a dict keyed by ``(name, version)``; nothing is resolved by
attribute access or path, so names such as ``__class__`` or ``../x`` can only miss.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from app.contracts.contract import ContractLoadError, ContractMetadata, ToolContract
from app.contracts.json_schema import contract_from_schema


class _ContractFile(ContractMetadata):
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None = None


def read_contract_file(path: Path) -> ToolContract:
    """One contract file (``*.yaml``, ``*.yml`` or ``*.json``). Raises ``ContractLoadError``."""
    try:
        text = path.read_text(encoding="utf-8")
        raw = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        spec = _ContractFile.model_validate(raw)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise ContractLoadError(f"{path}: {exc}") from None
    meta = ContractMetadata.model_validate(spec.model_dump(exclude={"input_schema", "output_schema"}))
    return contract_from_schema(meta, spec.input_schema, spec.output_schema, str(path))


class ContractRegistry:
    """All contracts of this gateway, keyed by exact ``(namespace, name, version)``. Raises
    ``ContractLoadError`` when two contracts share all three."""

    def __init__(self, contracts: list[ToolContract]) -> None:
        self._by_key: dict[tuple[str, str, str], ToolContract] = {}
        for contract in contracts:
            key = (contract.namespace, contract.name, contract.version)
            if key in self._by_key:
                raise ContractLoadError(
                    f"duplicate contract {contract.qualified_name} v{key[2]}: {self._by_key[key].source} and {contract.source}"
                )
            self._by_key[key] = contract

    @classmethod
    def load(cls, contracts_dir: Path, *, include_builtin: bool = True) -> ContractRegistry:
        """Load every contract file under ``contracts_dir`` (recursively) plus the pydantic
        contracts of ``app.contracts.builtin``. Raises ``ContractLoadError`` naming the first
        invalid file."""
        contracts: list[ToolContract] = []
        if include_builtin:
            from app.contracts.builtin import BUILTIN_CONTRACTS

            contracts.extend(BUILTIN_CONTRACTS)
        if contracts_dir.is_dir():
            files = (p for p in sorted(contracts_dir.rglob("*")) if p.is_file() and p.suffix in {".yaml", ".yml", ".json"})
            contracts.extend(read_contract_file(path) for path in files)
        return cls(contracts)

    def get(self, name: str, version: str, namespace: str = "") -> ToolContract | None:
        """The contract for exactly ``(namespace, name, version)``, or None (a dynamic tool)."""
        return self._by_key.get((namespace, name, version))

    def sensitive_paths(self, name: str, namespace: str = "") -> tuple[str, ...]:
        """Every sensitive path declared by any version of tool ``name`` in ``namespace``: what
        to redact from the input of a version that has no contract (a caller must not be able
        to dodge redaction by naming an unknown version)."""
        paths = {p for (ns, n, _), c in self._by_key.items() if (ns, n) == (namespace, name) for p in c.meta.sensitive_paths}
        return tuple(sorted(paths))

    def all(self) -> list[ToolContract]:
        """Every contract, sorted by namespace, name, then version."""
        return [self._by_key[k] for k in sorted(self._by_key)]

    def __len__(self) -> int:
        return len(self._by_key)
