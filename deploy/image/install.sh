#!/bin/sh
# Install podmedic into a Debian bookworm root filesystem: the one procedure `make image` (in a
# chroot, from mmdebstrap) and deploy/Dockerfile (a RUN step) share, so both images hold the same.
#   $1  directory with the wheels: every pin of deploy/requirements.lock, podmedic's own wheel,
#       and requirements.lock itself (deploy/image/build.py and the Dockerfile put them there)
# Offline: pip reads only that directory. Needs the Debian packages python3, python3-venv.
set -eu
WHEELS=${1:-/tmp/wheels}
PIP="/opt/podmedic/bin/python -m pip --disable-pip-version-check --no-cache-dir"

python3 -m venv /opt/podmedic
# --no-deps: the lock is the whole dependency set; nothing unpinned slips in.
$PIP install --no-index --find-links "$WHEELS" --no-deps --no-compile \
    -r "$WHEELS/requirements.lock" "$WHEELS"/podmedic-*.whl
# pip and setuptools install; the running image never does.
$PIP uninstall --yes --quiet pip setuptools
# The root filesystem is read-only at run time: compile now, or the workflow sandbox would
# recompile every module for every incident. checked-hash: the bytes do not depend on file times.
/opt/podmedic/bin/python -m compileall -q --invalidation-mode checked-hash /opt/podmedic >/dev/null
/opt/podmedic/bin/podmedic --version

# The user the manifests run as (runAsUser 10001); no home, no shell.
grep -q '^podmedic:' /etc/group || echo 'podmedic:x:10001:' >>/etc/group
grep -q '^podmedic:' /etc/passwd || echo 'podmedic:x:10001:10001:podmedic:/nonexistent:/usr/sbin/nologin' >>/etc/passwd

# What only the build needed, and what differs from build to build. In a Docker build the wheels
# and this script are bind mounts, which stay outside the image and cannot be removed: hence || true.
rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/cache/ldconfig/aux-cache /var/log/* /root/.cache
rm -rf "$WHEELS" /tmp/* 2>/dev/null || true
