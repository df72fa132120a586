"""speechbias: measure social bias in speech models.

Four methods share one pipeline (see ARCHITECTURE.md): SpEAT (intrinsic embedding association),
bias propagation to speech emotion recognition, ASR disparities, and Spoken StereoSet.
"""

from speechbias.optional_torchaudio import install_import_hook

__version__ = "0.1.0"

# an installed torchaudio that cannot load (a CUDA build beside a CPU torch) is hidden before
# transformers or s3prl would import it, with one warning line (speechbias.optional_torchaudio)
install_import_hook()
