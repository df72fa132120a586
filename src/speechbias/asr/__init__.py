"""ASR disparity analysis: transcription, text normalisation, per-utterance WER counts, disparity tables."""
