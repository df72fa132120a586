#!/usr/bin/env bash
# CI, part 2 (called by .ci/run after the main tests): the real s3prl, in its own venv (.venv-s3prl),
# installed as README.md's 'Any s3prl upstream' says. About 6-8 minutes on 2 cores, most of it pip.
#   1. torchaudio as PyPI ships it (a CUDA build; its library does not load beside the CPU torch): the
#      offline default run and the upstream tests still work, and exactly one line says torchaudio is off;
#   2. torchaudio's compiled libraries set aside (README): the s3prl tests against the real package;
#   3. the README's s3prl commands as typed: fbank and mfcc (a sweep, then its report), and s3prl's
#      hf_wav2vec2_custom / hf_hubert_custom on tiny local checkpoints; every run and report row is named
#      after its s3prl upstream.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 WANDB_MODE=offline WANDB_SILENT=true
started=$SECONDS
VENV=${S3PRL_VENV:-.venv-s3prl}  # S3PRL_VENV: another folder for it
PY="$VENV/bin/python"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

python3 -m venv "$VENV"
"$PY" -m pip install -q --upgrade pip
"$PY" -m pip install -q torch==2.13.0 -e ".[test,s3prl]"
"$PY" - <<'PY'
import importlib.metadata as md
versions = {d: md.version(d) for d in ("torch", "torchaudio", "s3prl", "transformers")}
print("s3prl venv:", ", ".join(f"{d} {v}" for d, v in versions.items()))
assert versions["torch"].startswith("2.13.0"), "the s3prl extra must not replace the pinned torch"
PY

# 1. torchaudio installed but unloadable: the project runs without it, and says so once
echo "== s3prl venv, torchaudio as installed"
# a fresh cache: the first run a new user makes (a warm run whose clips are all cached imports neither
# transformers nor torchaudio, so it has nothing to say about torchaudio)
"$PY" evaluate.py hydra.run.dir="$WORK/default" paths.cache_dir="$WORK/cache" 2>&1 | tee "$WORK/default.log" | tail -2
if "$PY" -c "import torchaudio" 2>/dev/null; then
  echo "torchaudio loads as installed here; the unloadable case was not exercised"
else
  n=$(grep -c "torchaudio .* is installed but cannot load" "$WORK/default.log" || true)
  [ "$n" -eq 1 ] || { echo "expected one line saying torchaudio cannot load, got $n"; exit 1; }
  grep "torchaudio .* is installed but cannot load" "$WORK/default.log"
fi
"$PY" -m pytest -q -p no:cacheprovider tests/upstream/test_s3prl.py tests/upstream/test_classical.py

# 2. README: set torchaudio's compiled libraries aside (they are CUDA builds; its Python code runs on torch)
TA_LIB=$("$PY" -c "import importlib.util, pathlib; print(pathlib.Path(importlib.util.find_spec('torchaudio').origin).parent / 'lib')")
mkdir -p "$VENV/torchaudio-lib-aside"
find "$TA_LIB" -maxdepth 1 -name '*.so' -exec mv -t "$VENV/torchaudio-lib-aside/" {} +
echo "== s3prl venv, torchaudio's Python code only: the s3prl tests on the real package"
"$PY" -m pytest -q -p no:cacheprovider -rs -W "ignore::DeprecationWarning" tests/upstream/test_s3prl.py \
  | tee "$WORK/pytest.log" | tail -3
! grep -q "SKIPPED" "$WORK/pytest.log" || { echo "real-s3prl tests were skipped: s3prl does not import"; exit 1; }

# 3. the README's commands, as typed (tiny local checkpoints stand in for a user's folders)
"$PY" tests/upstream/s3prl_support.py "$WORK/tiny-wav2vec2" wav2vec2 >/dev/null
"$PY" tests/upstream/s3prl_support.py "$WORK/tiny-hubert" hubert >/dev/null
run_s3prl() {  # expected upstream column, then the command's arguments
  local expected=$1; shift
  echo "== python evaluate.py $*"
  "$PY" evaluate.py "$@" hydra.run.dir="$WORK/run" 2>&1 | tail -2
  "$PY" - "$WORK/run/results.csv" "$expected" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert rows and {r["upstream"] for r in rows} == {sys.argv[2]}, ({r["upstream"] for r in rows}, sys.argv[2])
print(f"upstream {rows[0]['upstream']}: d={float(rows[0]['d']):.3f}, mean frames {rows[0]['mean_frames']}")
PY
  rm -rf "$WORK/run"
}
echo "== python evaluate.py -m upstream=s3prl upstream.name=fbank,mfcc; python evaluate.py task=report sweep_dir=..."
"$PY" evaluate.py -m upstream=s3prl upstream.name=fbank,mfcc hydra.sweep.dir="$WORK/sweep" 2>&1 | tail -1
"$PY" evaluate.py task=report sweep_dir="$WORK/sweep" hydra.run.dir="$WORK/report" 2>&1 | tail -1
"$PY" - "$WORK/report" <<'PY'
import csv, sys
for table in ("results.csv", "layers.csv"):  # one row/run per s3prl upstream, not one 's3prl'
    shown = {r["upstream"] for r in csv.DictReader(open(f"{sys.argv[1]}/{table}"))}
    assert shown == {"s3prl:fbank", "s3prl:mfcc"}, (table, shown)
print("report: s3prl:fbank and s3prl:mfcc kept apart in results.csv and layers.csv")
PY
run_s3prl "s3prl:hf_wav2vec2_custom@$WORK/tiny-wav2vec2" \
  upstream=s3prl upstream.name=hf_wav2vec2_custom upstream.path_or_url="$WORK/tiny-wav2vec2"
run_s3prl "s3prl:hf_hubert_custom@$WORK/tiny-hubert" \
  upstream=s3prl upstream.name=hf_hubert_custom upstream.path_or_url="$WORK/tiny-hubert"
echo "s3prl CI: $((SECONDS - started)) s"
