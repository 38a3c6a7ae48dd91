#!/bin/sh
# The container's sluiced (Dockerfile, docs/deployment.md). A container is
# reached from outside itself, so RESP listens on every address of the
# container, and therefore only with a password (which HTTP then wants as a
# bearer token); HTTP stays off unless SLUICE_HTTP_PORT turns it on.
#
#   SLUICE_PASSWORD       the password clients AUTH with, or
#   SLUICE_PASSWORD_FILE  a file holding it (a Docker secret), or
#   SLUICE_CONFIG         a config file (mounted) whose server: section sets requirepass
#   SLUICE_PORT           RESP port (default 7379)
#   SLUICE_HTTP_PORT      HTTP port (default 0: off)
#   SLUICE_BIND           address (default 0.0.0.0)
#   SLUICE_STATE_DIR      where the snapshot is kept (default /var/lib/sluice, the volume)
#
# Arguments that start with '-' are passed on to sluiced; any other command
# runs instead of it (docker run IMAGE sh).
set -eu

case "${1:-}" in
'' | -*) ;;
*) exec "$@" ;;
esac

if [ -n "${SLUICE_PASSWORD_FILE:-}" ]; then
    if [ ! -r "$SLUICE_PASSWORD_FILE" ]; then
        echo "sluice: SLUICE_PASSWORD_FILE $SLUICE_PASSWORD_FILE cannot be read" >&2
        exit 2
    fi
    SLUICE_PASSWORD=$(cat "$SLUICE_PASSWORD_FILE")
fi

set -- --bind "${SLUICE_BIND:-0.0.0.0}" --port "${SLUICE_PORT:-7379}" \
    --http-port "${SLUICE_HTTP_PORT:-0}" \
    --snapshot "${SLUICE_STATE_DIR:-/var/lib/sluice}/snapshot" --snapshot-interval 60 "$@"
if [ -n "${SLUICE_CONFIG:-}" ]; then
    set -- --config "$SLUICE_CONFIG" "$@"
fi

if [ -n "${SLUICE_PASSWORD:-}" ]; then
    set -- "$@" --requirepass "$SLUICE_PASSWORD"
elif [ -n "${SLUICE_CONFIG:-}" ] && grep -Eq '^[[:space:]]+requirepass:[[:space:]]*[^[:space:]#]' "$SLUICE_CONFIG"; then
    : # the config file sets the password (and keeps it out of the process list)
else
    echo "sluice: no password: set SLUICE_PASSWORD, SLUICE_PASSWORD_FILE, or requirepass" \
        "in SLUICE_CONFIG's server section (RESP listens on ${SLUICE_BIND:-0.0.0.0})" >&2
    exit 2
fi

exec "${SLUICED:-/usr/local/bin/sluiced}" "$@"
