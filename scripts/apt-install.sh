#!/bin/sh
# Installs Debian packages unless CHECK (a shell command, the first
# argument) already succeeds. Two `make test`s starting on one fresh machine
# would both run apt-get at once, and the second failed on dpkg's lock: the
# install holds a lock of ours, and the check is made again once it is held,
# since the other may have installed the packages meanwhile. apt's own lock
# wait covers any other apt-get running then.
set -e
check=$1
shift
sh -c "$check" >/dev/null 2>&1 && exit 0
exec 9>"${TMPDIR:-/tmp}/agentplane-apt.lock"
flock 9
sh -c "$check" >/dev/null 2>&1 && exit 0
sudo=$([ "$(id -u)" = 0 ] || echo sudo)
$sudo apt-get -o DPkg::Lock::Timeout=600 update -qq
$sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq "$@"
