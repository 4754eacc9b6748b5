"""gunicorn settings for toolgate (`toolgate serve` and `gunicorn -c gunicorn.conf.py app.wsgi:app`).

gthread workers; counts from TOOLGATE_WORKERS / TOOLGATE_THREADS, bind from TOOLGATE_BIND.
The app is not preloaded: each worker builds its own clients and its own embedded OPA engine
after fork (a Go runtime does not survive fork reliably).
"""

import os

from app.settings import load_settings

_settings = load_settings()

wsgi_app = "app.wsgi:app"
bind = os.environ.get("TOOLGATE_BIND", _settings.bind)
worker_class = "gthread"
workers = _settings.workers
threads = _settings.threads
preload_app = False
keepalive = 5
timeout = 30
graceful_timeout = 20
max_requests = 0
accesslog = None
errorlog = "-"
loglevel = "warning"
limit_request_field_size = 16384
