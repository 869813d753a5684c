# The server image: web (gunicorn), worker and beat (celery) all run it; see docker-compose.yml.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1

WORKDIR /app

# The lock pins every package with its hashes; installing it alone first keeps this layer cached
# while only the code changes.
COPY requirements.lock ./
RUN pip install --require-hashes --no-deps -r requirements.lock

RUN useradd --system --user-group --uid 10001 --home-dir /app --shell /usr/sbin/nologin auditweb

COPY . .
# Static files are collected at build time, with a throw-away key (settings insist on one).
RUN SECRET_KEY=collectstatic-only python manage.py collectstatic --no-input \
    && chown -R auditweb:auditweb /app/staticfiles \
    && mkdir -p /var/lib/auditweb/uploads /var/lib/auditweb/reports /var/lib/auditweb/binlog-spool /logs \
    && chown -R auditweb:auditweb /var/lib/auditweb
# (An empty named volume takes the owner of the folder it is mounted on: these, the app's user.)

USER auditweb
EXPOSE 8000
CMD ["gunicorn", "auditweb.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3", "--access-logfile", "-"]
