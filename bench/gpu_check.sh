#!/usr/bin/env bash
# The check that needs a real NVIDIA card (docs/adr/0019), as one prepared command for a lent
# device machine (16 cores, an H200, CUDA 13.0's nvcc, no network). Never part of the tests.
#
#   bench/gpu_check.sh --prepare   # here: writes .gpucheck/ (git-ignored; about 57 MiB)
#   bench/gpu_check.sh             # there, with .gpucheck carried: results under $OUT
#
# --prepare packs what the device lacks: the CUDA llama-server built here (bin/ and record of
# `nodeau server install --cuda-arch 90`), the CPU build, and the wheels of the Python
# packages its image does not hold. On the device it runs, in about 2 minutes:
#   1. `nodeau server install` finding the carried build, `--list-devices`, `environment`;
#   2. the NVML adapter's contract against the real card (tests/contract/test_gpu_inventory.py);
#   3. `models import`, `run`, the openai client answering from the card, `ps` and `service
#      explain`; `model qualify` on the card, then `run` admitted by NVML's measured peak;
#      then the CPU build refused the real card;
#   4. bench/gpu_memory.py: predicted vs NVML peak for the admission matrix (--quick when
#      less than 5 minutes are left), its table into $OUT/memory-h200.md (and .jsonl);
#      GPU_CHECK_MEMORY=0 leaves it out.
set -uo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
pack="$here/.gpucheck"
WHEELS="attrs cattrs returns cyclopts docstring-parser rich-rst gguf starlette uvicorn
httptools openai pydantic pydantic-core jiter distro typing-inspection
annotated-types cryptography cffi pycparser jsonschema jsonschema-specifications referencing
rpds-py sniffio httpx2 httpcore2 truststore"

if [ "${1:-}" = --prepare ]; then
  set -e
  grep -qx '/.gpucheck/' "$here/.git/info/exclude" 2>/dev/null || echo /.gpucheck/ >>"$here/.git/info/exclude"
  rm -rf "$pack" && mkdir -p "$pack/whl"
  . "$here/scripts/_venv"
  built=$(nodeau server install --cuda-arch 90 --json)
  bin=$(printf '%s' "$built" | python -c 'import json, sys; print(json.load(sys.stdin)["binary"])')
  # stripped and packed hard: the working tree, the wheels and both builds must fit the
  # device tool's 64 MiB
  rm -rf "$pack/cuda" && mkdir -p "$pack/cuda" && cp -a "$(dirname "$bin")" "$pack/cuda/bin"
  cp "$(dirname "$(dirname "$bin")")/nodeau-build.json" "$pack/cuda/"
  # the CPU build, to show that a real card is never given to a server that cannot use it
  cpu=$(nodeau server install --cpu --json | python -c 'import json, sys; print(json.load(sys.stdin)["binary"])')
  cp -a "$(dirname "$cpu")" "$pack/cpu"
  find "$pack/cuda" "$pack/cpu" -type f ! -name '*.json' -exec strip --strip-unneeded {} +
  tar -C "$pack/cuda" -cf - . | xz -9e -T2 >"$pack/cuda-bin.tar.xz"
  tar -C "$pack/cpu" -cf - . | xz -9e -T2 >"$pack/cpu-bin.tar.xz"
  rm -rf "$pack/cuda" "$pack/cpu"
  for name in $WHEELS; do
    version=$(python -m pip show "$name" 2>/dev/null | sed -n 's/^Version: //p' || true)
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
      --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
      --platform manylinux2014_x86_64 --platform any -d "$pack/whl" "$name${version:+==$version}"
  done
  du -sh "$pack"
  exit 0
fi

