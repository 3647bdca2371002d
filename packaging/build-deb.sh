#!/usr/bin/env bash
# Makes a Debian package of the frozen app: dist/cove_VERSION_ARCH.deb.
#
#   packaging/build-deb.sh                      # packs dist/Cove (runs packaging/build.sh first if it is missing)
#   packaging/build-deb.sh --app DIR            # packs another build of the app (DIR holds cove and _internal/)
#   packaging/build-deb.sh --out DIR            # writes the .deb into DIR instead of dist/
#   packaging/build-deb.sh --fast               # zstd instead of xz: ~10 s instead of ~3 min, +20% size
#   sudo apt-get install ./dist/cove_0.1.0_amd64.deb && cove --version
#
# The package installs the app under /opt/cove, the command /usr/bin/cove (a symbolic link to
# /opt/cove/cove: the bootloader finds _internal/ from its real path), the menu entry
# /usr/share/applications/cove.desktop and the icons under /usr/share/icons/hicolor. It has no
# maintainer scripts: Debian's desktop-file-utils and gtk-update-icon-cache refresh the menu
# and icon caches through dpkg triggers, and removing the package removes only its own files
# (never ~/.local/share/cove nor a COVE_HOME).
#
# Depends: the packages of the libraries the app links from the system. readelf lists the
# NEEDED libraries of every ELF file in the app; those the app does not hold itself are looked up
# in packaging/deb/sonames (soname -> Debian package), and the newest GLIBC_x.y symbol version
# any file uses gives libc6's lower bound. Recommends: libvulkan1 (the Vulkan backend loads only
# where a Vulkan loader exists; without it Cove runs on the CPU).
set -euo pipefail
caller="$PWD"
cd "$(dirname "$0")/.."
repo="$PWD"

app="" out="" compress="-Zxz"
while [ $# -gt 0 ]; do
    case "$1" in
        --app) app="${2:?build-deb: --app needs the folder of a built app (e.g. dist/Cove)}"; shift 2 ;;
        --app=*) app="${1#--app=}"; shift ;;
        --out) out="${2:?build-deb: --out needs a folder}"; shift 2 ;;
        --out=*) out="${1#--out=}"; shift ;;
        --fast) compress="-Zzstd -z9"; shift ;;
        -h|--help) sed -n '2,8p' "$repo/packaging/build-deb.sh" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "build-deb: unknown argument $1 (use --app DIR, --out DIR, --fast)" >&2; exit 2 ;;
    esac
done

