# toolgate gateway image: Flask app under gunicorn (gthread), embedded OPA engine available,
# OPA sidecar used in production (TOOLGATE_ENGINE=opa).
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /srv/toolgate

RUN useradd --system --uid 10001 --home /srv/toolgate toolgate

COPY pyproject.toml README.md gunicorn.conf.py ./
COPY app ./app
COPY policies ./policies
COPY contracts ./contracts
RUN pip install --ignore-requires-python "opa-golib-python-bindings==0.4.4" \
 && pip install -e . \
 && mkdir -p /srv/toolgate/var && chown toolgate /srv/toolgate/var

USER toolgate
# gunicorn listens on loopback only: the proxy (nginx, deploy/nginx.conf) in the same network
# namespace answers on 8080 (docker-compose.yml, deploy/kubernetes.yaml).
EXPOSE 8081
HEALTHCHECK --interval=10s --timeout=2s --retries=3 \
  CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8081/healthz', timeout=2).status == 200 else 1)"
CMD ["toolgate", "serve", "--bind", "127.0.0.1:8081"]
