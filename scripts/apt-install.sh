#!/usr/bin/env bash
# Installs Debian packages, one install at a time: CI runs the restore drill and the formation
# side by side, and each installs what it needs; two apt-gets at once fail on dpkg's lock
# ("Could not get lock /var/lib/dpkg/lock-frontend"). The flock queues our own installs; the
# lock timeout waits out any other apt process on the machine.
# Usage: scripts/apt-install.sh package...
set -euo pipefail
lock=/tmp/billing-apt-install.lock
exec 9>"$lock"
flock -w 1800 9
apt-get -o DPkg::Lock::Timeout=600 update -qq
DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq "$@" >/dev/null
