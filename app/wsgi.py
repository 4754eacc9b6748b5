"""gunicorn's target: ``app.wsgi:app``; each worker also runs the approval sweeper.

Once the app is built, ``gc.freeze()`` moves every object made so far (modules, the Flask app,
contracts, compiled schemas, clients) to the collector's permanent generation: they live as
long as the worker, and without it every full collection walks them again. In the benchmark
those full collections cost about a tenth of a decide call's CPU (docs/operators.md
"Performance"). Cycles made later, by requests, are collected as before.
"""

import gc

from app import create_app

app = create_app()
app.extensions["toolgate"].session_reads.prime()  # app.session.declarations: verified before the first call
app.extensions["toolgate_sweeper"].start()
gc.freeze()
