#!/usr/bin/env bash
# The multi-host test bed by hand (docs/field.md, "The test bed"): hosts as network namespaces on a
# bridge that lives in a namespace of its own, so nothing is added to the root namespace. Addresses
# come only from 198.18.0.0/15 (RFC 2544, benchmarking): host i is 198.18.0.i/24; a host given a
# source prefix owns 198.19.i.0/24 (routed local on it, via it from the others). Same names and
# addresses as the Go helper internal/testbed, with the prefix $LP_TESTBED (default lp-sh).
#
#   scripts/testbed.sh up N [--rate RATE] [--sources I,J,…]   make hosts 1..N (tbf RATE per link, e.g. 100mbit)
#   scripts/testbed.sh exec I CMD [ARGS…]                      run CMD in host I
#   scripts/testbed.sh down                                    delete every namespace of the bed
#   scripts/testbed.sh list                                    list the bed's namespaces
set -euo pipefail

P="${LP_TESTBED:-lp-sh}"
BR="$P-br"
die() { echo "testbed.sh: $*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || die "network namespaces need root"
command -v ip >/dev/null || die "the ip tool (iproute2) is not on PATH"

down() {
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^${P}-(br|h[0-9]+)$" || true); do
    # Processes still in a host keep its stack alive after the name is gone: say so.
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [ -z "$pids" ] || echo "testbed.sh: $ns still runs pids $pids (stop them; the namespace lives on until they exit)" >&2
    ip netns del "$ns"
  done
}

case "${1:-}" in
  up)
    n="${2:-}"; shift 2 || die "usage: $0 up N [--rate RATE] [--sources I,J,…]"
    [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 250 ] || die "N must be 1 to 250"
    rate=""; sources=""
    while [ $# -gt 0 ]; do
      case "$1" in
        --rate) rate="$2"; shift 2 ;;
        --sources) sources="$2"; shift 2 ;;
        *) die "unknown option $1" ;;
      esac
    done
    ip netns list | awk '{print $1}' | grep -qx "$BR" && die "$BR exists: run '$0 down' first (or set LP_TESTBED)"
    trap 'echo "testbed.sh: setup failed; removing what was made" >&2; down' ERR
    ip netns add "$BR"
    ip -n "$BR" link set lo up
    ip -n "$BR" link add br0 type bridge
    ip -n "$BR" link set br0 up
    for i in $(seq 1 "$n"); do
      h="$P-h$i"
      ip netns add "$h"
      # Both ends are made inside their namespaces at once: the root namespace never holds one.
      ip link add eth0 netns "$h" type veth peer name "v$i" netns "$BR"
      ip -n "$BR" link set "v$i" master br0 up
      ip -n "$h" link set lo up
      ip -n "$h" addr add "198.18.0.$i/24" dev eth0
      ip -n "$h" link set eth0 up
      if [ -n "$rate" ]; then
        tc -n "$h" qdisc replace dev eth0 root tbf rate "$rate" burst 256kbit latency 50ms
        tc -n "$BR" qdisc replace dev "v$i" root tbf rate "$rate" burst 256kbit latency 50ms
      fi
    done
    for i in ${sources//,/ }; do
      [ "$i" -ge 1 ] && [ "$i" -le "$n" ] || die "source host $i is not one of 1..$n"
      ip -n "$P-h$i" route add local "198.19.$i.0/24" dev lo
      for j in $(seq 1 "$n"); do
        [ "$j" = "$i" ] || ip -n "$P-h$j" route add "198.19.$i.0/24" via "198.18.0.$i"
      done
    done
    trap - ERR
    for i in $(seq 1 "$n"); do
      src=""; [[ ",$sources," == *",$i,"* ]] && src=", sources 198.19.$i.0/24"
      echo "$P-h$i: 198.18.0.$i$src"
    done
    ;;
  exec)
    i="${2:-}"; shift 2 || die "usage: $0 exec I CMD [ARGS…]"
    exec ip netns exec "$P-h$i" "$@"
    ;;
  down) down ;;
  list) ip netns list | awk '{print $1}' | grep -E "^${P}-" || true ;;
  *) die "usage: $0 up N [--rate RATE] [--sources I,J,…] | exec I CMD… | down | list" ;;
esac