out="${OUT:-/tmp/gpu-check}"; mkdir -p "$out"
started=$(date +%s)
left() { echo $(( 540 - ($(date +%s) - started) )); }
log="$out/gpu-check.log"
exec > >(tee -a "$log") 2>&1
cd "$here"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
  "$pack"/whl/*.whl || exit 1
export PYTHONPATH="/tmp/site:$here/.typecheck:$here" PYTHONUNBUFFERED=1
export XDG_CACHE_HOME=/tmp/cache NODEAU_HOME=/tmp/nodeau-home NODEAU_MACHINE=h200
nodeau() { python3 -c 'from nodeau.apps.cli.main import run; run()' "$@"; }
# the CUDA runtime libraries: the image's own (PyTorch's nvidia-* packages)
cuda_libs=$(python3 -c 'import nvidia, os; print(":".join(os.path.join(p, "cu13", "lib") for p in nvidia.__path__))' 2>/dev/null)
for lib in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$lib" ] && cuda_libs="$cuda_libs:$lib"
done
export LD_LIBRARY_PATH="$cuda_libs:${LD_LIBRARY_PATH:-}"
echo "CUDA libraries from: $cuda_libs"; command -v nvcc && nvcc --version | tail -2
nvidia-smi --query-gpu=name,uuid,driver_version,memory.total --format=csv

echo "== 1. the CUDA build carried from where it was made"
home=$XDG_CACHE_HOME/nodeau/llama-server/0.3.36
mkdir -p "$home/cuda-90" && tar -C "$home/cuda-90" -xJf "$pack/cuda-bin.tar.xz"
server="$home/cuda-90/bin/llama-server"
# the build's record, moved with it: `nodeau server install` finds and reuses this build
sed -i "s|\"binary\": \"[^\"]*\"|\"binary\": \"$server\"|" "$home/cuda-90/nodeau-build.json"
# a build's RUNPATH names the folder it was built in: moved, it finds its libraries here
export LD_LIBRARY_PATH="$home/cuda-90/bin:$LD_LIBRARY_PATH"
ldd "$server" | grep -E "cuda|cublas|not found"
"$server" --list-devices | grep -q CUDA0 ||
  echo "THE CARRIED BUILD DOES NOT SEE THE CARD (its libraries above; its answer below)"
"$server" --list-devices | tee "$out/list-devices.txt"
nodeau server install --cuda-arch 90
nodeau environment --json > "$out/environment.json"
export NODEAU_LLAMA_SERVER="$server"

echo "== 2. the NVML adapter's contract on the real card"
python3 -m pytest -v -p no:cacheprovider tests/contract/test_gpu_inventory.py 2>&1 |
  grep -E "real|driver|passed|failed|rror"

echo "== 3. run on the card, and the openai client's answer"
python3 - <<'PY'
from pathlib import Path
from tests.support.builders.tiny_gguf import write_tiny_llama
write_tiny_llama(Path("/tmp/tiny.gguf"), n_layers=4, n_embd=256, n_head=8, n_head_kv=2,
                 n_ff=512, quant="q8_0", context=4096)
PY
nodeau environment
nodeau models import /tmp/tiny.gguf --alias tiny
nodeau run tiny --unproved --context 4096 --json > "$out/run.json"
nodeau ps
nodeau service explain tiny | tee "$out/explain.txt"
python3 - "$out/run.json" <<'PY'
import json, sys
import openai
endpoint = json.load(open(sys.argv[1]))["workload"]["endpoint"]
reply = openai.OpenAI(base_url=endpoint, api_key="local").chat.completions.create(
    model="tiny", messages=[{"role": "user", "content": "hello"}], max_tokens=8)
print("answered from the card:", repr(reply.choices[0].message.content), reply.usage)
PY
nvidia-smi --query-compute-apps=pid,used_memory --format=csv
nodeau stop tiny --workload

echo "== 3b. qualified on the card: NVML's peak is the admission figure"
nodeau model qualify tiny --context 4096 | grep -A4 "memory at its peak"
nodeau model info tiny | grep -A3 "measured configurations"
nodeau run tiny --unproved --context 4096 > /dev/null
nodeau service explain tiny | tee "$out/explain-measured.txt"
nodeau stop tiny --workload

echo "== 3c. a CPU-only server is never given the real card"
mkdir -p /tmp/cpu-server && tar -C /tmp/cpu-server -xJf "$pack/cpu-bin.tar.xz"
LD_LIBRARY_PATH="/tmp/cpu-server:$LD_LIBRARY_PATH" NODEAU_LLAMA_SERVER=/tmp/cpu-server/llama-server nodeau run tiny --name on-cpu --unproved \
  --context 4096 --json; echo "exit $? (a refusal is what is wanted)"
nodeau ps

[ "${GPU_CHECK_MEMORY:-1}" = 0 ] && { echo "done in $(( $(date +%s) - started )) s"; exit 0; }
echo "== 4. predicted vs NVML peak ($(left) s left)"
quick=""; [ "$(left)" -lt 300 ] && quick=--quick
timeout "$(( $(left) > 30 ? $(left) - 20 : 10 ))" python3 bench/gpu_memory.py --server "$server" \
  --out "$out/memory-h200.md" $quick
echo "done in $(( $(date +%s) - started )) s"
