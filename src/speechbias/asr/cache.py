"""On-disk hypothesis cache: one small JSON file per (model fingerprint, audio sha256).

Layout: ``<root>/<fingerprint>/<sha[:2]>/<sha>.json`` with ``{"hypothesis", "audio_sha256",
"model"}``. Writes are atomic (temp file + rename), so an interrupted run loses at most the batch
in flight and a re-analysis never re-transcribes. A corrupt entry is treated as missing.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from speechbias.fileio.atomic_file import atomic_write

log = logging.getLogger(__name__)


class HypothesisCache:
    def __init__(self, root: str | Path, fingerprint: str, model_fields: dict | None = None):
        if not fingerprint:
            raise ValueError("fingerprint is empty")
        self.dir = Path(root) / fingerprint
        self.fingerprint = fingerprint
        self.model_fields = model_fields or {}

    def path(self, audio_sha256: str) -> Path:
        return self.dir / audio_sha256[:2] / f"{audio_sha256}.json"

    def get(self, audio_sha256: str) -> str | None:
        p = self.path(audio_sha256)
        if not p.is_file():
            return None
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
            text = data["hypothesis"]
            if data.get("audio_sha256") != audio_sha256 or not isinstance(text, str):
                raise ValueError("entry does not match its key")
            return text
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring corrupt hypothesis cache entry %s (%s)", p, exc)
            return None

    def put(self, audio_sha256: str, hypothesis: str) -> Path:
        text = json.dumps(
            {"hypothesis": hypothesis, "audio_sha256": audio_sha256, "model": self.model_fields}, default=str
        )
        return atomic_write(self.path(audio_sha256), lambda tmp: tmp.write_text(text, encoding="utf-8"))
