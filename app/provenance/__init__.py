"""Value-level provenance (docs/session.md "Provenance"): where each argument of a call came
from. ``normalize`` keys values by kind, ``extract`` finds values in free text, ``store``
keeps keyed digests of the values of reported results in Redis, ``facts`` builds
``input.provenance`` for a decide call."""
