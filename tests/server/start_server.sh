# Sourced by the server tests. start NAME MODEL ARGS...: `$TFM -t 1 serve -m $DIR/MODEL` on a
# free loopback port with ARGS; sets PORT, adds the pid to PIDS, output in $DIR/NAME.out/.err.
start() {
  local name=$1 model=$2; shift 2
  "$TFM" -t 1 serve -m "$DIR/$model" --port 0 "$@" > "$DIR/$name.out" 2> "$DIR/$name.err" &
  PIDS+=($!)
  for _ in $(seq 100); do
    # (the shell may not have created the output file yet: an unreadable file is "not yet")
    PORT=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$DIR/$name.out" 2> /dev/null || true)
    [ -n "$PORT" ] && return 0
    sleep 0.1
  done
  echo "FAIL: server $name did not start"; cat "$DIR/$name.err"; exit 1
}
