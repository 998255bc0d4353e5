#!/bin/sh
# Make the layer a RUN leaves identical on every build of a commit: the last command of every RUN whose files reach
# the image. Arguments: SINCE, the time (seconds) the RUN started (`since=$(date +%s)` as its first command), and
# optionally the one folder to treat (default /, with the logs and caches below).
#   - Logs and caches that record when the build ran (dpkg/apt logs, ldconfig's inode cache, apt's binary package
#     caches) are emptied or removed; files the base image has are emptied rather than deleted, because a deletion
#     lands in the layer as a whiteout stamped with the time of the build.
#   - Every file and directory this RUN wrote is given the time SOURCE_DATE_EPOCH (the commit's time); files
#     unpacked with their own times (Debian packages, wheels) keep them. The mounts of the RUN (secrets, caches,
#     /proc, /dev, bind mounts) are not part of the layer and are skipped.
set -eu
since=$(($1 - 1))
top=${2:-/}
epoch=${SOURCE_DATE_EPOCH:?set the build argument SOURCE_DATE_EPOCH (docker/build.sh sets the commit time)}

if [ "$top" = / ]; then
  rm -f /var/cache/apt/pkgcache.bin /var/cache/apt/srcpkgcache.bin
  for file in /var/log/dpkg.log /var/log/alternatives.log /var/log/apt/history.log /var/log/apt/term.log \
    /var/log/apt/eipp.log.xz /var/cache/ldconfig/aux-cache; do
    if [ -f "$file" ] && [ -n "$(find "$file" -newermt "@$since")" ]; then : >"$file"; fi
  done
fi

# Mount points, from /proc/self/mountinfo (field 5; spaces come escaped as \040, which -path matches literally).
prune=""
# shellcheck disable=SC2013 # field 5 holds no blank (the kernel escapes it), so each word is a line, one point
for point in $(awk '$5 != "/" { print $5 }' /proc/self/mountinfo | sort -u); do
  prune="$prune -path $point -prune -o"
done
# shellcheck disable=SC2086 # $prune is a list of find arguments
find "$top" -xdev $prune -newermt "@$since" -exec touch --no-dereference --date="@$epoch" {} +
