"""Signed decision receipts (docs/design.md §11): Ed25519 signatures that let anyone holding the
gateway's public key check, offline, what was decided.

- ``keys``: Ed25519 key rings from PEM files (the first key signs, every key verifies), key ids
  (RFC 7638 thumbprints), the published key set (a JWK Set, ``/.well-known/toolgate-keys``)
  and reading one back from a file or URL. Decision-log checkpoints (``app.audit``) sign with
  key rings of the same kind.
- ``claims``: what a receipt says (``ReceiptClaims``) and how it is built from a decision.
- ``signer``: ``ReceiptSigner.sign(claims)``: a compact JWS (EdDSA, ``typ`` ``toolgate-receipt+jwt``).
- ``verify``: ``verify_receipt(token, keys)``: the signature, the header and the claims.
- ``commands``: ``toolgate receipt verify``.
"""
