# Sourced by the server benchmarks. start_tfm LOG_DIR TFM ARGS...: `TFM ARGS...` (a `serve`
# command line listening on port 0), waited for up to 120 s; sets url and server_pid.
start_tfm() {
  local dir=$1 bin=$2; shift 2
  "$bin" "$@" >"$dir/serve.out" 2>"$dir/serve.err" &
  server_pid=$!
  url=""
  for _ in $(seq 1 1200); do
    url="$(sed -n 's#^tfm serve: listening on \(http://127\.0\.0\.1:[0-9]*\).*#\1#p' "$dir/serve.out" 2>/dev/null || true)"
    [ -n "$url" ] && return 0
    kill -0 "$server_pid" 2>/dev/null || { cat "$dir/serve.err" >&2; exit 1; }
    sleep 0.1
  done
  echo "tfm serve did not start in 120 s" >&2
  cat "$dir/serve.err" >&2
  exit 1
}
