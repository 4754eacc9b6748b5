"""toolgate: a policy decision point for AI tool calls.

``create_app(settings=None, deps=None)`` is the one place where objects are built and wired.
"""

from __future__ import annotations

from flask import Flask

from app.pipeline import Deps
from app.settings import Settings, load_settings


def build_deps(settings: Settings) -> Deps:
    """Build the pipeline's collaborators from settings (no network, no engine loaded yet)."""
    from app.auth import TokenVerifier
    from app.contracts import ContractRegistry
    from app.engine import build_engine

    return Deps(
        settings=settings,
        verifier=TokenVerifier(settings),
        contracts=ContractRegistry.load(settings.contracts_dir),
        engine=build_engine(settings),
    )


def create_app(settings: Settings | None = None, deps: Deps | None = None) -> Flask:
    """The Flask app. ``settings`` defaults to the environment; ``deps`` to ``build_deps``.

    Raises ``SettingsError`` for invalid settings and ``ContractLoadError`` for a bad contract.
    """
    from app import web
    from app.logs import configure_logging

    settings = settings or (deps.settings if deps else load_settings())
    configure_logging(settings.log_level)
    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes
    app.json.sort_keys = False
    app.json.compact = True
    app.extensions["toolgate"] = deps or build_deps(settings)
    web.register(app)
    return app
