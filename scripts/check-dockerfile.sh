#!/usr/bin/env bash
# Checks the Dockerfile without a Docker engine, against a build tree (argument: the build dir):
#  - every COPY from the build context names a file or folder of the repository;
#  - every COPY --from=build /build/X names a program the build tree has;
#  - the runtime stage's apt packages provide every shared library those programs link directly
#    (their NEEDED entries, matched to packages with dpkg -S on this Debian machine; apt then pulls
#    the packages' own dependencies), libc6 being in the base image;
#  - gpu-operator-hold is there and linked statically (it runs in other projects' images);
#  - the entrypoint program runs --help, and the image runs as a non-root user.
# When the build stage configures with KC_MIN_DEPS (scripts/min-deps.sh), libcurl and
# libmicrohttpd are linked statically: a build tree without it has them as NEEDED entries, which
# stand for what those static libraries need in their place (OpenSSL, nghttp2, zlib).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: check-dockerfile.sh BUILD_DIR}
df="$repo/Dockerfile"
fail() { echo "FAIL: $*" >&2; exit 1; }

runtime=$(awk '/^FROM .* AS runtime/{on=1} on' "$df")
[ -n "$runtime" ] || fail "no runtime stage (FROM ... AS runtime)"

# COPY lines of the runtime stage (continuations joined).
copies=$(sed -e ':a' -e '/\\$/N; s/\\\n//; ta' <<<"$runtime" | grep -E '^COPY ')
[ -n "$copies" ] || fail "the runtime stage copies nothing"
programs=()
while read -r _ a b c; do
    if [[ "$a" == --from=build ]]; then
        src=$b
        [[ "$src" == /build/* ]] || fail "COPY --from=build of $src: expected a path under /build"
        prog=${src#/build/}
        [ -x "$build/$prog" ] || fail "COPY --from=build $src: $build/$prog was not built"
        programs+=("$build/$prog")
    else
        [ -e "$repo/$a" ] || fail "COPY $a: no such file or folder in the repository"
    fi
done <<<"$copies"
[ ${#programs[@]} -gt 0 ] || fail "no program copied from the build stage"

pkgs=" libc6 $(sed -e ':a' -e '/\\$/N; s/\\\n//; ta' <<<"$runtime" | grep -oE 'apt-get install [^&]*' |
    sed -E 's/apt-get install//; s/-y|--no-install-recommends//g') "
static_min=0
grep -q 'KC_MIN_DEPS' <<<"$(awk '/^FROM .* AS build/{on=1} /^FROM .* AS runtime/{on=0} on' "$df")" &&
    static_min=1
needed() { # needed PROGRAM: its NEEDED libraries as the image's build links them
    local libs
    libs=$(objdump -p "$1" | awk '/NEEDED/ {print $2}')
    if [ "$static_min" = 1 ] && grep -qE '^lib(curl|microhttpd)\.so' <<<"$libs"; then
        libs=$(grep -vE '^lib(curl|microhttpd)\.so' <<<"$libs"
            printf '%s\n' libssl.so.3 libcrypto.so.3 libnghttp2.so.14 libz.so.1)
    fi
    sort -u <<<"$libs"
}
for p in "${programs[@]}"; do
    for lib in $(needed "$p"); do
        path=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ && !f {print $NF; f = 1}')
        [ -n "$path" ] || fail "$(basename "$p") needs $lib, which this machine does not have"
        pkg=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null | awk -F: 'NR == 1 {print $1}' || true)
        [ -n "$pkg" ] || pkg=$(dpkg -S "$path" 2>/dev/null | awk -F: 'NR == 1 {print $1}' || true)
        [ -n "$pkg" ] || fail "no package owns $path"
        [[ "$pkgs" == *" $pkg "* ]] ||
            fail "$(basename "$p") needs $lib from package $pkg, which the runtime stage does not install"
    done
done

# The image-prepull pods copy gpu-operator-hold into other images: it must need no library there.
hold=""
for p in "${programs[@]}"; do [ "$(basename "$p")" != gpu-operator-hold ] || hold=$p; done
[ -n "$hold" ] || fail "the image does not carry gpu-operator-hold (the image-prepull pods run it)"
! objdump -p "$hold" | grep -qE 'NEEDED|INTERP' || fail "gpu-operator-hold is not linked statically"

entry=$(grep -E '^ENTRYPOINT' <<<"$runtime" | sed -E 's/ENTRYPOINT \["([^"]+)".*/\1/')
[ -n "$entry" ] || fail "no ENTRYPOINT"
eprog=$(basename "$entry")
[ -x "$build/$eprog" ] || fail "the entrypoint $entry is not a built program"
"$build/$eprog" --help >/dev/null || fail "$entry --help failed"
user=$(grep -E '^USER ' <<<"$runtime" | tail -n1 | awk '{print $2}')
[ -n "$user" ] && [ "${user%%:*}" != 0 ] && [ "${user%%:*}" != root ] || fail "the image must run as a non-root USER"
echo "Dockerfile: ${#programs[@]} programs, their libraries covered by:$pkgs; entrypoint $entry --help ok; user $user"
