#!/usr/bin/env bash
# The test bed itself (scripts/testbed), run inside a bed of 2 nodes with capped links:
# each node has its own hostname, address, /dev/shm and no route off its network; MPI sees two
# nodes (MPI_COMM_TYPE_SHARED groups 2 + 2 ranks); a bed is torn down after its command ends,
# fails, or is interrupted by a signal, and one killed with SIGKILL is removed by the next bed.
#   testbed.sh SOURCE_DIR TEST_COMMUNICATOR_BINARY
set -euo pipefail
root="$1" comm_test="$2"
tb="$root/scripts/testbed"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }

[ "$($tb exec node1 hostname)" = node1 ] || fail "node1's hostname is $($tb exec node1 hostname)"
[ "$($tb exec node2 hostname)" = node2 ] || fail "node2's hostname is $($tb exec node2 hostname)"
$tb exec node2 ip -4 -o addr show dev eth0 | grep -q "10.77.0.2/24" || fail "node2 has no address 10.77.0.2"
[ -z "$($tb exec node1 ip route show default)" ] || fail "node1 has a default route"
$tb exec node1 ip route get 10.77.0.2 > /dev/null || fail "node1 has no route to node2"
$tb exec node1 ip route get 1.1.1.1 > /dev/null 2>&1 && fail "node1 has a route off the machine"
# /dev/shm (POSIX shared memory) is each node's own
$tb exec node1 sh -c 'echo x > /dev/shm/mtk-testbed-probe'
$tb exec node2 test -e /dev/shm/mtk-testbed-probe && fail "node2 sees node1's /dev/shm"
[ -e /dev/shm/mtk-testbed-probe ] && fail "the host sees node1's /dev/shm"
# the link is capped both ways (tbf on the node's side and on the bridge's)
[ -n "$(ip netns exec "$(basename "$TESTBED_DIR")-node1" tc qdisc show dev eth0 | grep tbf)" ] ||
  fail "node1's link has no tbf cap"
echo "ok: hostnames, addresses, no route off the machine, /dev/shm per node, capped link"

# MPI across the nodes: the communicator tests at 2 nodes x 2 ranks (split by node among them)
timeout -k 5 120 "$tb" mpiexec -n 4 -ppn 2 "$comm_test" \
  --gtest_filter='Communicator.SplitGroupsByColorOrdersByKey:Communicator.AllreduceScalarsAndVectors' \
  > comm.log 2>&1 || { cat comm.log; fail "test_communicator across 2 nodes"; }
echo "ok: test_communicator on 2 nodes x 2 ranks"

# Teardown: after a signal, and after SIGKILL (the next bed removes the orphan).
unset TESTBED_DIR
"$tb" -- sleep 60 < /dev/null > bed1.log 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q "up," bed1.log 2> /dev/null && break; sleep 0.1; done
prefix="$(sed -n 's/.*namespaces \(mtktb-[A-Za-z0-9]*\)-\*.*/\1/p' bed1.log)"
[ -n "$prefix" ] || { cat bed1.log; fail "the inner bed did not start"; }
kill -TERM "$pid"
wait "$pid" && fail "the interrupted bed exited 0"
ip netns list | grep -q "^$prefix-" && fail "namespaces of $prefix survived SIGTERM"
[ -e "/tmp/$prefix" ] && fail "/tmp/$prefix survived SIGTERM"
echo "ok: SIGTERM tears the bed down"
"$tb" -- sleep 60 < /dev/null > bed2.log 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q "up," bed2.log 2> /dev/null && break; sleep 0.1; done
prefix="$(sed -n 's/.*namespaces \(mtktb-[A-Za-z0-9]*\)-\*.*/\1/p' bed2.log)"
children="$(pgrep -P "$pid" || true)"
kill -KILL "$pid"
wait "$pid" 2> /dev/null || true
for c in $children; do kill -KILL "$c" 2> /dev/null || true; done # as ctest's kill of a tree
"$tb" -- true < /dev/null > bed3.log 2>&1 || { cat bed3.log; fail "a bed after a killed one"; }
grep -q "removing $prefix" bed3.log || { cat bed3.log; fail "the next bed did not remove $prefix"; }
ip netns list | grep -q "^$prefix-" && fail "namespaces of $prefix survived"
echo "ok: a bed killed with SIGKILL is removed by the next one"
