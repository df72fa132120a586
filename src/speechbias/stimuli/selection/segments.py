"""Cut selected segments (``start_s``..``end_s`` of a long recording) into their own WAV files.

Manifests point at whole files, so interview segments (Buckeye, CORAAL) are written once to a
folder next to the manifest. The source file and times stay in the table (``source_path``,
``start_s``, ``end_s``). Writing is atomic and skipped when the file already exists.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import soundfile as sf

from speechbias.fileio.atomic_file import atomic_write
from speechbias.fileio.audio import AudioError


def _safe_name(clip_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", clip_id)


def cut_segments(clips: pd.DataFrame, out_dir: str | Path) -> pd.DataFrame:
    """Rows with ``start_s``/``end_s`` get a new ``path`` to their cut-out WAV (original sample rate) and
    ``source_path`` the recording it was cut from ("" on the other rows)."""
    out_dir = Path(out_dir)
    out = clips.copy()
    is_segment = out["start_s"].notna()
    out_dir.mkdir(parents=True, exist_ok=True)
    out["source_path"] = ""
    for i in out.index[is_segment]:
        src, start, end = Path(out.at[i, "path"]), float(out.at[i, "start_s"]), float(out.at[i, "end_s"])
        target = out_dir / f"{_safe_name(out.at[i, 'clip_id'])}.wav"
        if not target.is_file():
            try:
                info = sf.info(str(src))
                first, last = int(round(start * info.samplerate)), int(round(end * info.samplerate))
                if first >= info.frames or last <= first:
                    raise AudioError(
                        src,
                        f"segment {start:.3f}-{end:.3f} s lies outside the recording "
                        f"({info.frames / info.samplerate:.3f} s)",
                    )
                data, sr = sf.read(str(src), start=first, stop=min(last, info.frames), always_2d=True)
            except AudioError:
                raise
            except Exception as exc:
                raise AudioError(src, f"cannot read segment {start:.3f}-{end:.3f} s ({exc})") from exc
            atomic_write(target, lambda tmp, data=data, sr=sr: sf.write(str(tmp), data, sr, subtype="PCM_16"))
        out.at[i, "source_path"] = str(src)
        out.at[i, "path"] = str(target)
    return out
