"""``toolgate policy push``: load a policy directory into a running OPA server through its REST
API with opa-python-client (``PUT /v1/data/<path>`` per ``data.json``, ``PUT /v1/policies/<id>``
per module, its path as id), for development against an OPA started without bundles (a bundle
owns its roots, and OPA refuses writes under them).
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import requests

from app.policy.bundle import PolicyBundle, read_directory


class PushError(RuntimeError):
    """OPA refused a file (the message names it and quotes OPA) or could not be reached."""


def _put_value(client: object, path: str, value: object) -> None:
    """PUT a non-object JSON value (opa-python-client's ``update_or_create_data`` takes objects
    only), through the client's own session and timeout."""
    from opa_client.errors import RegoParseError

    resp = client._session.put(  # type: ignore[attr-defined]
        f"{client.root_url}/data/{path}", json=value, timeout=client.timeout  # type: ignore[attr-defined]
    )
    if resp.status_code != 204:
        body = resp.json() if resp.content else {}
        raise RegoParseError(body.get("code"), body.get("message"))


def _push_modules(client: object, bundle: PolicyBundle) -> list[str]:
    """Push the modules in passes: OPA compiles each module against those it already has, so a
    module that calls a function of a module later in path order is refused at first and pushed
    again after the others. Raises the first refusal of a pass that pushed nothing."""
    from opa_client.errors import RegoParseError

    pending, pushed = list(bundle.modules), []
    while pending:
        refused: list[tuple[str, RegoParseError]] = []
        for rel in pending:
            try:
                client.update_policy_from_string(bundle.files[rel].decode("utf-8"), rel, rego_compat=False)  # type: ignore[attr-defined]
            except RegoParseError as exc:
                refused.append((rel, exc))
            else:
                pushed.append(rel)
        if len(refused) == len(pending):
            first, reason = refused[0]
            raise PushError(f"OPA refused {first}: {reason}")
        pending = [rel for rel, _ in refused]
    return pushed


def push_directory(client: object, policy_dir: Path) -> list[str]:
    """Push every data file, then every module, of ``policy_dir``; returns the pushed paths.
    ``client`` is an ``opa_client.opa.OpaClient``. Raises ``PushError`` at the first refusal."""
    return push_bundle(client, read_directory(policy_dir))


def push_bundle(client: object, bundle: PolicyBundle) -> list[str]:
    """``push_directory`` for a bundle already read."""
    import json

    from opa_client.errors import ConnectionsError, RegoParseError, TypeException

    pushed: list[str] = []
    try:
        for rel in bundle.data_files:
            value = json.loads(bundle.files[rel])
            endpoint = "/".join(PurePosixPath(rel).parent.parts)
            # The root document is written key by key: OPA answers PUT /v1/data/ with a redirect.
            parts = value.items() if not endpoint and isinstance(value, dict) else [(None, value)]
            for key, part in parts:
                path = endpoint if key is None else key
                if isinstance(part, dict):
                    client.update_or_create_data(part, path)  # type: ignore[attr-defined]
                else:
                    _put_value(client, path, part)
            pushed.append(rel)
        pushed.extend(_push_modules(client, bundle))
    except (RegoParseError, TypeException) as exc:
        raise PushError(f"OPA refused {rel}: {exc}") from None
    except (ConnectionsError, requests.RequestException) as exc:
        raise PushError(f"OPA could not be reached: {type(exc).__name__}: {exc}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise PushError(f"{rel}: {exc}") from None
    return pushed
