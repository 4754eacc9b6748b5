"""gunicorn's target: ``app.wsgi:app``; each worker also runs the approval sweeper."""

from app import create_app

app = create_app()
app.extensions["toolgate_sweeper"].start()
