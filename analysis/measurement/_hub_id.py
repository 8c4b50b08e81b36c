"""A Hub id as a set's address: `hf://datasets/ORG/NAME[@REVISION]`, read from the local Hugging
Face cache (nothing is downloaded). `load` resolves it; the Hub export (`_hub`) writes what it names."""

import os
from pathlib import Path

from ._build import MeasurementSetError

HUB_PREFIX = "hf://datasets/"


def hub_path(source: str | os.PathLike) -> Path:
    """The local folder of `source`: a path as it is, or `hf://datasets/ORG/NAME[@REVISION]`
    resolved in the local Hugging Face cache (never downloaded; one-line error if absent)."""
    text = os.fspath(source)
    if not text.startswith(HUB_PREFIX):
        return Path(text)
    repo, _, revision = text[len(HUB_PREFIX):].partition("@")
    if repo.count("/") != 1 or not all(repo.split("/")):
        raise MeasurementSetError(text, "a Hub id is hf://datasets/ORG/NAME[@REVISION]")
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError
    except ImportError:
        raise MeasurementSetError(text, "reading a Hub id needs huggingface_hub "
                                        "(pip install 'otbench[hub]')") from None
    try:
        return Path(snapshot_download(repo, repo_type="dataset", revision=revision or None,
                                      local_files_only=True))
    except (LocalEntryNotFoundError, FileNotFoundError, OSError):
        raise MeasurementSetError(text, f"not in the local Hugging Face cache; download it "
                                        f"first (hf download {repo} "
                                        f"--repo-type dataset)") from None
