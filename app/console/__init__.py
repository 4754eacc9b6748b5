"""The web console at ``/console`` for approvers and auditors (server-rendered, no build step).

- ``sessions``: server-side sessions in Redis (an opaque cookie), each with its CSRF token.
- ``oidc``: sign-in through the identity provider (OpenID Connect authorization code + PKCE,
  Authlib); ``TOOLGATE_CONSOLE_DEV_SIGN_IN`` is the development sign-in instead.
- ``views``: the pages: approver inbox and grants, auditor search, record detail, charts and
  exports; every form carries the CSRF token; every response a strict Content-Security-Policy.
- ``charts``: decisions over time by outcome and the top denied tools and reasons, as SVG.

The console acts as the signed-in person (``Subject`` from the ID token's claims, as the API
takes them from a bearer token) through the same services the API uses; an answer given in the
console is recorded like one given through the API, with the credential kind ``console``.
"""
