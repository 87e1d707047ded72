# Sourced by the demo-corpus scripts: fetch Debian packages without root and unpack them.
#   debian_download TMPDIR NAME PACKAGE...   downloads into TMPDIR/debs (NAME prefixes messages)
#   debian_unpack TMPDIR                     unpacks TMPDIR/debs/*.deb into TMPDIR/root
# apt-get as any user can download into the current folder; when the system's package index is
# missing or stale, a private index under TMPDIR is fetched (no root needed either).
debian_download() {
  local tmp="$1" name="$2"
  shift 2
  local opts=(-q -o "APT::Sandbox::User=$(id -un)")
  mkdir -p "$tmp/debs"
  if (cd "$tmp/debs" && apt-get "${opts[@]}" download "$@") >"$tmp/apt.log" 2>&1; then
    return 0
  fi
  echo "$name: apt-get download $* failed with the system's package index;" \
    "fetching a private index into a temporary folder" >&2
  mkdir -p "$tmp/apt/lists/partial" "$tmp/apt/cache/archives/partial"
  opts+=(-o "Dir::State::Lists=$tmp/apt/lists" -o "Dir::Cache=$tmp/apt/cache"
    -o "Debug::NoLocking=1")
  if ! apt-get "${opts[@]}" update >>"$tmp/apt.log" 2>&1 ||
    ! (cd "$tmp/debs" && apt-get "${opts[@]}" download "$@") >>"$tmp/apt.log" 2>&1; then
    cat "$tmp/apt.log" >&2
    echo "$name: cannot download $* (no network or no Debian package source?)." >&2
    echo "  Install them instead (as root): apt-get install $*" >&2
    exit 1
  fi
}

debian_unpack() {
  local tmp="$1" deb
  mkdir -p "$tmp/root"
  for deb in "$tmp"/debs/*.deb; do dpkg -x "$deb" "$tmp/root"; done
  rm -f "$tmp"/debs/*.deb
}
