"""The authors' matching replay (propensity_model: authors_folds) against the real psmpy (marker: reference).

The SpEAT authors matched US and Korean speakers with psmpy 0.3.13 (``logistic_ps(balance=True)``,
``knn_matched(matcher="propensity_score", replacement=False, caliper=0.001)``) on the scikit-learn of
their time. This runs that psmpy, in an interpreter of its own (``PSMPY_PYTHON``, else ``.venv-psmpy``
beside the project, which ``.ci/run`` makes with psmpy==0.3.13, scikit-learn==1.2.2, numpy<2,
pandas<2.1), on candidate sets cut from the paper's speaker table, and compares the pairs one by one:
the paper's set, sets whose last fold psmpy tops up from rows already folded (US speakers dropped
from the end, 4 whole folds), sets with one whole fold (the smaller group's drawn rows move too), and
random subsets. Skipped when no such interpreter is there. scikit-learn >= 1.3 breaks exact-distance
ties in another order (1.9.1: 37 of the paper's 59 pairs): the replay follows the authors' version.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from speechbias.stimuli.corpora.saa import read_saa_metadata
from speechbias.stimuli.selection import targets as T
from speechbias.stimuli.selection.authors_psm import knn_caliper_pairs
from speechbias.stimuli.selection.propensity import authors_fold_scores

from tests.stimuli import corpus_trees as trees

pytestmark = pytest.mark.reference

REPO = Path(__file__).resolve().parents[2]
PSMPY_PYTHON = Path(os.environ.get("PSMPY_PYTHON", REPO / ".venv-psmpy" / "bin" / "python"))

PSMPY_PAIRS = r"""
import json, sys, warnings
import pandas as pd
from psmpy import PsmPy
warnings.simplefilter("ignore")
out = {}
for path in sys.argv[1:]:
    psm = PsmPy(pd.read_csv(path), treatment="treated", indx="speaker", exclude=[])
    psm.logistic_ps(balance=True)
    psm.knn_matched(matcher="propensity_score", replacement=False, caliper=0.001)
    m = psm.matched_ids.dropna()
    out[path] = sorted([str(a), str(b)] for a, b in zip(m.iloc[:, 0], m.iloc[:, 1]))
print(json.dumps(out))
"""


def _have_psmpy() -> bool:
    if not PSMPY_PYTHON.is_file():
        return False
    return subprocess.run([str(PSMPY_PYTHON), "-c", "import psmpy, sklearn"], capture_output=True).returncode == 0


def _candidate_sets(us: pd.DataFrame) -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(7)
    sets = {"paper": us}
    sets |= {f"last_{d}_dropped": us.iloc[: len(us) - d] for d in (25, 30, 33, 40, 43)}  # 4 folds, top-up
    sets |= {f"first_{n}_kept": us.iloc[:n] for n in (97, 105, 110)}  # one fold, top-up
    for i in range(4):
        keep = np.sort(rng.choice(len(us), size=len(us) - int(rng.integers(20, 60)), replace=False))
        sets[f"random_{i}"] = us.iloc[keep]
    return sets


@pytest.mark.skipif(not trees.SHARED_PAPER_DATA.is_dir(), reason="../shared/data/speat_paper not available")
@pytest.mark.skipif(not _have_psmpy(), reason=f"no psmpy reference interpreter at {PSMPY_PYTHON} (see .ci/run)")
def test_authors_folds_pairs_equal_psmpys_pair_for_pair(tmp_path):
    saa = read_saa_metadata(trees.SHARED_PAPER_DATA / "speech_accent_archive" / "speaker_list.csv")
    us, ko = T._usable_saa(T.us_native_english(saa)), T._usable_saa(T.korean_native_korean(saa))
    ours, paths, top_ups = {}, [], 0
    for name, cut in _candidate_sets(us).items():
        both = pd.concat([ko, cut])
        treated = pd.Series(np.r_[np.ones(len(ko), bool), np.zeros(len(cut), bool)], index=both.index)
        cov = pd.DataFrame({"age": both["age"].astype(float), "male": (both["sex"] == "male").astype(float)})
        top_ups += 0 < len(cut) % len(ko) <= 20
        pairs = knn_caliper_pairs(authors_fold_scores(treated, cov), treated, 0.001)
        speaker = both["speaker"]
        path = tmp_path / f"{name}.csv"
        pd.DataFrame(
            {"speaker": speaker.to_numpy(), "treated": treated.astype(int).to_numpy(), **cov.to_dict("list")}
        ).to_csv(path, index=False)
        paths.append(str(path))
        ours[str(path)] = sorted([a, b] for a, b in zip(speaker[pairs["treated"]], speaker[pairs["control"]]))
    assert top_ups >= 8  # the branch this test is about is reached
    script = tmp_path / "psmpy_pairs.py"
    script.write_text(PSMPY_PAIRS)
    done = subprocess.run([str(PSMPY_PYTHON), str(script), *paths], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    reference = json.loads(done.stdout)
    for path in paths:
        assert ours[path] == reference[path], Path(path).stem
    assert len(reference[paths[0]]) == 59  # the paper's set: the paper's 59 pairs
