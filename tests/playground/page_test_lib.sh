# Shared by the playground tests (sourced): the Chromium check, a temporary directory removed on
# exit with the server stopped, and `start_server ARGS...` which runs `tfm serve ARGS` on a free
# loopback port and sets $url from its first stdout line. Needs $tfm set by the caller.
chromium="${TFM_CHROMIUM:-$(command -v chromium || true)}"
if [ -z "$chromium" ] || [ ! -x "$chromium" ]; then
  echo "FAIL: chromium is not installed (scripts/deps.sh installs Debian's chromium package)"
  exit 1
fi
tmp="$(mktemp -d)"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$tmp/serve.err" ] && tail -20 "$tmp/serve.err" >&2; exit 1; }

start_server() {
  "$tfm" -t 1 serve "$@" --host 127.0.0.1 --port 0 >"$tmp/serve.out" 2>"$tmp/serve.err" &
  server_pid=$!
  url=""
  for _ in $(seq 1 600); do
    url="$(sed -n 's#^tfm serve: listening on \(http://127\.0\.0\.1:[0-9]*\).*#\1#p' "$tmp/serve.out" 2>/dev/null || true)"
    [ -n "$url" ] && break
    kill -0 "$server_pid" 2>/dev/null || fail "tfm serve exited before listening"
    sleep 0.05
  done
  [ -n "$url" ] || fail "tfm serve printed no URL within 30 s"
}
