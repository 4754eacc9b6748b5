"""Authentication: bearer JWT -> ``Subject`` (DESIGN §2 step 2).

- ``verifier``: ``TokenVerifier.verify(authorization) -> Subject``, every rule in order.
- ``jws``: the compact serialization taken apart (strict base64url and JSON).
- ``keys``: keys by algorithm family (no algorithm confusion), PEM keys, the HS256 secret rules.
- ``jwks``: the issuer's key set, fetched and cached as one whole set.
- ``claims``: verified claims -> ``Subject``, with the checks PyJWT does not do.
- ``token_cache``: recently verified tokens, remembered by digest.
- ``dev_tokens``: ``mint_dev_token`` for ``toolgate token`` (development only).
- ``rejection``: the one 401.
"""
