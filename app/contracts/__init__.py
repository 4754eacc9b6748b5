"""Tool contracts (DESIGN §2 step 4): what a tool's input and output look like.

- ``contract``: ``ContractMetadata`` and ``ToolContract`` (validate input, validate output).
- ``json_schema``: contracts authored as JSON Schema files (``contracts/*.yaml``).
- ``pydantic_contracts``: contracts authored as pydantic models (normalization, cross-field rules).
- ``builtin``: the pydantic-authored contracts shipped with the gateway.
- ``redaction``: the contract's sensitive paths replaced wherever input is shown or stored.
- ``registry``: ``ContractRegistry``, loaded once, looked up by exact ``(name, version)``.
"""
