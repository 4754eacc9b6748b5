"""The reverse proxy in front of gunicorn (nginx): it reads every request whole, with read
timeouts, before a gunicorn worker thread sees it, so slow or idle clients cannot pin the
gateway's threads (a gthread worker reads a request in the thread that serves it, with no read
timeout).

- ``config``: renders the nginx configuration from the settings.
- ``commands``: ``toolgate proxy config``.
"""
