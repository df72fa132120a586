"""JSON records that carry an xxh3-128 checksum of their own body: the audio index's format.

A record is a JSON object with a ``checksum`` key (``xxh3_128:<32 hex>`` of the rest as canonical JSON:
sorted keys). The checksum guards against accidental corruption (a flipped bit, a cut file), not tampering.
Import-light: standard library and xxhash.
"""

from __future__ import annotations

import json

import xxhash

CHECKSUM_PREFIX = "xxh3_128:"


def text_checksum(text: str) -> str:
    """``xxh3_128:<32 hex>`` of ``text`` (UTF-8)."""
    return CHECKSUM_PREFIX + xxhash.xxh3_128_hexdigest(text.encode())


def with_checksum(body: dict) -> dict:
    """``body`` and its ``checksum``."""
    return {**body, "checksum": text_checksum(json.dumps(body, sort_keys=True))}


def verified_body(text: str) -> dict:
    """The body of the record ``text`` (without its checksum); ValueError when it is no JSON object,
    has no checksum or its checksum does not match."""
    rec = json.loads(text)
    if not isinstance(rec, dict) or "checksum" not in rec:
        raise ValueError("no checksum")
    body = {k: v for k, v in rec.items() if k != "checksum"}
    if text_checksum(json.dumps(body, sort_keys=True)) != rec["checksum"]:
        raise ValueError("checksum mismatch")
    return body
