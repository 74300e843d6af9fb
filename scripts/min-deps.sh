#!/usr/bin/env bash
# Builds the HTTP libraries the gpu-operator program links with only what it uses, and prints
# their install prefix (for cmake -DKC_MIN_DEPS=<prefix>):
#
#   scripts/min-deps.sh [--print-prefix]
#
# Debian's libcurl4 and libmicrohttpd12 carry every protocol and TLS backend they support: loading
# them maps and initialises GnuTLS, p11-kit, Kerberos, LDAP, SSH, RTMP, IDN and PSL libraries
# the operator never calls (about 3.5 MiB of resident file pages per process). This builds the
# same releases Debian ships (curl 7.88.1 and libmicrohttpd 0.9.75, from Debian's source
# packages with Debian's patches applied, checksums pinned) as static libraries: libcurl with
# HTTP(S) only, OpenSSL, nghttp2 (HTTP/2), zlib and the threaded resolver; libmicrohttpd without
# HTTPS (the operator serves /metrics and health over plain HTTP). Everything else of the card
# stays as the system has it (OpenSSL, jansson, libyaml, libuv, nghttp2, zlib).
#
# The result is cached outside the repository by the content of this script:
# ${KC_DEPS_CACHE:-~/.cache/gpu-operator}/min-deps-<hash>. Only the operator program links it;
# kubesim (which serves HTTPS through libmicrohttpd) and the tests use the system libraries.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${KC_DEPS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpu-operator}
hash=$(sha256sum "$here/min-deps.sh" | cut -c1-12)
prefix="$cache/min-deps-$hash"
if [ -f "$prefix/.done" ]; then
    echo "$prefix"
    exit 0
fi
mirror=${KC_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# name  url-path  sha256
sources=(
    "curl_7.88.1.orig.tar.gz pool/main/c/curl cdb38b72e36bc5d33d5b8810f8018ece1baa29a8f215b4495e495ded82bbf3c7"
    "curl_7.88.1-10+deb12u15.debian.tar.xz pool/main/c/curl 961b78bc48492c5693e4decb352ddd176f343260a8956f48b2887874048ef23b"
    "libmicrohttpd_0.9.75.orig.tar.xz pool/main/libm/libmicrohttpd 796e7e217a4802679fcac667a4e98501c53185dcf50ca0583870e84192620131"
    "libmicrohttpd_0.9.75-6.debian.tar.xz pool/main/libm/libmicrohttpd 566c247bfbf67e20858705ae695f58db747d50ed8512f2bc46a28bef9086e5af"
)
work=$(mktemp -d "${TMPDIR:-/tmp}/min-deps.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$cache/downloads"
for s in "${sources[@]}"; do
    read -r name path sum <<<"$s"
    f="$cache/downloads/$name"
    if [ ! -f "$f" ] || ! echo "$sum  $f" | sha256sum -c --quiet 2>/dev/null; then
        echo "min-deps: fetching $name" >&2
        curl -fsSL -o "$f.tmp" "$mirror/$path/$name"
        echo "$sum  $f.tmp" | sha256sum -c --quiet || { echo "min-deps: checksum mismatch for $name" >&2; exit 1; }
        mv "$f.tmp" "$f"
    fi
done

# unpack ORIG DEBIAN DIR: the upstream tree with Debian's source fixes applied (its security and
# bug fixes). Debian's packaging patches (those that change configure.ac, Makefile.am or m4/, and
# the ones that make its GnuTLS and NSS flavours, listed last) are left out: the build here
# configures the released tree as it is.
unpack() {
    mkdir -p "$work/$3"
    tar -xf "$cache/downloads/$1" -C "$work/$3" --strip-components=1
    tar -xf "$cache/downloads/$2" -C "$work/$3"
    local series="$work/$3/debian/patches/series" p
    [ -f "$series" ] || return 0
    while read -r p _; do
        case $p in '' | '#'*) continue ;; 90_gnutls.patch | 99_nss.patch) break ;; esac
        if grep -E '^\+\+\+ ' "$work/$3/debian/patches/$p" | grep -qE '(configure\.ac|Makefile\.am|/m4/)'; then
            continue
        fi
        patch -d "$work/$3" -p1 -s -N <"$work/$3/debian/patches/$p"
    done <"$series"
}
jobs=$(nproc)
mkdir -p "$prefix.tmp"
rm -rf "${prefix:?}.tmp"/*

echo "min-deps: building libcurl 7.88.1 (HTTP/HTTPS only)" >&2
unpack curl_7.88.1.orig.tar.gz curl_7.88.1-10+deb12u15.debian.tar.xz curl
(
    cd "$work/curl"
    ./configure --prefix="$prefix.tmp" --disable-shared --enable-static --with-pic \
        --with-openssl --with-nghttp2 --with-zlib --enable-threaded-resolver \
        --with-ca-bundle=/etc/ssl/certs/ca-certificates.crt --with-ca-path=/etc/ssl/certs \
        --without-brotli --without-zstd --without-libpsl --without-libidn2 --without-librtmp \
        --without-libssh2 --without-libssh --without-wolfssh --without-gssapi --without-libgsasl \
        --without-hyper --without-quiche --without-ngtcp2 --without-nghttp3 --without-msh3 \
        --disable-ldap --disable-ldaps --disable-rtsp --disable-dict --disable-telnet \
        --disable-tftp --disable-pop3 --disable-imap --disable-smb --disable-smtp \
        --disable-gopher --disable-mqtt --disable-ftp --disable-file --disable-ntlm \
        --disable-ntlm-wb --disable-manual >/dev/null
    make -j "$jobs" -C lib >/dev/null
    make -C lib install >/dev/null
    make -C include install >/dev/null
    make install-pkgconfigDATA >/dev/null
)

echo "min-deps: building libmicrohttpd 0.9.75 (no HTTPS)" >&2
unpack libmicrohttpd_0.9.75.orig.tar.xz libmicrohttpd_0.9.75-6.debian.tar.xz mhd
(
    cd "$work/mhd"
    ./configure --prefix="$prefix.tmp" --disable-shared --enable-static --with-pic \
        --disable-https --without-gnutls --disable-doc --disable-examples --disable-curl \
        --disable-nls >/dev/null
    make -j "$jobs" -C src/microhttpd >/dev/null
    make -C src/microhttpd install >/dev/null
    make -C src/include install >/dev/null
    make install-pkgconfigDATA >/dev/null 2>&1 || install -D -m 644 libmicrohttpd.pc "$prefix.tmp/lib/pkgconfig/libmicrohttpd.pc"
)
# HTTP/2 is what the operator multiplexes its watches and writes over: no nghttp2, no build.
grep -q -- '-lnghttp2' "$prefix.tmp/lib/pkgconfig/libcurl.pc" ||
    { echo "min-deps: libcurl was configured without nghttp2 (install libnghttp2-dev)" >&2; exit 1; }
# The .pc files name the build prefix: point them at the final one.
sed -i "s|$prefix.tmp|$prefix|g" "$prefix.tmp"/lib/pkgconfig/*.pc
rm -rf "$prefix"
mv "$prefix.tmp" "$prefix"
touch "$prefix/.done"
echo "$prefix"
