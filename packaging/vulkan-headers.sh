#!/usr/bin/env bash
# The Vulkan headers the Vulkan build of llama.cpp compiles against, kept in ~/.cache/cove/vulkan-headers/.
#
#   packaging/vulkan-headers.sh               # prints the include folder (fetches the headers once)
#   packaging/vulkan-headers.sh --cmake-args  # the CMake arguments llama-wheel.sh passes for COVE_BACKEND=vulkan
#
# The pinned llama.cpp uses VK_EXT_layer_settings and vulkan_structs.hpp (Vulkan 1.3.275 and later);
# Debian 12 ships 1.3.239. Where the system's headers are new enough they are used. Otherwise Debian 13's
# libvulkan-dev is downloaded from the Debian archive with apt, through a sources list and package lists
# of its own (the system's apt configuration and installed packages are not touched: nothing is
# installed), and only its headers are unpacked. The build links the system's Vulkan loader
# (libvulkan.so.1, package libvulkan1) and uses the system's glslc and SPIR-V headers. Without them,
# COVE_BACKEND=cpu packaging/build.sh builds the app without the GPU backend.
set -euo pipefail
CACHE="${COVE_VULKAN_HEADERS:-$HOME/.cache/cove/vulkan-headers}"
need=275  # VK_HEADER_VERSION of Vulkan 1.3.275

header_version() {  # the VK_HEADER_VERSION in $1/vulkan/vulkan_core.h, or 0
    sed -n 's/^#define VK_HEADER_VERSION \([0-9]*\).*/\1/p' "$1/vulkan/vulkan_core.h" 2>/dev/null || true
}
include=""
for dir in /usr/include "$CACHE/usr/include"; do
    v="$(header_version "$dir")"
    if [ -n "$v" ] && [ "$v" -ge "$need" ] && [ -e "$dir/vulkan/vulkan_structs.hpp" ]; then include="$dir"; break; fi
done
if [ -z "$include" ]; then
    if ! command -v apt-get >/dev/null || ! command -v dpkg-deb >/dev/null; then
        echo "vulkan-headers: Vulkan headers 1.3.$need or later are needed (the Vulkan SDK, or your distribution's" \
             "libvulkan-dev if new enough); set COVE_VULKAN_HEADERS to a folder holding usr/include/vulkan" >&2
        exit 1
    fi
    echo "vulkan-headers: fetching Debian 13's libvulkan-dev for its headers (once)" >&2
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/parts" "$work/prefs" "$work/deb"
    printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: trixie\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
        > "$work/parts/trixie.sources"
    apt=(apt-get -qq -o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$work/parts"
         -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o "Dir::Etc::Preferences=/dev/null"
         -o "Dir::Etc::PreferencesParts=$work/prefs" -o "Debug::NoLocking=1" -o "APT::Sandbox::User=$(id -un)")
    "${apt[@]}" update >&2
    (cd "$work/deb" && "${apt[@]}" download libvulkan-dev >&2)
    rm -rf "$CACHE" && mkdir -p "$CACHE"
    dpkg-deb -x "$work"/deb/libvulkan-dev_*.deb "$work/x"
    mkdir -p "$CACHE/usr" && cp -a "$work/x/usr/include" "$CACHE/usr/"
    include="$CACHE/usr/include"
    echo "vulkan-headers: Vulkan headers (VK_HEADER_VERSION $(header_version "$include")) in $include" >&2
fi
if [ "${1:-}" = "--cmake-args" ]; then
    loader="$(/sbin/ldconfig -p 2>/dev/null | sed -n 's/.*libvulkan\.so\.1 (.*) => \(.*\)/\1/p' | head -1)"
    if [ -z "$loader" ]; then
        echo "vulkan-headers: the Vulkan loader (libvulkan.so.1) is not installed (Debian/Ubuntu: apt install libvulkan1)" >&2
        exit 1
    fi
    command -v glslc >/dev/null || { echo "vulkan-headers: glslc is not installed (Debian/Ubuntu: apt install glslc)" >&2; exit 1; }
    spirv=""
    for dir in /usr/share/cmake*/SPIRV-Headers /usr/lib/*/cmake/SPIRV-Headers /usr/lib/cmake/SPIRV-Headers; do
        [ -d "$dir" ] && spirv="$dir"
    done
    if [ -z "$spirv" ]; then
        echo "vulkan-headers: the SPIR-V headers are not installed (Debian/Ubuntu: apt install spirv-headers)" >&2
        exit 1
    fi
    echo "-DVulkan_INCLUDE_DIR=$include -DVulkan_LIBRARY=$loader"
else
    echo "$include"
fi
