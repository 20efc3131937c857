#!/bin/sh
# Entry point of the Guaipeca container (POSIX sh: the slim image has no bash).
#   serve [ARGS]   (default) index the configured corpora once, then run the HTTP server on
#                  $GUAIPECA_HOST:$GUAIPECA_PORT (0.0.0.0:8090). exec: the server is the
#                  process that gets SIGTERM from `docker stop`, so requests in flight finish
#                  and the index is closed cleanly. GUAIPECA_INDEX_ON_START=0 skips the indexing,
#                  GUAIPECA_WATCH=1 re-indexes when files change.
#   healthcheck    exit 0 when GET /health answers 200 (the image's HEALTHCHECK).
#   anything else  a guaipeca command: index, search "...", status, check-model, ...
set -eu

host="${GUAIPECA_HOST:-0.0.0.0}"
port="${GUAIPECA_PORT:-8090}"
command="${1:-serve}"
[ "$#" -gt 0 ] && shift

case "$command" in
  serve)
    # The upload corpus of the bundled config lives on the volume: make sure it exists.
    mkdir -p "${GUAIPECA_HOME:-/data}/uploads"
    if [ "${GUAIPECA_INDEX_ON_START:-1}" != "0" ]; then
      guaipeca index || echo "guaipeca-entrypoint: indexing failed (see above); serving what is indexed" >&2
    fi
    if [ "${GUAIPECA_WATCH:-0}" = "1" ]; then
      set -- --watch "$@"
    fi
    exec guaipeca serve --transport http --host "$host" --port "$port" "$@"
    ;;
  healthcheck)
    exec python -c 'import sys, urllib.request
try:
    ok = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/health", timeout=4).status == 200
except OSError:
    ok = False
sys.exit(0 if ok else 1)' "$port"
    ;;
  guaipeca)
    exec guaipeca "$@"
    ;;
  *)
    exec guaipeca "$command" "$@"
    ;;
esac
