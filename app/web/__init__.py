"""Everything Flask-specific: blueprints, request ids, the one error handler, request logs."""

from __future__ import annotations

from flask import Flask

from app.web import (
    approvals,
    authzen,
    capabilities,
    decide,
    decisions,
    errors,
    executions,
    health,
    keys,
    metrics,
    openapi,
    policy_status,
    redirects,
    requests,
    tenant_data,
    tools,
)


def register(app: Flask) -> None:
    """Attach request-id handling, the error handler and every blueprint to ``app``."""
    requests.register(app)
    redirects.register(app)
    errors.register(app)
    for blueprint in (decide.bp, tools.bp, health.bp, openapi.bp, metrics.bp, executions.bp, approvals.bp,
                      decisions.bp, capabilities.bp, authzen.bp, keys.bp, policy_status.bp,
                      tenant_data.bp):
        app.register_blueprint(blueprint)
    if app.extensions["toolgate"].settings.console_enabled:
        from app.console import views

        app.register_blueprint(views.bp)
