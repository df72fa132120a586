"""What an audio file's own bytes declare about its length, read without decoding.

Used by :func:`speechbias.fileio.audio.load_audio` to tell a truncated file from a short one: the WAV/RF64
``data`` chunk size, the FLAC STREAMINFO total, an MP3 Xing/Info/VBRI frame count (untagged MP3s: a
walk over the MPEG frame headers), and for Ogg (Vorbis, Opus) a walk over the pages. Written by hand
because neither soundfile nor libsndfile exposes these declared lengths (libsndfile decodes a cut file
silently up to the cut). "Samples" are per channel, at the file's own sample rate.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ContainerFinding:
    """What a file's bytes say about its length, read without decoding.

    ``declared``: samples per channel the container declares (None: it declares none);
    ``source``: where that number comes from; ``defect``: a structural sign of a cut (None: intact);
    ``stream_samples``/``frame_samples``: for an untagged MP3, the samples its frame headers add up
    to and the samples of one frame (libsndfile only estimates such a file's length).
    """

    declared: int | None = None
    source: str = ""
    defect: str | None = None
    stream_samples: int | None = None
    frame_samples: int = 0


def truncation(finding: ContainerFinding, decoded: int) -> str | None:
    """A 'looks truncated' sentence when the bytes show a cut or fewer samples decoded than declared."""
    short = finding.declared is not None and decoded < finding.declared
    if not short and finding.defect is None:
        return None
    counts = (
        f"declared {finding.declared} samples ({finding.source}), decoded {decoded}"
        if finding.declared is not None
        else f"decoded {decoded} samples"
    )
    return f"looks truncated: {counts}" + (f"; {finding.defect}" if finding.defect else "")


def inspect_container(p: Path, reported: int | None) -> ContainerFinding:
    """Dispatch on the file's magic bytes (not its suffix); ``reported`` is libsndfile's frame count."""
    with p.open("rb") as fh:
        head = fh.read(64)
    if head[:4] in (b"RIFF", b"RIFX", b"RF64") and head[8:12] == b"WAVE":
        return _riff_finding(p)
    if head[:4] == b"fLaC":
        return _flac_finding(head)
    if head[:4] == b"OggS":
        return _ogg_finding(p, reported)
    if head[:3] == b"ID3" or _mpeg_frame(head[:4]) is not None:
        return _mpeg_finding(p, reported)
    return ContainerFinding(declared=reported, source="header")


# WAV: the data chunk's byte count against the bytes present -----------------------------------

_PCM_FORMAT_TAGS = {0x0001, 0x0003, 0x0006, 0x0007}  # PCM, IEEE float, A-law, mu-law: frame = block_align bytes
_WAVE_FORMAT_EXTENSIBLE = 0xFFFE
_SIZE_PLACEHOLDERS = {0, 0xFFFFFFFF}  # data sizes written by streaming writers that never came back


def _riff_finding(p: Path) -> ContainerFinding:
    """RIFF/RIFX/RF64 WAVE: walk the chunks to ``data``; a data chunk longer than the file is a cut."""
    size = p.stat().st_size
    with p.open("rb") as fh:
        magic = fh.read(12)[:4]
        order = "big" if magic == b"RIFX" else "little"
        rf64_data_size = frame_bytes = fact_frames = None
        offset = 12
        while offset + 8 <= size:
            fh.seek(offset)
            header = fh.read(8)
            chunk_id, chunk_size = header[:4], int.from_bytes(header[4:8], order)
            body = offset + 8
            if chunk_id == b"ds64":  # RF64: riff size (8), data size (8), sample count (8)
                rf64_data_size = int.from_bytes(fh.read(16)[8:16], "little")
            elif chunk_id == b"fmt ":
                fmt = fh.read(min(chunk_size, 26))
                tag = int.from_bytes(fmt[0:2], order)
                if tag == _WAVE_FORMAT_EXTENSIBLE and len(fmt) >= 26:  # the sub-format GUID starts with the tag
                    tag = int.from_bytes(fmt[24:26], order)
                block_align = int.from_bytes(fmt[12:14], order) if len(fmt) >= 14 else 0
                frame_bytes = block_align if tag in _PCM_FORMAT_TAGS and block_align > 0 else None
            elif chunk_id == b"fact":
                fact_frames = int.from_bytes(fh.read(4), order)
            elif chunk_id == b"data":
                if magic == b"RF64" and chunk_size == 0xFFFFFFFF and rf64_data_size is not None:
                    chunk_size = rf64_data_size
                elif chunk_size in _SIZE_PLACEHOLDERS:
                    return ContainerFinding()
                present = size - body
                declared = chunk_size // frame_bytes if frame_bytes else fact_frames
                defect = (
                    f"the WAV data chunk declares {chunk_size} bytes, the file holds {present}"
                    if present < chunk_size
                    else None
                )
                return ContainerFinding(declared=declared, source="WAV data chunk", defect=defect)
            offset = body + chunk_size + (chunk_size & 1)  # chunks are padded to even sizes
    return ContainerFinding()


# FLAC: the STREAMINFO total ---------------------------------------------------------------------


def _flac_finding(head: bytes) -> ContainerFinding:
    """STREAMINFO (the first metadata block) holds a 36-bit total sample count; 0 means unknown."""
    if len(head) < 26 or head[4] & 0x7F != 0:
        return ContainerFinding()
    total = int.from_bytes(head[18:26], "big") & ((1 << 36) - 1)
    return ContainerFinding(declared=total or None, source="FLAC STREAMINFO")


# Ogg (Vorbis, Opus): every page whole, every logical stream closed by an end-of-stream page -------

_OGG_EOS = 0x04


def _ogg_finding(p: Path, reported: int | None) -> ContainerFinding:
    """Walk the Ogg page headers (RFC 3533); libsndfile's count is the last page's granule position."""
    size = p.stat().st_size
    open_streams: set[int] = set()
    offset, defect = 0, None
    with p.open("rb") as fh:
        while offset < size:
            fh.seek(offset)
            header = fh.read(27)
            if len(header) < 27 and b"OggS".startswith(header[:4]):
                defect = f"the file ends inside an Ogg page header at byte {offset} of {size}"
                break
            if header[:4] != b"OggS":
                break  # bytes after the last page: harmless if every stream has ended
            lacing = fh.read(header[26])
            end = offset + 27 + header[26] + sum(lacing)
            if len(lacing) < header[26] or end > size:
                defect = f"the Ogg page at byte {offset} needs {end - offset} bytes, {size - offset} present"
                break
            serial = int.from_bytes(header[14:18], "little")
            if header[5] & _OGG_EOS:
                open_streams.discard(serial)
            else:
                open_streams.add(serial)
            offset = end
    if defect is None and open_streams:
        defect = "the Ogg stream ends without its end-of-stream page"
    # a cut stream's last whole page is no declaration of its length, so only an intact one counts
    return ContainerFinding(declared=reported if defect is None else None, source="last Ogg page", defect=defect)


# MP3: a Xing/Info/VBRI frame count, or a walk over the frame headers ------------------------------

_MPEG_KBPS = {  # (MPEG version 1 or 2 [2.5 shares 2's table], layer) -> bitrate index -> kbit/s
    (1, 1): (0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448),
    (1, 2): (0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384),
    (1, 3): (0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320),
    (2, 1): (0, 32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256),
    (2, 2): (0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160),
    (2, 3): (0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160),
}
_MPEG_RATES = {1: (44100, 48000, 32000), 2: (22050, 24000, 16000), 25: (11025, 12000, 8000)}
_MPEG_VERSIONS = {0: 25, 2: 2, 3: 1}  # header bits 19-20 -> MPEG 2.5, 2, 1 (1 is reserved)
_MPEG_LAYERS = {1: 3, 2: 2, 3: 1}  # header bits 17-18 -> layer (0 is reserved)


@dataclass(frozen=True)
class _MpegFrame:
    """One MPEG audio frame header: ``length`` bytes (header included), ``samples`` per channel,
    ``tag_offset`` where a Xing/Info tag would start, counted from the frame start."""

    length: int
    samples: int
    tag_offset: int


def _mpeg_frame(header: bytes) -> _MpegFrame | None:
    """Parse a 4-byte MPEG-1/2/2.5 layer I-III frame header; None if it is not one."""
    if len(header) < 4:
        return None
    h = int.from_bytes(header[:4], "big")
    version, layer = _MPEG_VERSIONS.get((h >> 19) & 3), _MPEG_LAYERS.get((h >> 17) & 3)
    bitrate_index, rate_index = (h >> 12) & 0xF, (h >> 10) & 3
    if h >> 21 != 0x7FF or version is None or layer is None or bitrate_index in (0, 15) or rate_index == 3:
        return None
    bitrate = 1000 * _MPEG_KBPS[(min(version, 2), layer)][bitrate_index]
    rate, padding = _MPEG_RATES[version][rate_index], (h >> 9) & 1
    if layer == 1:
        samples, length = 384, (12 * bitrate // rate + padding) * 4
    else:
        samples = 576 if layer == 3 and version != 1 else 1152
        length = samples // 8 * bitrate // rate + padding
    mono = (h >> 6) & 3 == 3
    side_info = (17 if mono else 32) if version == 1 else (9 if mono else 17)
    crc = 0 if (h >> 16) & 1 else 2
    return _MpegFrame(length=length, samples=samples, tag_offset=4 + crc + side_info)


def _id3v2_end(data: bytes) -> int:
    """Byte offset just past a leading ID3v2 tag (0 if none); its size is 4 syncsafe 7-bit bytes."""
    if data[:3] != b"ID3" or len(data) < 10:
        return 0
    size = (data[6] << 21) | (data[7] << 14) | (data[8] << 7) | data[9]
    return 10 + size + (10 if data[5] & 0x10 else 0)


def _mpeg_finding(p: Path, reported: int | None) -> ContainerFinding:
    """A Xing/Info/VBRI frame count makes libsndfile's count a declaration; else walk the frames."""
    with p.open("rb") as fh:
        start = _id3v2_end(fh.read(10))
        fh.seek(start)
        head = fh.read(64)
    first = _mpeg_frame(head[:4])
    if first is None:
        return ContainerFinding()
    tag = head[first.tag_offset : first.tag_offset + 12]
    if tag[:4] in (b"Xing", b"Info") and len(tag) == 12 and tag[7] & 0x01:  # flag bit 0: frame count present
        declared = reported if reported is not None else int.from_bytes(tag[8:12], "big") * first.samples
        return ContainerFinding(declared=declared, source="MP3 Xing/Info header")
    if head[36:40] == b"VBRI" and len(head) >= 54:  # VBRI: version, delay, quality, bytes, frames
        declared = reported if reported is not None else int.from_bytes(head[50:54], "big") * first.samples
        return ContainerFinding(declared=declared, source="MP3 VBRI header")
    data = p.read_bytes()  # untagged: libsndfile only estimates the length, so count the frames
    offset, samples = start, 0
    while (frame := _mpeg_frame(data[offset : offset + 4])) is not None:
        if offset + frame.length > len(data):
            present = len(data) - offset
            defect = f"its last MPEG frame at byte {offset} needs {frame.length} bytes, {present} present"
            return ContainerFinding(defect=defect)
        samples += frame.samples
        offset += frame.length
    return ContainerFinding(stream_samples=samples, frame_samples=first.samples)
