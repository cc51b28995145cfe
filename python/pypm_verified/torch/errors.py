"""The error a model that cannot be loaded raises (shared by the loader and
the archive reader; exported as ``pypm_verified.torch.loader.LoadError``)."""


class LoadError(ValueError):
    """The model cannot be loaded or exported; the message says why."""
