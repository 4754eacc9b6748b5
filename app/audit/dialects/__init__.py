"""The decision log's database dialects: ``sqlite`` (one file, the default) and ``postgres``."""
