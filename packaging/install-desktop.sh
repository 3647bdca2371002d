#!/usr/bin/env bash
# Adds Cove to this user's applications menu (Linux desktops that follow freedesktop.org):
# the .desktop entry into ~/.local/share/applications and the icon, at every size, into
# ~/.local/share/icons/hicolor/<size>/apps ($XDG_DATA_HOME instead of ~/.local/share if set).
#
#   packaging/install-desktop.sh                  # the build dist/Cove/cove, else the venv's .venv/bin/cove
#   packaging/install-desktop.sh --venv           # the venv's cove (a pip install from this checkout)
#   packaging/install-desktop.sh --exec PATH      # any cove executable
#   packaging/install-desktop.sh --uninstall      # remove what this script installed
#
# packaging/build.sh also puts this script into dist/Cove/; run from there, it points the
# menu entry at that folder's cove (move the folder first, then run it).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
if [ -f "$here/../assets/cove.desktop" ]; then          # in the repository (packaging/)
    assets="$(cd "$here/../assets" && pwd)"
    repo="$(cd "$here/.." && pwd)"
    default_exec=""
    [ -x "$repo/.venv/bin/cove" ] && default_exec="$repo/.venv/bin/cove"
    [ -x "$repo/dist/Cove/cove" ] && default_exec="$repo/dist/Cove/cove"
    venv_exec="$repo/.venv/bin/cove"
elif [ -f "$here/_internal/assets/cove.desktop" ]; then  # in a build (dist/Cove/)
    assets="$here/_internal/assets"
    default_exec="$here/cove"
    venv_exec=""
else
    echo "install-desktop: Cove's assets (cove.desktop, icons) are not next to this script" >&2
    exit 1
fi

data="${XDG_DATA_HOME:-$HOME/.local/share}"
apps="$data/applications"
hicolor="$data/icons/hicolor"
sizes="16 24 32 48 64 128 256 512"

refresh_caches() {  # menus and icon themes notice new files on their own too; these make it immediate
    command -v update-desktop-database >/dev/null && update-desktop-database -q "$apps" 2>/dev/null || true
    command -v gtk-update-icon-cache >/dev/null && gtk-update-icon-cache -q -t "$hicolor" 2>/dev/null || true
}

exec_path="$default_exec"
case "${1:-}" in
    --uninstall)
        rm -f "$apps/cove.desktop" "$hicolor/scalable/apps/cove.svg"
        for s in $sizes; do rm -f "$hicolor/${s}x${s}/apps/cove.png"; done
        refresh_caches
        echo "install-desktop: removed Cove from the applications menu"
        exit 0 ;;
    --venv) exec_path="$venv_exec" ;;
    --exec) exec_path="${2:?install-desktop: --exec needs the path of a cove executable}" ;;
    "") ;;
    *) echo "install-desktop: unknown option $1 (use --venv, --exec PATH or --uninstall)" >&2; exit 2 ;;
esac

if [ -z "$exec_path" ] || [ ! -x "$exec_path" ]; then
    echo "install-desktop: no cove executable found${exec_path:+ at $exec_path}; build it (packaging/build.sh) or set up the venv (README)" >&2
    exit 1
fi
exec_path="$(cd "$(dirname "$exec_path")" && pwd)/$(basename "$exec_path")"
case "$exec_path" in
    *[\"\`\$\\%]*|*$'\n'*)
        echo "install-desktop: the path $exec_path has a character a menu entry cannot hold (\" \` \$ \\ %); move Cove elsewhere" >&2
        exit 1 ;;
esac

mkdir -p "$apps" "$hicolor/scalable/apps"
for s in $sizes; do
    mkdir -p "$hicolor/${s}x${s}/apps"
    cp "$assets/icons/png/cove-$s.png" "$hicolor/${s}x${s}/apps/cove.png"
done
cp "$assets/icons/cove.svg" "$hicolor/scalable/apps/cove.svg"
# Exec is quoted (a path may hold spaces); TryExec hides the entry if the executable goes away.
sed -e "s|^Exec=.*|Exec=\"$exec_path\"|" -e "s|^TryExec=.*|TryExec=$exec_path|" \
    "$assets/cove.desktop" > "$apps/cove.desktop.tmp"
mv "$apps/cove.desktop.tmp" "$apps/cove.desktop"
refresh_caches
echo "install-desktop: Cove is in the applications menu ($apps/cove.desktop runs $exec_path)"
