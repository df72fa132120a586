"""Audio and file I/O: decoding any audio file to float32 mono at SAMPLE_RATE (audio), the length a
container's own bytes declare (audio_container), and the one atomic writer (atomic_file)."""
