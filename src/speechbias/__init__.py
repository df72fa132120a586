"""speechbias: measure social bias in speech models.

Four methods share one pipeline (see ARCHITECTURE.md): SpEAT (intrinsic embedding association),
bias propagation to speech emotion recognition, ASR disparities, and Spoken StereoSet.
"""

__version__ = "0.1.0"
