#!/usr/bin/env bash
# Hosts on this machine for the cluster tests: N network namespaces omtlt-h0..h(N-1), each with
# its own address 10.78.0.(10+i) on a veth link to a bridge that lives in a namespace of its
# own (omtlt-sw), so ranks on different hosts talk over those links and nothing of the
# machine's own network changes. Root only. Every address is inside namespaces this script
# makes, and `down` removes them all.
#
#   tests/cluster/hosts.sh up N [RATE]     make h0..h(N-1); RATE (e.g. 10mbit) shapes every link
#   tests/cluster/hosts.sh shape N RATE|none
#   tests/cluster/hosts.sh cut HOST        delete HOST's link (a host that drops off the network)
#   tests/cluster/hosts.sh down N
#   tests/cluster/hosts.sh addr HOST       HOST's address (on the hosts' links)
#   tests/cluster/hosts.sh exec HOST CMD   run CMD on HOST, with HOST as its host name; hydra
#                                          calls it as it calls ssh (-x HOST CMD), so it is also
#                                          mpiexec's -launcher-exec
#
# OMTL_HOSTS_PREFIX (default omtlt, at most 10 characters) names the namespaces and links, so
# that two users of this script on one machine (a bench beside the tests) keep out of each
# other's way.
#
# MPICH's UCX device sees one kernel and would use shared memory between the namespaces: the
# tests force TCP (UCX_TLS=tcp, passed to every rank with -genvall) so that the bytes cross
# the links.
set -eu
prefix=${OMTL_HOSTS_PREFIX:-omtlt}
case $prefix in
    *[!a-z0-9]*|'') echo "hosts.sh: OMTL_HOSTS_PREFIX must be lower-case letters and digits" >&2; exit 2 ;;
esac
[ ${#prefix} -le 10 ] || { echo "hosts.sh: OMTL_HOSTS_PREFIX must be at most 10 characters (interface names)" >&2; exit 2; }
if [ "${1:-}" != up ] && [ "${1:-}" != down ] && [ "${1:-}" != shape ] && [ "${1:-}" != cut ] \
        && [ "${1:-}" != exec ] && [ "${1:-}" != addr ]; then
    set -- exec "$@"                    # called by hydra as ssh: [options] HOST CMD...
fi
cmd=$1; shift

shape() {   # shape HOST-INDEX RATE|none
    ip netns exec "$prefix-h$1" tc qdisc del dev eth0 root 2>/dev/null || true
    if [ "$2" != none ]; then
        # the bucket holds 4 ms of the rate, at least 32 kB: tbf sends at most a bucket a timer
        # wake-up, and 32 kB held a 1gbit link near 150 Mbit/s (100mbit is near its rate either way)
        burst=$(echo "$2" | awk '{ n = $0 + 0; u = tolower(substr($0, length(n "") + 1))
            m = u ~ /^k/ ? 1e3 : u ~ /^m/ ? 1e6 : u ~ /^g/ ? 1e9 : u ~ /^t/ ? 1e12 : 1
            if (u ~ /bps$/) m *= 8
            b = n * m / 8 * 0.004; printf "%d", (b > 32768 ? b : 32768) }')
        ip netns exec "$prefix-h$1" tc qdisc add dev eth0 root tbf rate "$2" burst "$burst" latency 50ms
    fi
}

case $cmd in
up)
    n=$1; rate=${2:-none}
    ip netns add "$prefix-sw"
    ip netns exec "$prefix-sw" ip link add br0 type bridge
    ip netns exec "$prefix-sw" ip link set br0 up
    names="127.0.0.1 localhost"
    for i in $(seq 0 $((n - 1))); do names="$names
10.78.0.$((10 + i)) h$i"; done
    for i in $(seq 0 $((n - 1))); do
        ip netns add "$prefix-h$i"
        ip link add "${prefix}v$i" type veth peer name eth0 netns "$prefix-h$i"
        ip link set "${prefix}v$i" netns "$prefix-sw"
        ip netns exec "$prefix-sw" ip link set "${prefix}v$i" master br0
        ip netns exec "$prefix-sw" ip link set "${prefix}v$i" up
        ip netns exec "$prefix-h$i" ip addr add "10.78.0.$((10 + i))/24" dev eth0
        ip netns exec "$prefix-h$i" ip link set eth0 up
        ip netns exec "$prefix-h$i" ip link set lo up
        shape "$i" "$rate"
        # the host names resolve inside the namespaces (ip netns exec binds this file)
        mkdir -p "/etc/netns/$prefix-h$i"
        printf '%s\n' "$names" > "/etc/netns/$prefix-h$i/hosts"
    done ;;
shape)
    n=$1; rate=$2
    for i in $(seq 0 $((n - 1))); do shape "$i" "$rate"; done ;;
addr)
    case ${1:-} in
        h[0-9]|h[0-9][0-9]) echo "10.78.0.$((10 + ${1#h}))" ;;
        *) echo "hosts.sh: addr takes a host h0..h99, got '${1:-}'" >&2; exit 2 ;;
    esac ;;
cut)
    ip netns exec "$prefix-sw" ip link del "${prefix}v${1#h}" ;;
down)
    n=$1
    for i in $(seq 0 $((n - 1))); do
        ip netns del "$prefix-h$i" 2>/dev/null || true
        rm -rf "/etc/netns/$prefix-h$i"
    done
    ip netns del "$prefix-sw" 2>/dev/null || true ;;
exec)
    while [[ ${1:-} == -* ]]; do shift; done
    host=$1; shift
    exec ip netns exec "$prefix-$host" unshare -u sh -c 'hostname "$0"; exec sh -c "$*"' "$host" "$@" ;;
esac
