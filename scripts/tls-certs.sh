#!/usr/bin/env bash
# Makes the certificates for a local TLS cluster and its tests, in DIR:
#   ca.crt/ca.key          the CA the servers' and client's certificates come from
#   server.crt/server.key  for 127.0.0.1 and localhost
#   client.crt/client.key  a client certificate (mutual TLS)
#   other-ca.crt           a CA that signed none of them (a wrong cafile)
#   scripts/tls-certs.sh DIR
set -euo pipefail
dir=${1:?usage: scripts/tls-certs.sh DIR}
mkdir -p "$dir"
cd "$dir"
quiet() { "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }; }
quiet openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=rcs test CA" -keyout ca.key -out ca.crt
quiet openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=other CA" -keyout other-ca.key -out other-ca.crt
for who in server client; do
    quiet openssl req -newkey rsa:2048 -nodes -subj "/CN=rcs $who" -keyout "$who.key" -out "$who.csr"
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > "$who.ext"
    quiet openssl x509 -req -in "$who.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
        -extfile "$who.ext" -out "$who.crt"
done
chmod 644 ./*.key
