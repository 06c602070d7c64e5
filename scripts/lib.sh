# Shared by the scripts that run the service for a check (schemathesis.sh, client.sh):
# sourced, not run.

# Installs python3's venv module from Debian's packages when it is missing.
need_python_venv() {
  if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
    echo "python3's venv is missing: installing python3-venv from Debian's packages" >&2
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-venv >/dev/null
  fi
}

# The services these scripts start keep nothing across runs: no journal (toc serve's default
# would be toc-data/ in the work tree) unless a script gives one.
export TOC_MEMORY_JOURNAL=${TOC_MEMORY_JOURNAL:-none}

# A free local TCP port.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Processes to stop when the script exits, newest first (the services before the Redis they use).
pids=()
cleanup() {
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    kill "${pids[$i]}" 2>/dev/null || true
    wait "${pids[$i]}" 2>/dev/null || true
  done
}
trap cleanup EXIT
