#!/bin/sh
# runtime-packages.sh FILE...: the Debian packages that own FILE's shared libraries (for
# a binary, every library ldd resolves; for a library, the file itself), one
# `package=version` a line, so that a runtime image installs exactly the versions
# the build linked against. Libraries no package owns (the driver's) are skipped.
set -eu
for file in "$@"; do
  case "$file" in
    *.so*) echo "$file" ;;
    *) ldd "$file" | awk '/=> \//{print $3}' ;;
  esac
done | sort -u | while read -r lib; do
  real=$(readlink -f "$lib")
  dpkg -S "$real" 2>/dev/null || dpkg -S "/usr$real" 2>/dev/null || dpkg -S "$lib" 2>/dev/null || true
done | cut -d: -f1 | sort -u | while read -r package; do
  dpkg-query -W -f='${Package}=${Version}\n' "$package"
done
