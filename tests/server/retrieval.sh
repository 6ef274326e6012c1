#!/bin/bash
# Retrieval endpoints end to end on the loopback address: /v1/embeddings of a
# sentence-transformers directory (tools/reference/sentence_fixture.py) through the official
# `openai` client (base64 by default, float, dimensions, a prompt name) equal the PyTorch
# reference's vectors; /v1/rerank of a cross-encoder gives the reference's relevance scores,
# best first, with top_n and return_documents; bad requests are 4xx and the server keeps serving.
#   usage: retrieval.sh TFM SOURCE_DIR NODE
set -euo pipefail
TFM=$1 SRC=$2 NODE=${3:-node}
export OMP_WAIT_POLICY=passive
DIR=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$DIR"; }
trap cleanup EXIT
trap 'echo "FAIL: retrieval.sh line $LINENO: $BASH_COMMAND"' ERR
/usr/bin/python3 "$SRC/tools/reference/sentence_fixture.py" "$DIR"
source "$SRC/tests/server/start_server.sh"
start st st_mean
ST_PORT=$PORT
start cross cross
"$NODE" "$SRC/tests/server/retrieval.js" "http://127.0.0.1:$ST_PORT" "http://127.0.0.1:$PORT" "$SRC/tools/reference/openai" "$DIR"