# --app and --out are relative to where the script was run from; the defaults are in the repository.
case "$app" in ""|/*) ;; *) app="$caller/$app" ;; esac
case "$out" in "") out="$repo/dist" ;; /*) ;; *) out="$caller/$out" ;; esac

for tool in dpkg-deb dpkg readelf; do
    if ! command -v "$tool" >/dev/null; then
        case "$tool" in
            readelf) echo "build-deb: readelf is not installed (Debian/Ubuntu: apt-get install binutils); it finds the libraries the app links" >&2 ;;
            *) echo "build-deb: $tool is not installed; a .deb is built with Debian's dpkg tools (on Debian or Ubuntu, or apt-get install dpkg)" >&2 ;;
        esac
        exit 1
    fi
done

if [ -z "$app" ]; then
    app="dist/Cove"
    if [ ! -x "$app/cove" ]; then
        echo "build-deb: no build in dist/Cove yet; building it with packaging/build.sh" >&2
        packaging/build.sh
    fi
fi
if [ ! -x "$app/cove" ] || [ ! -d "$app/_internal" ]; then
    echo "build-deb: $app is not a built Cove app (no executable cove and _internal/ there); build one with packaging/build.sh" >&2
    exit 1
fi
app="$(cd "$app" && pwd)"

# The version the app reports (`cove 0.1.0`), in Debian's spelling: a pre-release sorts before
# the release with a tilde (0.2.0rc1 -> 0.2.0~rc1, 0.2.0.dev3 -> 0.2.0~dev3).
reported="$(env -i PATH=/usr/bin:/bin HOME="${HOME:-/root}" QT_QPA_PLATFORM=offscreen "$app/cove" --version 2>/dev/null || true)"
version="${reported#cove }"
if [ "$reported" = "$version" ] || [ -z "$version" ]; then
    echo "build-deb: $app/cove --version did not print 'cove VERSION' (it printed '${reported:0:80}')" >&2
    exit 1
fi
version="$(printf '%s' "$version" | sed -E 's/\.?(a|b|rc|dev)([0-9]*)/~\1\2/g; s/\.post/+post/')"
if ! printf '%s' "$version" | grep -Eq '^[0-9][A-Za-z0-9.+~]*$'; then
    echo "build-deb: the app's version '$version' is not a Debian version" >&2
    exit 1
fi
arch="$(dpkg --print-architecture)"

# ---- Depends, from the app's ELF files ----
table="packaging/deb/sonames"
mapfile -t elfs < <(find "$app" -type f \( -name '*.so' -o -name '*.so.*' -o -perm -u+x \) -print)
needed="$(for f in "${elfs[@]}"; do { readelf -d "$f" 2>/dev/null || true; } | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p'; done | sort -u)"
held="$(find "$app" \( -type f -o -type l \) -printf '%f\n' | sort -u)"
external="$(comm -23 <(printf '%s\n' "$needed" | sed '/^$/d') <(printf '%s\n' "$held"))"
depends="" recommends="libvulkan1" unknown=""
for soname in $external; do
    pkg="$(awk -v s="$soname" '$1 == s { print $2; exit }' "$table")"
    if [ -z "$pkg" ]; then unknown="$unknown $soname"; continue; fi
    [ "$pkg" = "libvulkan1" ] && continue   # a Recommends (see above)
    depends="$depends $pkg"
done
if [ -n "$unknown" ]; then
    echo "build-deb: the app links${unknown} from the system, and $table does not name its Debian package; add it there (dpkg -S on the library's file)" >&2
    exit 1
fi
glibc="$(for f in "${elfs[@]}"; do { readelf -V --wide "$f" 2>/dev/null || true; } | { grep -oE 'Name: GLIBC_[0-9]+(\.[0-9]+)+' || true; }; done \
    | sed 's/Name: GLIBC_//' | sort -u -V | tail -1)"
# The data files the bundled font and keyboard libraries read (/etc/fonts with a font; the XKB
# layouts): their system packages are not pulled in when PyInstaller bundled the library itself.
depends="$depends libc6 fontconfig-config xkb-data"
depends="$(printf '%s\n' $depends | sort -u | sed "s/^libc6\$/libc6${glibc:+ (>= $glibc)}/" | paste -sd, - | sed 's/,/, /g')"

# ---- the package's tree ----
work="$(mktemp -d "${TMPDIR:-/tmp}/cove-deb.XXXXXX")"
trap 'rm -rf "$work"' EXIT
root="$work/root"
mkdir -p "$root/opt" "$root/usr/bin" "$root/usr/share/applications" "$root/usr/share/doc/cove" "$root/DEBIAN"
cp -a "$app" "$root/opt/cove"
rm -f "$root/opt/cove/install-desktop.sh"   # the per-user menu entry: the package installs a system-wide one
ln -s /opt/cove/cove "$root/usr/bin/cove"

# The menu entry and icons: the app's own copies (_internal/assets), else this checkout's.
assets="$app/_internal/assets"
[ -f "$assets/cove.desktop" ] || assets="$repo/assets"
sed -e 's|^Exec=.*|Exec=/usr/bin/cove|' -e 's|^TryExec=.*|TryExec=/usr/bin/cove|' \
    "$assets/cove.desktop" > "$root/usr/share/applications/cove.desktop"
for png in "$assets"/icons/png/cove-*.png; do
    size="$(basename "$png" .png)"; size="${size#cove-}"
    mkdir -p "$root/usr/share/icons/hicolor/${size}x${size}/apps"
    cp "$png" "$root/usr/share/icons/hicolor/${size}x${size}/apps/cove.png"
done
mkdir -p "$root/usr/share/icons/hicolor/scalable/apps"
cp "$assets/icons/cove.svg" "$root/usr/share/icons/hicolor/scalable/apps/cove.svg"
printf 'Cove\nLicense: MIT\nThe app folder /opt/cove/_internal holds the licences of the bundled libraries where their packages ship them.\n' \
    > "$root/usr/share/doc/cove/copyright"
chmod -R u+rwX,go+rX,go-w "$root"

# Installed-Size as dpkg-gencontrol counts it: KiB per file rounded up, 1 per folder or link.
installed="$(find "$root" -mindepth 1 -path "$root/DEBIAN" -prune -o -printf '%y %s\n' \
    | awk '$1 == "f" { kib += int(($2 + 1023) / 1024) } $1 != "f" { kib += 1 } END { print kib }')"
cat > "$root/DEBIAN/control" <<EOF
Package: cove
Version: $version
Architecture: $arch
Maintainer: Cove developers <cove@localhost>
Installed-Size: $installed
Depends: $depends
Recommends: $recommends
Section: utils
Priority: optional
Description: private desktop assistant for local GGUF language models
 Cove chats with language models on your own computer through llama.cpp:
 a window and a cove command line (chat, models, history, serve). Your
 prompts never leave the computer; every turn is measured and kept.
 .
 This package holds the frozen app (Python and Qt included) under /opt/cove.
 Conversations and models stay in ~/.local/share/cove (or COVE_HOME), which
 removing the package does not touch.
EOF

mkdir -p "$out"
deb="$out/cove_${version}_${arch}.deb"
# xz: what Debian's archive uses, the smallest file. zstd (--fast) installs with dpkg 1.21.18 or
# later (Debian 12) and Ubuntu's dpkg since 21.10.
# shellcheck disable=SC2086
dpkg-deb --root-owner-group $compress --build "$root" "$deb" >/dev/null
echo "build-deb: $deb ($(du -h "$deb" | cut -f1), installed $((installed / 1024)) MiB)"
