# Shared by the LinkKeys bench scripts:  . "$ROOT/bench/lib.sh"
#
# unset_server_env appends to the CLEAN_ENV array an `env -u` for every TCP_* and PUBLIC_READ_*
# variable of the calling shell, so a server started with `env "${CLEAN_ENV[@]}" …` runs the
# profile the script sets and nothing the shell happened to export.
unset_server_env() {
  local v
  for v in $(env | sed -n 's/^\(TCP_[A-Z_]*\|PUBLIC_READ_[A-Z_]*\)=.*/\1/p'); do CLEAN_ENV+=(-u "$v"); done
}

# stop_server stops the server in SERVER_PID (SIGTERM, then waits for it), if there is one.
SERVER_PID=""
stop_server() {
  if [ -n "$SERVER_PID" ]; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
  fi
}
