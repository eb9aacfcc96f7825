#!/usr/bin/env bash
# Installs the Debian packages the tests need and the machine lacks; does nothing when all are present.
# Chromium (headless WebGPU on SwiftShader), the voices and audio tools the fixtures use, Debian's
# PyTorch and friends for the training smoke test and the Python references, redis-server for the archive
# queue's tests (they start their own on a free port). `npm test` runs this first.
set -euo pipefail

packages=(
  chromium espeak-ng sox libsox-fmt-mp3 ffmpeg festival festvox-kallpc16k flite fortunes fortunes-min
  python3-torch python3-numpy python3-onnx python3-sentencepiece python3-jinja2 python3-pytest libopenblas0-pthread
  redis-server
)

need=()
fail() {
  echo "system-packages: $*" >&2
  echo "system-packages: as root, run: apt-get install -y --no-install-recommends ${need[*]:-${packages[*]}}" >&2
  exit 1
}

command -v dpkg >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 ||
  fail "no dpkg/apt-get: the tests need a Debian-based machine with these packages"

for pkg in "${packages[@]}"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
[ ${#need[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1; then
  sudo=(sudo)
else
  fail "missing ${need[*]}, and not root with no sudo to install them"
fi

echo "system-packages: installing ${need[*]}" >&2
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q || fail "apt-get update failed"
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" ||
  fail "apt-get install failed for ${need[*]}"
